#include "io/sim/world.h"

#include <xxhash.h>

#include "core/common/assert.h"
#include "io/carry_out.h"
#include "io/sim/describe.h"
#include "io/sim/sim_env.h"

namespace queen::sim {

struct SimWorld::NodeSlot {
  NodeSetup setup;
  std::unique_ptr<SimDisk> disk;
  std::unique_ptr<SimEnv> env;
  std::unique_ptr<Node> node;
  uint64_t incarnation = 0;
  bool up = false;
  bool dying = false;  // Env::fatal was called: the process exits when the event returns
  std::string dying_reason;
  int64_t paused_until_us = 0;
  std::map<TimerId, uint64_t> timers;  // id → generation of the live deadline
  NodeStats stats_before;              // summed over past incarnations
  uint64_t whole_files_writing = 0;    // whole-file writes not yet at their sync
};

namespace {

void add_stats(NodeStats* into, const NodeStats& s) {
  *into += s;
}

}  // namespace

SimWorld::SimWorld(uint64_t seed, ClientNetFaults faults)
    : seed_(seed),
      client_faults_(faults),
      client_net_rng_(stream("client.net")),
      restart_rng_(stream("restart")),
      whole_file_rng_(stream("disk.whole-files")),
      network_(std::make_unique<SimNetwork>(
          *this, NetFaultRates{}, [this](int from, int to, const Bytes& message) {
            perform(to, nodes_[to]->node->on_message(static_cast<uint64_t>(from) + 1, message));
          })) {}

SimWorld::~SimWorld() {
  while (!events_.empty()) {
    delete events_.top();
    events_.pop();
  }
  for (auto& slot : nodes_) {
    slot->up = false;
    slot->node.reset();
  }
}

// ---- events ----

void SimWorld::at(int64_t at_us, std::string label, Action fn, EventTarget target, Guard guard) {
  QUEEN_ASSERT(events_.size() < kEventsMax, "SimWorld: event queue over kEventsMax");
  auto* ev = new Event{at_us < now_us_ ? now_us_ : at_us,
                       next_seq_++,
                       std::move(label),
                       std::move(fn),
                       target,
                       std::move(guard)};
  events_.push(ev);
}

void SimWorld::push_event(Event* ev) {
  ev->seq = next_seq_++;
  events_.push(ev);
}

bool SimWorld::deliverable(const Event& ev) {
  if (ev.target.node < 0) return true;
  const NodeSlot& slot = *nodes_[ev.target.node];
  return slot.up && !slot.dying && slot.incarnation == ev.target.incarnation;
}

bool SimWorld::step() {
  if (events_.empty()) return false;
  std::unique_ptr<Event> ev(events_.top());
  events_.pop();
  now_us_ = ev->at_us;
  ++dispatched_;
  if (!deliverable(*ev)) return true;
  if (ev->target.node >= 0) {
    NodeSlot& slot = *nodes_[ev->target.node];
    if (slot.paused_until_us > now_us_) {  // a paused process runs nothing until it resumes
      ev->at_us = slot.paused_until_us;
      push_event(ev.release());
      return true;
    }
  }
  if (ev->guard && !ev->guard()) return true;
  if (ev->target.node >= 0) {
    trace_.add(stamp() + strf(" n%d ", ev->target.node) + ev->label);
  } else {
    trace_.add(stamp() + " " + ev->label);
  }
  count("events");
  ev->fn();
  finish_fatal_crashes();
  return true;
}

void SimWorld::note(std::string_view text) {
  trace_.add(stamp() + " " + std::string(text));
}

std::string SimWorld::stamp() const {
  int64_t e = elapsed_us();
  return strf("%lld.%06lld", static_cast<long long>(e / 1'000'000),
              static_cast<long long>(e % 1'000'000));
}

void SimWorld::finish_fatal_crashes() {
  for (int n = 0; n < node_count(); ++n) {
    NodeSlot& slot = *nodes_[n];
    if (!slot.dying) continue;
    count("fatal_exits");
    crash_node(n, "fatal: " + slot.dying_reason, /*restart=*/true);
  }
}

// ---- nodes ----

int SimWorld::add_node(NodeSetup setup) {
  QUEEN_ASSERT(nodes_.size() < kNodesMax, "SimWorld: too many nodes");
  int n = node_count();
  auto slot = std::make_unique<NodeSlot>();
  slot->setup = setup;
  slot->setup.clock.start_us = kEpochUs;
  slot->disk = std::make_unique<SimDisk>(stream(strf("disk.%d", n)), setup.disk);
  slot->env = std::make_unique<SimEnv>(*this, n, stream(strf("node.%d.random", n)));
  nodes_.push_back(std::move(slot));
  return n;
}

bool SimWorld::up(int node) const {
  return nodes_[node]->up && !nodes_[node]->dying;
}

Node* SimWorld::node(int node) {
  return up(node) ? nodes_[node]->node.get() : nullptr;
}

SimDisk& SimWorld::disk(int node) {
  return *nodes_[node]->disk;
}

uint64_t SimWorld::incarnation(int node) const {
  return nodes_[node]->incarnation;
}

int64_t SimWorld::node_now_us(int node) const {
  return nodes_[node]->setup.clock.local_us(now_us_);
}

int64_t SimWorld::resume_us(int node) const {
  return nodes_[node]->paused_until_us;
}

bool SimWorld::paused(int node) const {
  return nodes_[node]->paused_until_us > now_us_;
}

NodeConfig& SimWorld::next_config(int node) {
  return nodes_[node]->setup.config;
}

void SimWorld::set_disk_rates(int node, const DiskFaultRates& rates) {
  nodes_[node]->setup.disk = rates;
  nodes_[node]->disk->set_rates(rates);
}

NodeStats SimWorld::total_stats(int node) const {
  const NodeSlot& slot = *nodes_[node];
  NodeStats s = slot.stats_before;
  if (slot.node) add_stats(&s, slot.node->stats());
  return s;
}

void SimWorld::start_node(int node) {
  NodeSlot& slot = *nodes_[node];
  if (slot.up) return;
  ++slot.incarnation;
  slot.up = true;
  slot.dying = false;
  slot.timers.clear();
  if (slot.incarnation > 1) count("restarts");
  std::vector<FileInfo> files = slot.disk->list();
  note(strf("n%d start incarnation=%llu files=%zu", node,
            static_cast<unsigned long long>(slot.incarnation), files.size()));
  slot.node = std::make_unique<Node>(*slot.env, slot.setup.config);
  auto started = slot.node->start(files);
  if (!started.ok()) {
    violation("1 answered pushes survive (recovery)",
              strf("n%d start() failed after a crash: %s", node, started.error().message.c_str()));
    slot.up = false;
    slot.node.reset();
    return;
  }
  perform(node, std::move(started.value()));
  if (after_start) after_start(node, *slot.node);
  finish_fatal_crashes();
}

// Carries out what node `n` returned from an event (io/carry_out.h): its disk operations,
// timers, messages, forwards and replies reach this world through its SimEnv.
void SimWorld::perform(int n, Outputs outputs) {
  NodeSlot& slot = *nodes_[n];
  if (slot.node) carry_out(*slot.env, *slot.node, std::move(outputs));
}

bool SimWorld::hand_over(int n) {
  NodeSlot& slot = *nodes_[n];
  if (!slot.up || !slot.node) return false;
  bool leading = false;
  perform(n, slot.node->hand_over(&leading));
  finish_fatal_crashes();
  return leading;
}

bool SimWorld::checkpoint_before_stop(int n) {
  NodeSlot& slot = *nodes_[n];
  if (!slot.up || !slot.node) return true;
  bool current = false;
  perform(n, slot.node->checkpoint_before_stop(&current));
  finish_fatal_crashes();
  return current;
}

void SimWorld::crash_node(int node, std::string_view reason, bool restart,
                          int64_t restart_delay_us) {
  NodeSlot& slot = *nodes_[node];
  if (!slot.up) return;
  if (before_crash) before_crash(node, *slot.node);
  add_stats(&slot.stats_before, slot.node->stats());
  slot.up = false;
  slot.dying = false;
  slot.node.reset();
  slot.timers.clear();
  slot.paused_until_us = 0;
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (it->second.node != node) {
      ++it;
      continue;
    }
    // A command forwarded to the crashed node: the stream to the node that sent it breaks.
    const Pending& p = it->second;
    if (p.sink == nullptr && up(p.from_node) &&
        nodes_[p.from_node]->incarnation == p.from_incarnation) {
      int from = p.from_node;
      uint64_t id = p.forward_id;
      after(
          network_->stream_delay_us(node, from), "fwd stream broken by a crash",
          [this, from, id] {
            perform(from, nodes_[from]->node->on_forward_reply(id, std::nullopt));
          },
          EventTarget{from, p.from_incarnation});
    }
    it = pending_.erase(it);
  }
  CrashReport r = slot.disk->crash();
  count("crashes");
  count("whole_file_writes_cut", slot.whole_files_writing);  // a copy killed mid-file
  slot.whole_files_writing = 0;
  count("torn_writes", r.torn_writes);
  count("dropped_writes", r.writes_dropped);
  count("kept_unsynced_files", r.files_kept);
  note(
      strf("n%d crash (%.*s) volatile_files=%llu kept=%llu dropped_writes=%llu torn=%llu "
           "bytes_lost=%llu",
           node, static_cast<int>(reason.size()), reason.data(),
           static_cast<unsigned long long>(r.files_with_volatile_bytes),
           static_cast<unsigned long long>(r.files_kept),
           static_cast<unsigned long long>(r.writes_dropped),
           static_cast<unsigned long long>(r.torn_writes),
           static_cast<unsigned long long>(r.bytes_lost)));
  if (!restart) return;
  int64_t delay_us = restart_delay_us >= 0 ? restart_delay_us
                                           : restart_rng_.range(slot.setup.restart_delay_us_min,
                                                                slot.setup.restart_delay_us_max);
  after(delay_us, strf("restart n%d", node), [this, node] { start_node(node); });
}

