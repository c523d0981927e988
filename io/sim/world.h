// SimWorld: the simulated universe one run lives in. It owns virtual time (one event queue
// ordered by (time, sequence)), the run's seeded streams, the trace, the fault and event
// counters, every node's machine (its disk, clock and SimEnv, which outlive the node process),
// the node processes themselves (queen::Node objects), and the link to simulated clients.
//
// Contract:
// - Everything that happens is an event dispatched by step(); an event addressed to a node
//   process is dropped if that process has crashed since it was scheduled, and deferred while
//   the node is paused. Same seed, same calls → same trace, same hash.
// - A crash destroys the Node object (as if the process exited), drops its timers, pending
//   syncs and client requests, and applies the disk's crash model; a restart builds a new
//   Node over the same disk and calls start() with the files found there (the real recovery).
// - Env::fatal crashes the node once the event that called it returns.
// - Replies: each handle is answered at most once (a second reply is a violation); a reply is
//   delivered to its client after a client-network delay, or lost with reply_loss_per_mille
//   (the command applied; the answer never arrived).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <queue>
#include <string>
#include <string_view>
#include <vector>

#include "core/node/node.h"
#include "io/sim/clock.h"
#include "io/sim/disk.h"
#include "io/sim/network.h"
#include "io/sim/rng.h"
#include "io/sim/trace.h"

namespace queen::sim {

constexpr int64_t kEpochUs = 1'700'000'000'000'000;  // virtual time zero, in unix microseconds

// Who an event is for: the world (node < 0) or one incarnation of a node process.
struct EventTarget {
  int node = -1;
  uint64_t incarnation = 0;
};

// A simulated client's end of the connection.
class ClientSink {
 public:
  virtual ~ClientSink() = default;
  // The node handed `reply` to its environment (node order); `lost` says the client will
  // never get it.
  virtual void on_reply_sent(ReplyHandle handle, const Reply& reply, bool lost) = 0;
  // The reply reached the client.
  virtual void on_reply(ReplyHandle handle, const Reply& reply) = 0;
};

// Faults the world injects between nodes and clients; heal() turns them off.
struct ClientNetFaults {
  uint32_t reply_loss_per_mille = 0;
  int64_t delay_us_min = 50;
  int64_t delay_us_max = 2000;
};

struct NodeSetup {
  NodeConfig config;
  DiskFaultRates disk;
  ClockModel clock;
  int64_t restart_delay_us_min = 10'000;
  int64_t restart_delay_us_max = 2'000'000;
};

struct Violation {
  std::string invariant;
  std::string detail;
  int64_t elapsed_us = 0;
  std::vector<std::string> trace_tail;
};

using Counters = std::map<std::string, uint64_t>;

class SimEnv;

class SimWorld {
 public:
  using Action = std::function<void()>;
  using Guard = std::function<bool()>;
  static constexpr size_t kEventsMax = 4'000'000;
  static constexpr size_t kNodesMax = 7;
  static constexpr size_t kPendingRepliesMax = 1 << 20;
  static constexpr size_t kViolationTraceLines = 30;

  SimWorld(uint64_t seed, ClientNetFaults faults);
  ~SimWorld();
  SimWorld(const SimWorld&) = delete;
  SimWorld& operator=(const SimWorld&) = delete;

  uint64_t seed() const { return seed_; }
  int64_t now_us() const { return now_us_; }
  int64_t elapsed_us() const { return now_us_ - kEpochUs; }
  // The position of the event being dispatched (or the last one) in dispatch order: a total
  // order on everything that happened (an event's scheduling sequence is not: an event
  // scheduled later may run earlier).
  uint64_t seq() const { return dispatched_; }
  Rng stream(std::string_view name) const { return Rng::stream(seed_, name); }
  Trace& trace() { return trace_; }
  Counters& counters() { return counters_; }
  void count(const std::string& name, uint64_t n = 1) { counters_[name] += n; }

  // ---- events ----
  // Schedules `fn` at virtual time at_us (not before now). An event with a target node is
  // dropped if that incarnation is gone; one with a guard is dropped if the guard says so.
  void at(int64_t at_us, std::string label, Action fn, EventTarget target = {},
          Guard guard = nullptr);
  void after(int64_t delay_us, std::string label, Action fn, EventTarget target = {}) {
    at(now_us_ + delay_us, std::move(label), std::move(fn), target);
  }
  // Dispatches the next event; false when the queue is empty.
  bool step();
  size_t pending_events() const { return events_.size(); }
  // Adds a line to the trace, stamped with the current time.
  void note(std::string_view text);

  // ---- nodes ----
  int add_node(NodeSetup setup);
  int node_count() const { return static_cast<int>(nodes_.size()); }
  bool up(int node) const;
  Node* node(int node);  // nullptr when down
  SimDisk& disk(int node);
  uint64_t incarnation(int node) const;
  int64_t node_now_us(int node) const;
  void start_node(int node);
  // A graceful stop of `node` (Node::hand_over): false when it does not lead.
  bool hand_over(int node);
  // A graceful stop's checkpoint (Node::checkpoint_before_stop): whether it is durable.
  bool checkpoint_before_stop(int node);
  // restart_delay_us < 0: drawn between the setup's bounds.
  void crash_node(int node, std::string_view reason, bool restart, int64_t restart_delay_us = -1);
  void pause_node(int node, int64_t duration_us);
  bool paused(int node) const;
  int64_t resume_us(int node) const;  // when a paused node runs again
  void set_disk_rates(int node, const DiskFaultRates& rates);
  // The configuration `node` starts with next (an upgrade takes effect at its next start).
  NodeConfig& next_config(int node);
  void set_client_faults(const ClientNetFaults& faults) { client_faults_ = faults; }
  // The links between nodes (node k sends as id k + 1).
  SimNetwork& network() { return *network_; }
  // Node statistics summed over every incarnation.
  NodeStats total_stats(int node) const;

