// Runs one Node on one thread over the real environment. Owns the node thread (an Asio
// io_context run by a single thread), the Disk writer thread, the RealEnv and the Node.
//
// Contract:
// - start() lists the data folder, starts the threads and runs Node::start on the node
//   thread; an error means the data cannot be trusted and the caller must exit.
// - submit() and cancel() may be called from any thread; they post the event to the node
//   thread. At most `commands_queued_max` commands wait to be handed to the node: past it,
//   submit() refuses and the edge answers 429.
// - test_push_delay_ms (tests only) hands pushes to the node that much later, so a test can
//   see a request outlive its deadline.
// - Replies come back through the ReplySink on the node thread.
// - A failed fsync ends the process (RealEnv::fatal).
#pragma once

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "core/api/replies.h"
#include "core/node/config.h"
#include "io/outputs.h"
#include "io/real/disk.h"
#include "io/real/real_env.h"
#include "io/real/start_arena.h"
#include "io/real/transport.h"

namespace queen {
class Node;
}

namespace queen::real {

struct DriverOptions {
  std::string data_dir;
  NodeConfig node;
  size_t commands_queued_max = 16384;  // QUEEN_RAFT_COMMAND_QUEUE_DEPTH
  size_t open_files_max = 256;
  int64_t test_push_delay_ms = 0;             // QUEEN_TEST_PUSH_DELAY_MS
  std::optional<PayloadKey> payload_key;      // QUEEN_ENCRYPTION_KEY (none: no encryption)
  std::optional<TransportOptions> transport;  // a cluster: the raft port and the peers
  // The broker's allocator takes memory for a large start-up load (io/real/start_arena.h);
  // none: the load faults its pages in itself.
  StartArena::Adopt adopt_start_memory;
  StartArenaOptions start_arena;
};

class NodeDriver {
 public:
  NodeDriver(DriverOptions options, ReplySink& sink);
  ~NodeDriver();
  NodeDriver(const NodeDriver&) = delete;
  NodeDriver& operator=(const NodeDriver&) = delete;

  // Before start(), in a cluster: where commands and replies forwarded by peers go.
  void set_forward_handler(ForwardHandler handler) { forward_handler_ = std::move(handler); }
  // Before start(), in a cluster: where the node's forwarded commands go (Env::forward). The
  // forwarder answers each through forward_reply().
  void set_command_forwarder(RealEnv::CommandForwarder forwarder) {
    command_forwarder_ = std::move(forwarder);
  }
  // Before start(), in a cluster: told (on the node thread) each member list the node takes into
  // use, after the transport (the HTTP edge keeps the members' addresses from it).
  void set_members_listener(std::function<void(const std::vector<Member>&)> listener) {
    members_listener_ = std::move(listener);
  }
  // From any thread: the leader's reply to a command the node forwarded (nullopt: the stream
  // failed), posted to the node thread.
  void forward_reply(uint64_t forward_id, std::optional<Reply> reply);
  Status start();
  // From any thread, in a cluster: sends a forwarded command or reply to peer `to`.
  void send_forward(uint64_t to, uint64_t key, Bytes message);
  // False when too many commands are already waiting for the node thread.
  bool submit(ReplyHandle handle, CommandEnvelope command);
  void cancel(ReplyHandle handle);
  // The node thread's io_context: an edge may serve connections on it, so that their
  // requests and replies reach the node and come back without waking another thread.
  boost::asio::io_context& context() { return context_; }
  // The leader this node knows of (0: none), as of the last peer message it handled: what an
  // edge thread may read without a round trip to the node thread.
  uint64_t known_leader() const { return known_leader_.load(std::memory_order_relaxed); }
  // Runs `fn` on the node thread and waits for it (reads of the node's state, e.g. on stop).
  void run_on_node(const std::function<void(Node&)>& fn);
  // A graceful stop (Node::hand_over): false when this node does not lead.
  bool hand_over();
  // A graceful stop's store checkpoint (Node::checkpoint_before_stop), waited for at most
  // `wait_ms`; false when it was not durable by then (the next start replays the log after
  // the newest one, as after a crash).
  bool checkpoint_before_stop(int64_t wait_ms);
  // Stops the node thread, then lets the disk writer finish what is queued.
  void stop();

 private:
  // Carries out what the node returned from an event, on the node thread.
  void run(Outputs outputs);
  DriverOptions options_;
  ReplySink& sink_;
  boost::asio::io_context context_;
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work_;
  Disk disk_;
  std::unique_ptr<RealEnv> env_;
  std::unique_ptr<Node> node_;
  std::unique_ptr<Transport> transport_;
  ForwardHandler forward_handler_;
  RealEnv::CommandForwarder command_forwarder_;
  std::function<void(const std::vector<Member>&)> members_listener_;
  std::thread thread_;
  std::atomic<size_t> commands_queued_{0};
  std::atomic<uint64_t> known_leader_{0};
};

}  // namespace queen::real