void SimWorld::pause_node(int node, int64_t duration_us) {
  NodeSlot& slot = *nodes_[node];
  if (!up(node)) return;
  slot.paused_until_us = now_us_ + duration_us;
  count("node_pauses");
  note(strf("n%d paused for %lld ms", node, static_cast<long long>(duration_us / 1000)));
}

// ---- clients ----

std::optional<ReplyHandle> SimWorld::submit(int node, CommandEnvelope command, ClientSink* sink) {
  if (!up(node)) return std::nullopt;
  QUEEN_ASSERT(pending_.size() < kPendingRepliesMax, "SimWorld: too many pending replies");
  ReplyHandle h = next_handle_++;
  int64_t delay_us =
      client_net_rng_.range(client_faults_.delay_us_min, client_faults_.delay_us_max);
  pending_[h] = Pending{.sink = sink, .node = node, .arrives_us = now_us_ + delay_us};
  std::string label =
      strf("cmd h%llu %s", static_cast<unsigned long long>(h), describe(command.command).c_str());
  auto shared = std::make_shared<CommandEnvelope>(std::move(command));
  after(
      delay_us, std::move(label),
      [this, node, h, shared] {
        perform(node, nodes_[node]->node->on_command(h, std::move(*shared)));
      },
      EventTarget{node, nodes_[node]->incarnation});
  return h;
}

