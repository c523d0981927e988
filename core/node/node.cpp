#include "core/node/node.h"

#include "core/node/node_impl.h"

namespace queen {

Node::Node(Env& env, NodeConfig config) : impl_(std::make_unique<NodeImpl>(env, config)) {}
Node::~Node() = default;

// A follower installed a snapshot: it starts again from its files, as after a restart, with
// its counters and its sync tokens going on (completions of old syncs are not expected: it
// installs only once none is in flight). What the event that decided it returned has been
// carried out: the old log's files are as it left them.
Outputs Node::restart_in_place() {
  if (!impl_->restart_requested || impl_->stopped) return finish_event();
  Env& env = impl_->env;
  auto listed = env.list_files();
  Status installed = listed.ok()
                         ? finish_install(env, impl_->snapshot_recv->manifest, listed.value())
                         : Status(listed.error());
  if (!installed.ok()) {
    impl_->halt("cannot install the snapshot: " + installed.error().message);
    return finish_event();
  }
  env.log(LogLevel::info, "installed a snapshot at entry " +
                              std::to_string(impl_->snapshot_recv->manifest.index.value));
  ++impl_->stats.snapshots_installed;
  NodeConfig config = impl_->config;
  NodeStats stats = impl_->stats;
  uint64_t next_token = impl_->next_token;
  // Commands held for forwarding do not depend on the store: they go on after the restart.
  auto forwards = std::move(impl_->forwards);
  auto forward_attempts = std::move(impl_->forward_attempts);
  uint64_t next_forward_id = impl_->next_forward_id;
  auto files = env.list_files();
  impl_ = std::make_unique<NodeImpl>(env, config);
  impl_->stats = stats;
  impl_->next_token = next_token;
  impl_->forwards = std::move(forwards);
  impl_->forward_attempts = std::move(forward_attempts);
  impl_->next_forward_id = next_forward_id;
  impl_->arm_forward_timer();
  auto started = files.ok() ? start(files.value()) : Result<Outputs>(files.error());
  if (started.ok()) return std::move(started.value());
  impl_->halt("restart after installing a snapshot failed: " + started.error().message);
  return finish_event();
}

// The end of every event: a store checkpoint the timer asked for is written from the state
// the event left (its producer reads it when carried out, see io/outputs.h), and the event's
// work goes to the caller.
Outputs Node::finish_event() {
  NodeImpl& n = *impl_;
  if (n.checkpoint_due && !n.restart_requested) {
    n.checkpoint_due = false;
    n.maybe_write_checkpoint();
  }
  Outputs done = std::move(n.out);
  n.out = Outputs{};
  return done;
}

Result<Outputs> Node::start(const std::vector<FileInfo>& found) {
  NodeImpl& n = *impl_;
  auto settled = settle_snapshot(n.env, found);
  if (!settled.ok()) return settled.error();
  const std::vector<FileInfo>& files = settled.value();
  RecoveryOptions opt;
  opt.replay_partial_entry = n.config.mutants.replay_partial_entry;
  if (auto st = n.load_store_checkpoint(files); !st.ok()) return st.error();
  if (auto st = n.load_rings(files); !st.ok()) return st.error();
  opt.require_next_entry = n.require_next_entry;
  n.arm_store_checkpoints();
  if (n.config.voters.size() > 1 || n.config.join || !n.store.membership().empty()) {
    auto st = n.start_cluster(files, opt);
    if (!st.ok()) return st.error();
    n.after_event();
    return finish_event();
  }
  RecoveryStats rs;
  n.store.set_standalone();     // its checkpoints go to no other node
  opt.skip_below_store = true;  // a single node replays only what follows its checkpoint
  // A replayed append leaves its partition's ring behind, to catch up from the rows.
  opt.on_replayed = [&n](const Entry& e, const RecordLocation&,
                         const std::vector<RecordLocation>&) { n.planner.on_applied(e); };
  auto st = recover(n.env, files, opt, &n.store, &n.writer, &rs);
  if (!st.ok()) return st.error();
  n.planner.dedup().keep_stale_rings(false);
  n.stats.recovered_entries = rs.entries_replayed;
  n.stats.recovery_files_skipped = rs.files_skipped;
  n.stats.torn_tails_cut = rs.torn_tails_cut;
  n.commit = n.last_sealed = n.last_written = n.store.applied().value;
  if (n.commit > 0) n.applied_term = Term(1);
  n.open.entry.index = LogIndex(n.commit + 1);
  n.engine.load();
  n.load_outcomes();
  n.serving = true;
  n.after_event();
  return finish_event();
}

Outputs Node::on_command(ReplyHandle h, CommandEnvelope c) {
  serve_command(*impl_, h, std::move(c));
  impl_->after_event();
  return finish_event();
}

void serve_command(NodeImpl& n, ReplyHandle h, CommandEnvelope c) {
  if (n.stopped || !n.serving) {
    n.send(Parked{h, error_reply(api::Errc::not_leader, "the node is not serving yet", 1)});
    return;
  }
  const CommandTraits traits = traits_of(c.command);
  if (n.forwards_it(c, traits)) return n.start_forward(h, std::move(c));
  if (n.cluster && !traits.any_node) {
    if (!n.cluster->writable || n.handing_over) {
      n.send(Parked{h, n.not_serving_reply()});
      return;
    }
    if (traits.consumes && !n.consume_ok()) {
      n.send(Parked{h, error_reply(api::Errc::not_leader,
                                   "the leader does not hold its consumption lease yet", 1,
                                   n.config.node_id)});
      return;
    }
  }
  if (!traits.any_node && n.queues_full()) {
    n.send(Parked{h, error_reply(api::Errc::overloaded,
                                 "the node holds too much unfinished work; retry shortly", 1)});
    return;
  }
  bool logged = traits.logged;
  if (logged && n.answer_known(h, c.request_id, c.command)) return;
  n.current_request = logged ? c.request_id : RequestId{};
  std::visit([&](auto& command) { n.handle(h, c, command); }, c.command);
}

Outputs Node::on_timer(TimerId id) {
  timer_fired(*impl_, id);
  return finish_event();
}

void timer_fired(NodeImpl& n, TimerId id) {
  if (n.stopped || !n.serving) return;
  if (id == kStoreCheckpointTimer) {
    n.checkpoint_due = true;
    n.arm_store_checkpoints();
    n.planner.dedup().sweep(n.env.now_us(), DedupIndex::kSweepRingsMax);
    n.planner.dedup().evict();
    n.engine.lag_step(n.env.now_us());
    n.stats.rings_evicted = n.planner.dedup().stats().evictions;  // for the simulator's sums
  }
  if (id == kListStepTimer) {
    n.list_step_armed = false;
    n.step_lists();
  }
  if (n.cluster) {
    if (id == kRaftTick) {
      n.cluster->raft->tick();
      n.tick_snapshots();
      n.identity_tick();
      n.out.set_timer(kRaftTick, n.config.raft_heartbeat_ms);
    }
    if (id == kCommitPersistTimer) {
      n.cluster->persist_armed = false;
      if (n.commit > n.cluster->persisted.commit.value) n.persist_state();
      n.persist_commit_later();
    }
    if (id == kForwardTimer) n.forward_tick();
    if (id == kHandOverTimer) n.hand_over_tick();
    if (!n.cluster->writable) {
      n.after_event();
      return;
    }
  }
  if (id == kFlushTimer) n.on_flush();
  if (id == kCheckpointTimer) n.on_checkpoint();
  if (id == kWakeTimer) n.wake_at_ms = INT64_MAX;
  if (id == kTimerTick) n.fire_timers();
  if (id == kSweepTimer) n.sweep_kv();
  if (id == kRetentionTimer) n.run_retention();
  if (id == kLagWalkTimer) {
    n.lag_walk_armed = false;
    n.engine.lag_step(n.env.now_us());
  }
  n.after_event();
}

Outputs Node::on_sync_done(uint64_t token, bool ok) {
  sync_done(*impl_, token, ok);
  return finish_event();
}

void sync_done(NodeImpl& n, uint64_t token, bool ok) {
  if (n.stopped) return;
  if (n.cluster && n.cluster->hs_tokens.contains(token)) {
    if (!ok) return n.halt("fsync of the Raft state failed: stopping to recover");
    n.on_state_synced(token);
    n.after_event();
    return;
  }
  if (n.dead_tokens.erase(token)) {
    n.after_event();
    return;
  }
  if (n.snapshot_recv && n.snapshot_recv->tokens.contains(token)) {
    n.on_staged_synced(token, ok);
    n.after_event();
    return;
  }
  if (token == n.checkpoint_token) {
    n.on_checkpoint_synced(ok);
    n.after_event();
    return;
  }
  if (token != 0 && token == n.rings_token) {
    n.on_rings_synced(ok);
    n.after_event();
    return;
  }
  auto it = n.sync_tokens.find(token);
  QUEEN_ASSERT(it != n.sync_tokens.end(), "completion of an unknown sync (token %llu)",
               static_cast<unsigned long long>(token));
  uint64_t idx = it->second;
  n.sync_tokens.erase(it);
  if (!ok) {
    return n.halt("fsync failed for entry " + std::to_string(idx) + ": stopping to recover");
  }
  ++n.stats.syncs;
  auto fit = n.inflight.find(idx);
  QUEEN_ASSERT(fit != n.inflight.end() && fit->second.syncs_left > 0,
               "sync of entry %llu, which is not in flight or has no sync left",
               static_cast<unsigned long long>(idx));
  --fit->second.syncs_left;
  if (n.cluster) {
    Cluster& c = *n.cluster;
    uint64_t before = c.durable;
    for (auto d = n.inflight.find(c.durable + 1);
         d != n.inflight.end() && d->second.syncs_left == 0; d = n.inflight.find(c.durable + 1))
      ++c.durable;
    if (c.durable > before) c.raft->on_persisted(LogIndex(c.durable));
  }
  n.commit_ready();
  n.after_event();
}

Outputs Node::on_message(uint64_t from, const Bytes& message) {
  NodeImpl& n = *impl_;
  if (n.stopped || !n.serving || !n.cluster) return finish_event();
  raft::Message m;
  // A member of the configuration in use, or a peer of the first boot's list (a node that
  // joins hears from its leader before it knows the configuration).
  const auto& voters = n.config.voters;
  bool member =
      from != n.config.node_id && (n.cluster->raft->membership().is_member(NodeId(from)) ||
                                   std::find(voters.begin(), voters.end(), from) != voters.end());
  bool decoded = member && raft::decode_message(message.data(), message.size(), &m);
  bool bounded = decoded && (raft::within_bounds(m) || n.config.mutants.unbounded_terms);
  if (!bounded || m.from.value != from || m.to.value != n.config.node_id) {
    // Counted and logged once per power of two, so a flood cannot fill the log.
    uint64_t refused = ++n.stats.raft_messages_refused;
    if ((refused & (refused - 1)) == 0) {
      n.env.log(LogLevel::warn, "refused a peer message from node " + std::to_string(from) +
                                    (member ? " (malformed or out of bounds)" : " (not a member)") +
                                    "; " + std::to_string(refused) + " refused so far");
    }
    return finish_event();
  }
  if (n.cluster->raft->fenced(m)) {
    // The identity fence: a member's disk that is not the one pinned (wiped or swapped).
    // Counted and logged once per power of two.
    uint64_t fenced = ++n.stats.raft_messages_fenced;
    if ((fenced & (fenced - 1)) == 0) {
      n.env.log(LogLevel::warn, "node " + std::to_string(from) +
                                    " speaks from a disk other than the one the cluster "
                                    "admitted it with: it is not counted (remove it and add it "
                                    "back); " +
                                    std::to_string(fenced) + " messages so far");
    }
    // It still gets the log (Raft counts none of its answers): ready once it is added back.
    bool catch_up = m.type == raft::MsgType::append_resp || m.type == raft::MsgType::snapshot_ack;
    if (!catch_up) return finish_event();
  }
  if (m.type == raft::MsgType::snapshot_chunk) {
    n.on_snapshot_chunk(from, m);
  } else if (m.type == raft::MsgType::snapshot_ack) {
    n.on_snapshot_ack(from, m);
  } else if (m.type == raft::MsgType::append && n.snapshot_recv && n.snapshot_recv->deciding) {
    // Bound to install a snapshot, which replaces the log: nothing more is written to the
    // old one (an entry acknowledged now would be lost with it).
  } else if (m.type != raft::MsgType::snapshot) {
    n.cluster->raft->step(m);
  }
  n.after_event();
  return finish_event();
}

Outputs Node::checkpoint_before_stop(bool* current) {
  NodeImpl& n = *impl_;
  if (!n.stop_checkpoint_upto) n.stop_checkpoint_upto = n.store.applied();
  LogIndex upto = *n.stop_checkpoint_upto;
  auto holds = [&] { return !n.checkpoints.empty() && !(n.checkpoints.back().at < upto); };
  bool started = n.checkpoint_behind() && !holds();
  if (started) n.write_store_checkpoint(/*full=*/true);
  if (started || holds()) n.write_stop_rings(started);
  bool rings_settled = n.stop_rings == NodeImpl::StopRings::settled;
  *current = n.stopped || upto.value == 0 || (holds() && rings_settled);
  return finish_event();
}

Outputs Node::hand_over(bool* leading) {
  NodeImpl& n = *impl_;
  bool leads = n.cluster && !n.stopped && n.cluster->raft->role() == raft::Role::leader;
  if (leading != nullptr) *leading = leads;
  if (!leads || n.handing_over) return finish_event();
  if (n.config.mutants.transfer_before_acks_commit) {  // hands over at once, serving on
    auto to = n.cluster->raft->most_caught_up();
    if (!to || !n.cluster->raft->transfer_leadership(*to)) {
      if (leading != nullptr) *leading = false;
      return finish_event();
    }
    ++n.stats.transfers;
    n.after_event();
    return finish_event();
  }
  n.handing_over = true;
  n.hand_over_at_ms = n.env.now_ms() + n.config.hand_over_ack_wait_ms;
  // What the consumption engine took goes into an entry now, not at the next checkpoint.
  if (n.cluster->writable && n.take_checkpoint_into_open()) {
    n.seal();
    n.write_sealed();
  }
  n.hand_over_tick();
  n.after_event();
  return finish_event();
}

uint64_t Node::disk_id() const {
  return impl_->cluster ? impl_->cluster->persisted.disk : 0;
}

size_t Node::voters() const {
  return impl_->cluster ? impl_->cluster->raft->membership().voters.size() : 0;
}

bool Node::is_voter(uint64_t member) const {
  return impl_->cluster && impl_->cluster->raft->membership().is_voter(NodeId(member));
}

uint64_t Node::pinned_disk(uint64_t member) const {
  if (!impl_->cluster) return 0;
  return impl_->cluster->raft->membership().disk_of(NodeId(member));
}

Node::RaftView Node::raft_view() const {
  return impl_->raft_view();
}

Outputs Node::on_cancel(ReplyHandle h) {
  NodeImpl& n = *impl_;
  if (n.cancel_forward(h)) return finish_event();
  if (auto it = n.poll_of_handle.find(h); it != n.poll_of_handle.end()) {
    n.drop_poll(it->second);
    return finish_event();
  }
  if (n.drop_list(h)) return finish_event();
  for (const auto& w : n.checkpoint_waiters)
    if (w.handle == h) n.cancelled.insert(h);
  for (const auto& [idx, p] : n.answers)
    if (p.handle == h) n.cancelled.insert(h);
  return finish_event();
}

Outputs Node::on_forward_reply(uint64_t forward_id, std::optional<Reply> reply) {
  NodeImpl& n = *impl_;
  if (n.stopped || !n.serving) return finish_event();
  n.on_forward_reply(forward_id, std::move(reply));
  n.after_event();
  return finish_event();
}

const Store& Node::store() const {
  return impl_->store;
}

const NodeStats& Node::stats() const {
  NodeImpl& n = *impl_;
  n.stats.lease_expiries = n.engine.stats().lease_expiries;
  n.stats.redeliveries = n.engine.stats().redeliveries;
  n.stats.dlq_moves = n.engine.stats().dlq_moves;
  n.stats.row_hash_reads = n.hashes.stats().reads;
  return n.stats;
}

size_t Node::cursor_rows_held() const {
  return impl_->engine.rows_held();
}

size_t Node::leases_held() const {
  return impl_->engine.leases_held();
}

bool Node::serving() const {
  return impl_->serving && !impl_->stopped;
}

Result<std::vector<PopMessage>> Node::read_messages(PartitionId pid, Offset from,
                                                    uint32_t max) const {
  return impl_->read(pid, from, max);
}

}  // namespace queen