  // ---- clients ----
  // Hands a command to the node; nullopt when the node is down (connection refused).
  std::optional<ReplyHandle> submit(int node, CommandEnvelope command, ClientSink* sink);
  size_t pending_replies() const { return pending_.size(); }
  // The client closes the connection of `handle`: after a client-network delay (never before
  // its command arrived) the node hears of it (Node::on_cancel) and `done` runs, unless the
  // reply went out first. From then on a reply to it is a violation.
  void cancel(ReplyHandle handle, Action done);
  // The node a request waits at (-1: answered, or its node crashed).
  int pending_at(ReplyHandle handle) const {
    auto it = pending_.find(handle);
    return it == pending_.end() ? -1 : it->second.node;
  }

  // ---- checking ----
  void violation(std::string invariant, std::string detail);
  const std::vector<Violation>& violations() const { return violations_; }
  // Hooks for the checker: the process about to die (its state still readable), and the
  // process that has just recovered.
  std::function<void(int node, const Node& process)> before_crash;
  std::function<void(int node, const Node& process)> after_start;

 private:
  friend class SimEnv;
  struct Event {
    int64_t at_us;
    uint64_t seq;
    std::string label;
    Action fn;
    EventTarget target;
    Guard guard;
  };
  struct Later {
    bool operator()(const Event* a, const Event* b) const {
      return a->at_us != b->at_us ? a->at_us > b->at_us : a->seq > b->seq;
    }
  };
  struct Pending {
    ClientSink* sink;  // null: a command another node forwarded
    int node;
    int64_t arrives_us = 0;  // when its command reaches the node
    int from_node = -1;      // a forwarded command: the node waiting for its reply
    uint64_t from_incarnation = 0;
    uint64_t forward_id = 0;
  };
  struct NodeSlot;

  void push_event(Event* ev);
  bool deliverable(const Event& ev);
  void finish_fatal_crashes();
  std::string stamp() const;
  void perform(int n, Outputs outputs);

  // Env side, called by SimEnv for node `n`.
  void env_set_timer(int n, TimerId id, int64_t delay_ms);
  void env_append(int n, const std::string& file, Bytes data);
  void env_sync(int n, const std::string& file, uint64_t token);
  // A whole file written as io/real's forked copy writes it (Env::write_whole_file): its
  // bytes are the node's state at the call, and reach the disk in pieces, each an event of
  // its own, before the sync. A crash in between leaves part of it, unsynced.
  void env_write_whole(int n, const std::string& file, const Env::FileProducer& produce,
                       uint64_t token);
  Result<Bytes> env_read(int n, const std::string& file, uint64_t pos, uint64_t len);
  Status env_truncate(int n, const std::string& file, uint64_t size_bytes);
  Status env_remove(int n, const std::string& file);
  Status env_rename(int n, const std::string& from, const std::string& to);
  Result<std::vector<FileInfo>> env_list(int n);
  void env_reply(int n, ReplyHandle handle, Reply reply);
  void env_fatal(int n, std::string_view reason);
  void env_send(int n, uint64_t to_node, Bytes message);
  void env_forward(int n, uint64_t to_node, uint64_t forward_id,
                   std::shared_ptr<const CommandEnvelope> command, int64_t remaining_ms);
  // A forwarded command or its reply on the stream between two nodes: `arrive` runs at `to`
  // after the stream's delay (later while `to` is paused) unless the stream breaks (a cut
  // link, a drop, or `to` restarted), in which case `broken` runs at `broken_at`.
  void carry(int from, int to, std::string label, Action arrive, Action broken,
             EventTarget broken_at);
  struct Carried;
  void land(const std::shared_ptr<Carried>& c);
  void forward_arrived(int from, uint64_t from_incarnation, int to, uint64_t forward_id,
                       const CommandEnvelope& command, int64_t remaining_ms);
  void forward_reply(int n, ReplyHandle handle, const Pending& p, Reply reply);
  void env_log(int n, LogLevel level, std::string_view message);
  bool env_live(int n) const;

  uint64_t seed_;
  int64_t now_us_ = kEpochUs;
  uint64_t next_seq_ = 1;
  uint64_t dispatched_ = 0;
  uint64_t next_timer_gen_ = 1;
  ReplyHandle next_handle_ = 1;
  std::priority_queue<Event*, std::vector<Event*>, Later> events_;
  std::vector<std::unique_ptr<NodeSlot>> nodes_;
  std::map<ReplyHandle, Pending> pending_;
  ClientNetFaults client_faults_;
  Rng client_net_rng_;
  Rng restart_rng_;
  Rng whole_file_rng_;  // the pieces of whole-file writes and their pace
  Trace trace_;
  Counters counters_;
  std::vector<Violation> violations_;
  std::unique_ptr<SimNetwork> network_;
};

}  // namespace queen::sim