void SimWorld::cancel(ReplyHandle handle, Action done) {
  auto it = pending_.find(handle);
  if (it == pending_.end() || it->second.sink == nullptr) return;
  int node = it->second.node;
  int64_t delay_us =
      client_net_rng_.range(client_faults_.delay_us_min, client_faults_.delay_us_max);
  int64_t at_us = std::max(now_us_ + delay_us, it->second.arrives_us + 1);
  at(
      at_us, strf("cancel h%llu", static_cast<unsigned long long>(handle)),
      [this, node, handle, done = std::move(done)] {
        auto p = pending_.find(handle);
        if (p == pending_.end() || p->second.node != node) return;  // answered first
        pending_.erase(p);
        count("cancels");
        perform(node, nodes_[node]->node->on_cancel(handle));
        done();
      },
      EventTarget{node, nodes_[node]->incarnation});
}

// ---- checking ----

void SimWorld::violation(std::string invariant, std::string detail) {
  note("VIOLATION " + invariant + ": " + detail);
  violations_.push_back(Violation{std::move(invariant), std::move(detail), elapsed_us(),
                                  trace_.tail(kViolationTraceLines)});
}

// ---- the environment side ----

void SimWorld::env_send(int n, uint64_t to_node, Bytes message) {
  if (!env_live(n)) return;
  int to = static_cast<int>(to_node) - 1;  // node k has id k + 1
  if (to < 0 || to >= node_count() || to == n) return;
  network_->send(n, to, std::move(message));
}

