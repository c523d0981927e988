// The replicated log: proposals, Raft's ready work, leadership and the start of a cluster.
#include "core/common/text.h"
#include "core/node/node_impl.h"

namespace queen {

// -------------------------------------------------------------- cluster (Raft)
// Leader: hands a sealed entry to Raft, which appends it at the next index.
bool NodeImpl::propose(const Entry& e) {
  Cluster& c = *cluster;
  Bytes data = encode_replicated(e);
  // Paired check: what a follower decodes encodes to the very bytes sent.
  QUEEN_DEBUG_ASSERT(decode_replicated(data.data(), data.size()).ok() &&
                         encode_replicated(decode_replicated(data.data(), data.size()).value()) ==
                             data,
                     "entry %llu does not decode to what was encoded",
                     static_cast<unsigned long long>(e.index.value));
  c.cache.put(e.index, e.term, data);
  std::optional<LogIndex> idx;
  auto conf = configuration_effect(e);
  uint32_t version = conf ? conf->cluster_version : c.configs.rbegin()->second.cluster_version;
  uint32_t format = entry_format(e);
  QUEEN_ASSERT(format <= version, "entry %llu is of a format the cluster may not read",
               static_cast<unsigned long long>(e.index.value));
  check_format(e.index, format);
  if (conf) {
    raft::Membership next = to_raft(*conf);
    if (c.raft->check_change(next) == raft::ChangeRefusal::none) {
      c.configs[e.index.value] = std::move(*conf);
      idx = c.raft->propose_membership(std::move(data), next);
    }
  } else {
    idx = c.raft->propose(std::move(data));
  }
  if (!idx) {
    c.cache.truncate_after(LogIndex(e.index.value - 1));
    return false;
  }
  QUEEN_ASSERT(*idx == e.index, "the planner planned entry %llu, Raft appended %llu",
               static_cast<unsigned long long>(e.index.value),
               static_cast<unsigned long long>(idx->value));
  return true;
}

void NodeImpl::process_ready() {
  Cluster& c = *cluster;
  for (;;) {
    raft::Ready rd = c.raft->take_ready();
    if (rd.empty()) break;
    if (rd.hard_state) persist_state();
    if (rd.truncate_after) truncate_log(rd.truncate_after->value);
    for (auto& e : rd.append) append_replicated(std::move(e));
    for (auto& m : rd.messages) send_message(std::move(m));
    if (rd.commit) {
      c.commit = rd.commit->value;
      commit_ready();
    }
    if (stopped) return;
    check_role();
  }
  settle_membership();
}

// Writes Raft's hard state and the applied index (known committed) to the next slot. One
// write at a time: a second one waits, so a crash always leaves one durable slot.
void NodeImpl::persist_state() {
  Cluster& c = *cluster;
  if (!c.hs_tokens.empty()) {
    c.persist_again = true;
    return;
  }
  PersistedState& p = c.persisted;
  ++p.seq;
  p.term = c.raft->term();
  p.vote = c.raft->vote();
  p.commit = LogIndex(commit);
  std::string file = hard_state_file(p.seq);
  bool& exists = c.hs_file_exists[p.seq % 2];
  if (exists) out.truncate(file, 0);
  exists = true;
  out.append(file, encode_hard_state(p));
  c.hs_tokens.insert(next_token);
  out.sync(file, next_token++);
}

void NodeImpl::on_state_synced(uint64_t token) {
  Cluster& c = *cluster;
  c.hs_tokens.erase(token);
  if (c.persist_again) {
    c.persist_again = false;
    persist_state();
    return;
  }
  while (!c.held.empty()) {
    out.send(c.held.front().to.value, raft::encode_message(c.held.front()));
    c.held.pop_front();
  }
}

void NodeImpl::send_message(raft::Message m) {
  Cluster& c = *cluster;
  if (m.type == raft::MsgType::snapshot) return start_snapshot_send(m.to, m.index);
  if (!c.hs_tokens.empty() || !c.held.empty()) {
    if (c.held.size() >= config.held_messages_max) return;  // Raft sends it again
    c.held.push_back(std::move(m));
    return;
  }
  out.send(m.to.value, raft::encode_message(m));
}

uint64_t NodeImpl::leader_id() const {
  auto l = cluster->raft->leader();
  return l ? l->value : 0;
}

Reply NodeImpl::not_serving_reply() const {
  uint64_t leader = leader_id();
  if (leader == 0)
    return error_reply(api::Errc::no_leader, "no leader is known yet (an election is running)", 1);
  if (leader == config.node_id)
    return error_reply(api::Errc::not_leader, "the new leader is still settling", 1, leader);
  return error_reply(api::Errc::not_leader, "this node is not the leader", 1, leader);
}

// Answers not_leader (a retry) everything parked at an entry after `index`: never proposed, or
// cut.
void NodeImpl::fail_answers_after(uint64_t index, const std::string& why) {
  for (auto it = answers.upper_bound(index); it != answers.end();) {
    Parked p{it->second.handle, error_reply(api::Errc::not_leader, why, 1, leader_id())};
    it = answers.erase(it);
    send(std::move(p));
  }
  std::erase_if(outcomes, [&](const auto& kv) { return kv.second.index > index; });
}

void NodeImpl::check_role() {
  Cluster& c = *cluster;
  bool leading = c.raft->role() == raft::Role::leader;
  uint64_t term = c.raft->term().value;
  if (c.lead_term != 0 && (!leading || c.lead_term != term)) step_down();
  if (leading && c.lead_term == 0) {
    c.lead_term = term;
    c.lead_index = c.raft->last_index().value;
  }
  if (leading && !c.writable && commit >= c.lead_index) become_writable();
  if (c.writable) force_recover_step();
}

// An entry of this leader's term has applied: everything before it is applied too, so the
// planner and the engine start from the committed store.
void NodeImpl::become_writable() {
  Cluster& c = *cluster;
  c.writable = true;
  planner.reset();
  kv.reset();
  timers.reset();
  engine.reset();
  engine.load(config.mutants.no_foreign_lease_grace ? 0 : config.max_clock_skew_ms * 1000);
  load_outcomes();
  open = OpenEntry{};
  last_sealed = last_written = c.raft->last_index().value;
  open.entry.index = LogIndex(last_sealed + 1);
  // Timers that fired while this node did not lead found nothing to do: arm them afresh.
  flush_armed = checkpoint_armed = timer_tick_armed = sweep_armed = retention_armed = false;
  lag_walk_armed = false;
  wake_at_ms = INT64_MAX;
  c.consume_from_ms = env.now_ms() + config.checkpoint_ms + config.max_clock_skew_ms;
  env.log(LogLevel::info, "leading in term " + std::to_string(c.lead_term) + " from entry " +
                              std::to_string(c.lead_index));
}

void NodeImpl::step_down() {
  Cluster& c = *cluster;
  env.log(LogLevel::info, "stopped leading in term " + std::to_string(c.lead_term));
  c.lead_term = 0;
  c.writable = false;
  c.consume_from_ms = INT64_MAX;
  snapshot_sends.clear();
  drop_membership_job();
  fail_answers_after(c.written, "the leader changed before this write was replicated");
  fail_lists(not_serving_reply());  // read from a store this node no longer keeps current
  // A pop parked at a written entry may still commit under the next leader, but its lease
  // was timed by this one: answered late, it would hand out a lease already expired (and
  // perhaps already re-granted). The client pops again; a committed claim just expires.
  for (auto it = answers.begin(); it != answers.end();) {
    if (!std::holds_alternative<PopReply>(it->second.reply.body)) {
      ++it;
      continue;
    }
    send(Parked{it->second.handle, error_reply(api::Errc::not_leader, "the leader changed", 1)});
    it = answers.erase(it);
  }
  open = OpenEntry{};
  sealed.clear();
  for (auto& w : checkpoint_waiters) {
    bool pop = std::holds_alternative<PopReply>(w.reply.body);
    send(Parked{w.handle,
                pop ? error_reply(api::Errc::not_leader, "the leader changed", 1, leader_id())
                    : error_reply(api::Errc::outcome_unknown,
                                  "the leader changed while this was being checkpointed", 1)});
  }
  checkpoint_waiters.clear();
  while (!polls.empty()) {
    ReplyHandle h = polls.begin()->second.handle;
    drop_poll(polls.begin()->first);
    send(Parked{h, error_reply(api::Errc::not_leader, "the leader changed", 1, leader_id())});
  }
  planner.reset();
  kv.reset();
  timers.reset();
  engine.reset();
}

bool NodeImpl::consume_ok() {
  Cluster& c = *cluster;
  if (env.now_ms() < c.consume_from_ms) return false;
  uint64_t ticks = c.raft->ticks_since_quorum();
  return ticks != UINT64_MAX &&
         static_cast<int64_t>(ticks) * config.raft_heartbeat_ms < config.leader_lease_ms;
}

void NodeImpl::persist_commit_later() {
  Cluster& c = *cluster;
  if (c.persist_armed) return;
  c.persist_armed = true;
  out.set_timer(kCommitPersistTimer, config.commit_persist_ms);
}

Status NodeImpl::start_cluster(const std::vector<FileInfo>& files, RecoveryOptions opt) {
  cluster = std::make_unique<Cluster>(config.raft_cache_bytes_max);
  Cluster& c = *cluster;
  auto hs = load_hard_state(env, files);
  if (!hs.ok()) return hs.error();
  c.persisted = hs.value();
  bool minted = c.persisted.disk == 0;
  while (c.persisted.disk == 0) c.persisted.disk = env.random_u64();
  for (const auto& f : files) {
    if (f.name == "raft/hs.0") c.hs_file_exists[0] = true;
    if (f.name == "raft/hs.1") c.hs_file_exists[1] = true;
  }
  raft::TermRuns runs;
  // A checkpoint holds only applied entries, and those were committed.
  opt.apply_upto = std::max(c.persisted.commit.value, store.applied().value);
  opt.keep_recent_max = config.raft_recovered_cached_max;
  // Entries the checkpoint holds stay in the log while a follower may need them: Raft sees
  // them from index 1 when none is missing. Otherwise (reclaimed, or the node came from a
  // snapshot) its log starts at the checkpoint, and only a snapshot reaches further back.
  LogIndex base = store.applied();
  Term base_term = applied_term;
  bool rebased = false;
  auto rebase = [&] {
    if (runs.last() >= base) return;
    runs.reset(base, base_term);
    entry_records.assign(base.value, EntryRecords{});
    rebased = true;
  };
  opt.on_below_store = [&](const Entry& e, const RecordLocation& at,
                           const std::vector<RecordLocation>& messages) {
    if (e.index != runs.last().next()) return;
    runs.append(e.index, e.term);
    entry_records.push_back(EntryRecords{at, messages});
  };
  opt.on_replayed = [&](const Entry& e, const RecordLocation& at,
                        const std::vector<RecordLocation>& messages) {
    rebase();
    runs.append(e.index, e.term);
    planner.on_applied(e);  // a replayed append leaves its ring behind (load_rings)
    applied_term = e.term;
    if (config.track_applied_chain) applied_chain = chain_hash(applied_chain, e);
    entry_records.push_back(EntryRecords{at, messages});
  };
  std::vector<RecoveredEntry> recovered;
  RecoveryStats rs;
  auto st = recover(env, files, opt, &store, &writer, &rs, &recovered);
  if (!st.ok()) return st;
  planner.dedup().keep_stale_rings(false);
  rebase();
  stats.recovered_entries = rs.entries_replayed;
  stats.torn_tails_cut = rs.torn_tails_cut;
  for (auto& r : recovered) {
    auto loaded = load_frames(env, &r);
    if (!loaded.ok()) return loaded;
    if (!r.applied) {
      runs.append(r.entry.index, r.entry.term);
      entry_records.push_back(EntryRecords{r.record, r.locations});
    }
    c.cache.put(r.entry.index, r.entry.term, encode_replicated(r.entry));
    last_entry_now_us = std::max(last_entry_now_us, r.entry.now_us);
    if (r.applied) continue;
    InFlight f;
    f.written.locations = r.locations;
    f.written.starts = r.starts;
    f.entry = std::move(r.entry);
    inflight.emplace(f.entry.index.value, std::move(f));
  }
  commit = last_sealed = store.applied().value;
  c.written = c.durable = last_written = runs.last().value;
  c.commit = commit;
  raft::Config rc;
  rc.id = NodeId(config.node_id);
  rc.disk = c.persisted.disk;
  rc.kinds = config.format_max;
  start_membership(&rc, runs.last());
  rc.election_ticks = static_cast<uint32_t>(std::max<int64_t>(
      2, config.raft_election_ms / std::max<int64_t>(1, config.raft_heartbeat_ms)));
  rc.inflight_max = config.raft_inflight_max;
  rc.log_hold_ticks = static_cast<uint64_t>(std::max<int64_t>(
      1, config.raft_purge_hold_ms / std::max<int64_t>(1, config.raft_heartbeat_ms)));
  rc.append_bytes_max = config.batch_bytes_max;
  rc.mutant_commit_without_majority = config.mutants.commit_without_majority;
  rc.mutant_vote_twice = config.mutants.vote_twice;
  rc.mutant_learner_in_quorum = config.mutants.learner_in_quorum;
  rc.mutant_changes_in_flight = config.mutants.changes_in_flight;
  rc.mutant_removed_leader_serves = config.mutants.removed_leader_serves;
  rc.mutant_no_fence = config.mutants.no_fence;
  c.raft =
      std::make_unique<raft::Raft>(rc, raft::HardState{c.persisted.term, c.persisted.vote},
                                   std::move(runs), c.cache, LogIndex(commit), env_random, &env);
  if (rebased) c.raft->compact(base);
  // A new disk id is durable before any message carries it.
  if (minted) {
    env.log(LogLevel::info, "a new disk: id " + hex_u64(c.persisted.disk));
    persist_state();
  }
  for (const auto& [index, f] : inflight) recovered_membership(f.entry);
  settle_membership();
  c.cache.fallback = [this](uint64_t index) -> std::optional<raft::LogEntry> {
    if (index <= cluster->raft->log_start().value || index > commit || index > entry_records.size())
      return std::nullopt;
    const EntryRecords& at = entry_records[index - 1];
    auto data = read_replicated(env, at.record, at.messages);
    auto term = cluster->raft->term_of(LogIndex(index));
    if (!data.ok() || !term) return std::nullopt;
    ++stats.entries_read_back;
    return raft::LogEntry{LogIndex(index), *term, std::move(data.value())};
  };
  out.set_timer(kRaftTick, config.raft_heartbeat_ms);
  persist_commit_later();
  serving = true;
  return ok_status();
}

// -------------------------------------------------------------- graceful stop
// Whether something this leader took is still on its way to a commit: planned or waiting
// entries, answers parked at them, consumption rows not checkpointed yet.
bool NodeImpl::acks_in_flight() const {
  return !answers.empty() || !checkpoint_waiters.empty() || engine.dirty() || !open.empty() ||
         !sealed.empty();
}

// A graceful stop waits (at most until hand_over_at_ms) for what it took to commit, then
// hands leadership over; it tries again each poll while no voter can take it.
void NodeImpl::hand_over_tick() {
  if (!handing_over || stopped || cluster->raft->role() != raft::Role::leader) return;
  if (cluster->raft->transferring()) return;
  if (acks_in_flight() && env.now_ms() < hand_over_at_ms) {
    out.set_timer(kHandOverTimer, kHandOverPollMs);
    return;
  }
  auto to = cluster->raft->most_caught_up();
  if (!to || !cluster->raft->transfer_leadership(*to)) {
    out.set_timer(kHandOverTimer, kHandOverPollMs);
    return;
  }
  ++stats.transfers;
  env.log(LogLevel::info, "handing leadership to node " + std::to_string(to->value));
}

}  // namespace queen