void SimWorld::env_forward(int n, uint64_t to_node, uint64_t forward_id,
                           std::shared_ptr<const CommandEnvelope> command, int64_t remaining_ms) {
  if (!env_live(n)) return;
  int to = static_cast<int>(to_node) - 1;
  uint64_t inc = nodes_[n]->incarnation;
  auto broken = [this, n, forward_id] {
    perform(n, nodes_[n]->node->on_forward_reply(forward_id, std::nullopt));
  };
  if (to < 0 || to >= node_count() || to == n) {
    after(0, "fwd to nowhere", broken, EventTarget{n, inc});
    return;
  }
  std::string label =
      strf("fwd %d->%d #%llu %s", n, to, static_cast<unsigned long long>(forward_id),
           describe(command->command).c_str());
  carry(
      n, to, std::move(label),
      [this, n, inc, to, forward_id, command, remaining_ms] {
        forward_arrived(n, inc, to, forward_id, *command, remaining_ms);
      },
      broken, EventTarget{n, inc});
}

// What travels on a stream between two nodes (see carry()).
struct SimWorld::Carried {
  int to = 0;
  uint64_t to_incarnation = 0;
  std::string label;
  Action arrive;
  Action broken;
  EventTarget broken_at;
};

void SimWorld::carry(int from, int to, std::string label, Action arrive, Action broken,
                     EventTarget broken_at) {
  int64_t delay_us = network_->stream_delay_us(from, to);
  if (network_->stream_breaks(from, to)) {  // noticed once the stream times out
    count("forward_streams_broken");
    after(delay_us * 4, label + " BROKEN", std::move(broken), broken_at);
    return;
  }
  auto c = std::make_shared<Carried>(
      Carried{to, nodes_[to]->incarnation, label, std::move(arrive), std::move(broken), broken_at});
  at(now_us_ + delay_us, std::move(label), [this, c] { land(c); });
}

void SimWorld::land(const std::shared_ptr<Carried>& c) {
  bool same = up(c->to) && nodes_[c->to]->incarnation == c->to_incarnation;
  if (same && paused(c->to)) {
    at(resume_us(c->to), c->label, [this, c] { land(c); });
    return;
  }
  if (same) return c->arrive();
  int b = c->broken_at.node;
  if (up(b) && nodes_[b]->incarnation == c->broken_at.incarnation) c->broken();
}

void SimWorld::forward_arrived(int from, uint64_t from_incarnation, int to, uint64_t forward_id,
                               const CommandEnvelope& command, int64_t remaining_ms) {
  QUEEN_ASSERT(pending_.size() < kPendingRepliesMax, "SimWorld: too many pending replies");
  ReplyHandle h = next_handle_++;
  pending_[h] = Pending{.sink = nullptr,
                        .node = to,
                        .arrives_us = now_us_,
                        .from_node = from,
                        .from_incarnation = from_incarnation,
                        .forward_id = forward_id};
  CommandEnvelope e = command;
  e.forwarded = true;
  e.deadline_ms = node_now_us(to) / 1000 + remaining_ms;
  trace_.add(strf("  n%d takes fwd #%llu from n%d as h%llu", to,
                  static_cast<unsigned long long>(forward_id), from,
                  static_cast<unsigned long long>(h)));
  perform(to, nodes_[to]->node->on_command(h, std::move(e)));
}

// The reply to a forwarded command goes back on the stream it came by.
void SimWorld::forward_reply(int n, ReplyHandle handle, const Pending& p, Reply reply) {
  trace_.add(
      strf("  n%d reply h%llu (fwd #%llu of n%d) %s", n, static_cast<unsigned long long>(handle),
           static_cast<unsigned long long>(p.forward_id), p.from_node, describe(reply).c_str()));
  int from = p.from_node;
  uint64_t id = p.forward_id;
  if (!up(from) || nodes_[from]->incarnation != p.from_incarnation) return;
  auto shared = std::make_shared<Reply>(std::move(reply));
  carry(
      n, from, strf("fwd reply %d->%d #%llu", n, from, static_cast<unsigned long long>(id)),
      [this, from, id, shared] {
        perform(from, nodes_[from]->node->on_forward_reply(id, *shared));
      },
      [this, from, id] { perform(from, nodes_[from]->node->on_forward_reply(id, std::nullopt)); },
      EventTarget{from, p.from_incarnation});
}

bool SimWorld::env_live(int n) const {
  return nodes_[n]->up && !nodes_[n]->dying;
}

void SimWorld::env_set_timer(int n, TimerId id, int64_t delay_ms) {
  if (!env_live(n)) return;
  NodeSlot& slot = *nodes_[n];
  uint64_t gen = next_timer_gen_++;
  slot.timers[id] = gen;
  int64_t delay_us = (delay_ms < 0 ? 0 : delay_ms) * 1000;
  at(
      now_us_ + delay_us, strf("timer %u", id),
      [this, n, id] {
        nodes_[n]->timers.erase(id);
        perform(n, nodes_[n]->node->on_timer(id));
      },
      EventTarget{n, slot.incarnation},
      [this, n, id, gen] {
        auto it = nodes_[n]->timers.find(id);
        return it != nodes_[n]->timers.end() && it->second == gen;
      });
}

void SimWorld::env_append(int n, const std::string& file, Bytes data) {
  if (!env_live(n)) return;
  trace_.add(strf("  n%d append %s len=%zu h=%016llx", n, file.c_str(), data.size(),
                  static_cast<unsigned long long>(XXH3_64bits(data.data(), data.size()))));
  NodeSlot& slot = *nodes_[n];
  slot.disk->append(file, data);
  // Backpressure: the node thread blocks in append() until the writer's FIFO has room; its
  // next events wait (what this one returned after the append still goes out now).
  int64_t go_on_us = slot.disk->queue_write(data.size(), now_us_);
  if (go_on_us > now_us_ && go_on_us > slot.paused_until_us) {
    slot.paused_until_us = go_on_us;
    count("writer_stalls");
    trace_.add(strf("  n%d writer FIFO full: blocked for %lld us", n,
                    static_cast<long long>(go_on_us - now_us_)));
  }
}

void SimWorld::env_write_whole(int n, const std::string& file, const Env::FileProducer& produce,
                               uint64_t token) {
  if (!env_live(n)) return;
  auto bytes = std::make_shared<Bytes>();
  BufferSink sink(bytes.get());
  produce(sink);
  count("whole_file_writes");
  ++nodes_[n]->whole_files_writing;
  uint64_t pieces = whole_file_rng_.range(1, 4);
  size_t piece_bytes = (bytes->size() + pieces - 1) / pieces;
  EventTarget target{n, nodes_[n]->incarnation};
  int64_t at_us = now_us_;
  for (uint64_t i = 0; i < pieces; ++i) {
    at_us += whole_file_rng_.range(100, 3000);
    size_t from = std::min(bytes->size(), i * piece_bytes);
    size_t to = std::min(bytes->size(), from + piece_bytes);
    at(
        at_us,
        strf("whole-file piece %llu/%llu %s", static_cast<unsigned long long>(i + 1),
             static_cast<unsigned long long>(pieces), file.c_str()),
        [this, n, file, bytes, from, to] {
          env_append(n, file, Bytes(bytes->begin() + from, bytes->begin() + to));
        },
        target);
  }
  at(
      at_us, strf("whole-file sync %s", file.c_str()),
      [this, n, file, token] {
        --nodes_[n]->whole_files_writing;
        env_sync(n, file, token);
      },
      target);
}

void SimWorld::env_sync(int n, const std::string& file, uint64_t token) {
  if (!env_live(n)) return;
  NodeSlot& slot = *nodes_[n];
  SyncPlan plan = slot.disk->plan_sync(file, now_us_);
  trace_.add(
      strf("  n%d sync %s token=%llu", n, file.c_str(), static_cast<unsigned long long>(token)));
  at(
      plan.done_at_us,
      strf("sync-done %s token=%llu %s", file.c_str(), static_cast<unsigned long long>(token),
           plan.ok ? "ok" : "FAILED"),
      [this, n, file, token, plan] {
        if (plan.ok) {
          nodes_[n]->disk->complete_sync(file, plan.upto_bytes);
        } else {
          count("fsync_errors");
        }
        perform(n, nodes_[n]->node->on_sync_done(token, plan.ok));
      },
      EventTarget{n, slot.incarnation});
}

Result<Bytes> SimWorld::env_read(int n, const std::string& file, uint64_t pos, uint64_t len) {
  bool corrupted = false;
  Result<Bytes> r = nodes_[n]->disk->read(file, pos, len, &corrupted);
  if (corrupted) count("read_corruptions");
  trace_.add(strf("  n%d read %s pos=%llu len=%llu -> %s%s", n, file.c_str(),
                  static_cast<unsigned long long>(pos), static_cast<unsigned long long>(len),
                  r.ok() ? strf("%zu bytes", r.value().size()).c_str() : r.error().message.c_str(),
                  corrupted ? " CORRUPTED" : ""));
  return r;
}

Status SimWorld::env_truncate(int n, const std::string& file, uint64_t size_bytes) {
  trace_.add(strf("  n%d truncate %s to %llu", n, file.c_str(),
                  static_cast<unsigned long long>(size_bytes)));
  if (!env_live(n)) return make_error(Errc::io, "process is exiting");
  return nodes_[n]->disk->truncate(file, size_bytes);
}

Status SimWorld::env_remove(int n, const std::string& file) {
  trace_.add(strf("  n%d remove %s", n, file.c_str()));
  if (!env_live(n)) return make_error(Errc::io, "process is exiting");
  return nodes_[n]->disk->remove(file);
}

Result<std::vector<FileInfo>> SimWorld::env_list(int n) {
  if (!env_live(n)) return make_error(Errc::io, "process is exiting");
  return nodes_[n]->disk->list();
}

Status SimWorld::env_rename(int n, const std::string& from, const std::string& to) {
  trace_.add(strf("  n%d rename %s %s", n, from.c_str(), to.c_str()));
  if (!env_live(n)) return make_error(Errc::io, "process is exiting");
  return nodes_[n]->disk->rename(from, to);
}

void SimWorld::env_reply(int n, ReplyHandle handle, Reply reply) {
  if (!env_live(n)) return;
  auto it = pending_.find(handle);
  if (it == pending_.end() || it->second.node != n) {
    violation("7 answers mean what they say",
              strf("n%d replied to handle %llu that has no pending request (twice, or unknown)", n,
                   static_cast<unsigned long long>(handle)));
    return;
  }
  ClientSink* sink = it->second.sink;
  if (sink == nullptr) {
    Pending p = it->second;
    pending_.erase(it);
    return forward_reply(n, handle, p, std::move(reply));
  }
  pending_.erase(it);
  bool lost = client_faults_.reply_loss_per_mille > 0 &&
              client_net_rng_.per_mille(client_faults_.reply_loss_per_mille);
  if (lost) count("lost_replies");
  trace_.add(strf("  n%d reply h%llu %s%s", n, static_cast<unsigned long long>(handle),
                  describe(reply).c_str(), lost ? " LOST" : ""));
  sink->on_reply_sent(handle, reply, lost);
  if (lost) return;
  int64_t delay_us =
      client_net_rng_.range(client_faults_.delay_us_min, client_faults_.delay_us_max);
  auto shared = std::make_shared<Reply>(std::move(reply));
  after(delay_us, strf("deliver h%llu", static_cast<unsigned long long>(handle)),
        [sink, handle, shared] { sink->on_reply(handle, *shared); });
}

void SimWorld::env_fatal(int n, std::string_view reason) {
  if (!env_live(n)) return;
  trace_.add(strf("  n%d FATAL %.*s", n, static_cast<int>(reason.size()), reason.data()));
  nodes_[n]->dying = true;
  nodes_[n]->dying_reason = std::string(reason);
}

void SimWorld::env_log(int n, LogLevel level, std::string_view message) {
  trace_.add(strf("  n%d log %s %.*s", n, log_level_name(level), static_cast<int>(message.size()),
                  message.data()));
}

// ---- SimEnv ----

int64_t SimEnv::now_us() {
  return world_.node_now_us(node_);
}
void SimEnv::set_timer(TimerId id, int64_t delay_ms) {
  world_.env_set_timer(node_, id, delay_ms);
}
void SimEnv::append(const std::string& file, Bytes data) {
  world_.env_append(node_, file, std::move(data));
}
void SimEnv::sync(const std::string& file, uint64_t token) {
  world_.env_sync(node_, file, token);
}
void SimEnv::write_whole_file(const std::string& file, const FileProducer& produce, uint64_t token,
                              uint64_t expected_bytes) {
  (void)expected_bytes;
  world_.env_write_whole(node_, file, produce, token);
}
Result<Bytes> SimEnv::read(const std::string& file, uint64_t pos, uint64_t len) {
  return world_.env_read(node_, file, pos, len);
}
Status SimEnv::truncate(const std::string& file, uint64_t size_bytes) {
  return world_.env_truncate(node_, file, size_bytes);
}
Status SimEnv::remove(const std::string& file) {
  return world_.env_remove(node_, file);
}
Status SimEnv::rename(const std::string& from, const std::string& to) {
  return world_.env_rename(node_, from, to);
}
Result<std::vector<FileInfo>> SimEnv::list_files() {
  return world_.env_list(node_);
}
void SimEnv::send(uint64_t to_node, Bytes message) {
  world_.env_send(node_, to_node, std::move(message));
}
void SimEnv::forward(uint64_t to_node, uint64_t forward_id,
                     std::shared_ptr<const CommandEnvelope> command, int64_t remaining_ms) {
  world_.env_forward(node_, to_node, forward_id, std::move(command), remaining_ms);
}
void SimEnv::reply(ReplyHandle handle, Reply reply) {
  world_.env_reply(node_, handle, std::move(reply));
}
void SimEnv::fatal(std::string_view reason) {
  world_.env_fatal(node_, reason);
}
void SimEnv::log(LogLevel level, std::string_view message) {
  world_.env_log(node_, level, message);
}

}  // namespace queen::sim
