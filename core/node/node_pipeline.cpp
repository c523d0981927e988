// Entries from open to committed, answers, request ids and the work after every event.
#include "core/node/node_impl.h"

namespace queen {

// -------------------------------------------------------------- entries
void NodeImpl::request_flush() {
  if (flush_armed) return;
  flush_armed = true;
  out.set_timer(kFlushTimer, 0);
}

void NodeImpl::seal() {
  if (open.empty()) return;
  take_checkpoint_into_open();
  Entry e = std::move(open.entry);
  e.term = cluster ? cluster->raft->term() : Term(1);
  e.now_us = stamp_now();
  last_sealed = e.index.value;
  sealed.push_back(std::move(e));
  open = OpenEntry{};
  open.entry.index = LogIndex(last_sealed + 1);
}

int64_t NodeImpl::stamp_now() {
  int64_t now = std::max(env.now_us(), std::max(last_entry_now_us, store.last_now_us()) + 1);
  last_entry_now_us = now;
  return now;
}

// Writes the entry to every log it touches and syncs them; it applies once durable (and,
// in a cluster, committed).
void NodeImpl::write_entry(Entry e) {
  uint64_t idx = e.index.value;
  last_entry_now_us = std::max(last_entry_now_us, e.now_us);
  InFlight f;
  f.written = writer.write(e);
  f.entry = std::move(e);
  for (LogId log : f.written.touched)
    f.syncs_left += writer.sync(log, [&] {
      sync_tokens[next_token] = idx;
      return next_token++;
    });
  last_written = idx;
  log_bytes_since_checkpoint += f.written.bytes;
  log_bytes_since_rings += f.written.bytes;
  if (cluster) {
    cluster->written = idx;
    entry_records.resize(idx - 1);
    entry_records.push_back(EntryRecords{f.written.record, f.written.locations});
  }
  inflight.emplace(idx, std::move(f));
}

void NodeImpl::write_sealed() {
  while (!sealed.empty() && inflight.size() < config.pipeline_max) {
    if (cluster && !propose(sealed.front())) return;
    Entry e = std::move(sealed.front());
    sealed.pop_front();
    write_entry(std::move(e));
  }
  if (config.mutants.answer_before_fsync) send_answers();
}

void NodeImpl::on_flush() {
  flush_armed = false;
  if (!open.empty() && inflight.size() + sealed.size() < config.pipeline_max) seal();
  write_sealed();
}

void NodeImpl::note_appends(const Entry& entry) {
  for (const Effect& e : entry.effects)
    if (const auto* a = std::get_if<EffAppend>(&e))
      appended_since_checkpoint.emplace_back(a->pid, a->base);
}

void NodeImpl::commit_ready() {
  uint64_t limit = cluster ? cluster->commit : UINT64_MAX;
  bool proposed_here = !cluster || cluster->writable;
  int64_t now_us = proposed_here ? env.now_us() : 0;
  while (!inflight.empty() && inflight.begin()->second.syncs_left == 0 &&
         inflight.begin()->first <= limit) {
    auto node = inflight.extract(inflight.begin());
    InFlight& f = node.mapped();
    if (auto st = store.apply(f.entry, f.written.locations); !st.ok())
      return halt(st.error().message);
    note_appends(f.entry);
    applied_term = f.entry.term;
    if (cluster && config.track_applied_chain) applied_chain = chain_hash(applied_chain, f.entry);
    planner.on_applied(f.entry);
    engine.on_applied(f.entry);
    kv.on_applied(f.entry);
    timers.on_applied(f.entry);
    commit = f.entry.index.value;
    ++stats.entries_committed;
    if (proposed_here) traffic.commit_latency.record(now_us - f.entry.now_us);
  }
  if (cluster) cluster->cache.trim(commit);
  send_answers();
  if (cluster) membership_step();
  write_sealed();
  if (!open.empty()) request_flush();
}

void NodeImpl::send_answers() {
  uint64_t upto = config.mutants.answer_before_fsync ? last_written : commit;
  while (!answers.empty() && answers.begin()->first <= upto) {
    Parked p = std::move(answers.begin()->second);
    answers.erase(answers.begin());
    send(std::move(p));
  }
}

void NodeImpl::send(Parked p) {
  if (cancelled.erase(p.handle)) {
    if (auto* pop = std::get_if<PopReply>(&p.reply.body)) engine.hand_back(*pop);
    return;
  }
  count_answer(p.reply);
  out.reply(p.handle, std::move(p.reply));
}

void NodeImpl::park_at(uint64_t index, ReplyHandle h, Reply r) {
  answers.emplace(index, Parked{h, std::move(r)});
}

// Parks the answer of a planned command at the entry that carries it, or at the last
// sealed entry when it planned nothing new (all duplicates, a no-op configure).
void NodeImpl::park_planned(ReplyHandle h, Reply r) {
  uint64_t index = open.empty() ? last_sealed : open.entry.index.value;
  record_outcome(index, r);
  park_at(index, h, std::move(r));
  if (open.empty()) {
    send_answers();
  } else {
    after_plan();
  }
}

// -------------------------------------------------------------- request ids
void NodeImpl::expire_outcomes(int64_t now_ms) {
  while (!outcome_order.empty() &&
         (outcome_order.front().first + config.request_id_window_ms <= now_ms ||
          outcome_order.size() > config.request_outcomes_max)) {
    outcomes.erase(outcome_order.front().second);
    outcome_order.pop_front();
  }
}

void NodeImpl::record_outcome(uint64_t index, const Reply& r) {
  if (current_request.is_nil() || !config.keep_request_outcomes) return;
  int64_t now_ms = env.now_ms();
  outcomes[current_request] = Outcome{index, r, now_ms};
  outcome_order.emplace_back(now_ms, current_request);
  // Logged with the entry that carries the command, so it outlives this process and this
  // node's leadership (a command that planned nothing new has no entry of its own).
  if (open.empty() || index != open.entry.index.value) return;
  std::string bytes = encode_outcome(r);
  if (bytes.empty()) return;
  int64_t keep_until_us = env.now_us() + config.request_id_window_ms * 1000;
  open.entry.effects.push_back(EffRequestOutcome{current_request, keep_until_us, bytes});
}

// The outcomes the store holds (committed) replace what memory had: after a restart, or
// when this node starts to lead.
void NodeImpl::load_outcomes() {
  outcomes.clear();
  outcome_order.clear();
  std::vector<std::pair<int64_t, RequestId>> order;
  for (const auto& [id, stored] : store.request_outcomes()) {
    auto reply = decode_outcome(stored.reply);
    if (!reply) continue;
    int64_t at_ms = stored.keep_until_us / 1000 - config.request_id_window_ms;
    outcomes[RequestId{id}] = Outcome{stored.index, std::move(*reply), at_ms};
    order.emplace_back(at_ms, RequestId{id});
  }
  std::sort(order.begin(), order.end());
  outcome_order.assign(order.begin(), order.end());
}

// A retry under a request id already planned gets the first outcome, once it commits.
bool NodeImpl::answer_known(ReplyHandle h, const RequestId& id, const Command& retried) {
  if (id.is_nil()) return false;
  expire_outcomes(env.now_ms());
  auto it = outcomes.find(id);
  if (it == outcomes.end()) return false;
  Reply reply = it->second.reply;
  if (const auto* push = std::get_if<PushCmd>(&retried)) fill_outcome_names(*push, &reply);
  park_at(it->second.index, h, std::move(reply));
  send_answers();
  return true;
}

void NodeImpl::after_plan() {
  if (open.commands >= config.batch_cmds_max || open.bytes >= config.batch_bytes_max) {
    seal();
    write_sealed();
  } else {
    request_flush();
  }
}

// -------------------------------------------------------------- checkpoints
// The consumption engine's changed rows go into the open entry, and the pops and acks
// waiting for them are answered once it commits; true when there were rows.
bool NodeImpl::take_checkpoint_into_open() {
  auto effects = engine.take_checkpoint();
  uint64_t needs = open.empty() ? last_sealed : open.entry.index.value;
  if (!effects.empty()) {
    needs = open.entry.index.value;
    for (auto& e : effects) open.entry.effects.push_back(std::move(e));
    ++open.commands;
    ++stats.checkpoints;
  }
  for (auto& w : checkpoint_waiters) answers.emplace(needs, std::move(w));
  checkpoint_waiters.clear();
  return !effects.empty();
}

// The timer's checkpoint, for rows no entry sealed since took along (seal() takes them:
// under load they ride the next entry instead of waiting for the timer).
void NodeImpl::on_checkpoint() {
  checkpoint_armed = false;
  if (take_checkpoint_into_open()) after_plan();
  send_answers();
}

void NodeImpl::answer_after_checkpoint(ReplyHandle h, Reply r) {
  if (config.consume_fast) {
    send(Parked{h, std::move(r)});
    return;
  }
  checkpoint_waiters.push_back(Parked{h, std::move(r)});
}

// -------------------------------------------------------------- after every event
void NodeImpl::after_event() {
  if (stopped || !serving) return;
  if (cluster) {
    process_ready();
    maybe_install();
    if (stopped || restart_requested || !cluster->writable) return;
  }
  int64_t now_us = env.now_us();
  engine.expire(now_us);
  if (!cluster || consume_ok()) {
    for (QueueId q : engine.take_woken())
      if (const QueueState* qs = store.queue(q)) serve_polls(qs->name);
  }
  expire_polls(now_us / 1000);
  if ((engine.dirty() || !checkpoint_waiters.empty()) && !checkpoint_armed) {
    checkpoint_armed = true;
    out.set_timer(kCheckpointTimer, config.checkpoint_ms);
  }
  if (config.timer_tick_ms > 0 && !timer_tick_armed && !store.timers().empty()) {
    timer_tick_armed = true;
    out.set_timer(kTimerTick, config.timer_tick_ms);
  }
  if (!sweep_armed && !store.kv_expiries().empty()) {
    sweep_armed = true;
    out.set_timer(kSweepTimer, config.kv_sweep_ms);
  }
  if (!retention_armed && config.retention_interval_ms > 0) {
    retention_armed = true;
    out.set_timer(kRetentionTimer, config.retention_interval_ms);
  }
  if (!lag_walk_armed && engine.lag_walks_due()) {
    lag_walk_armed = true;
    out.set_timer(kLagWalkTimer, Engine::kLagStepEveryMs);
  }
  if (!list_step_armed && !list_reads.empty()) {  // the next slice once queued events ran
    list_step_armed = true;
    out.set_timer(kListStepTimer, 0);
  }
  int64_t wake = engine.next_expiry_us();
  wake = wake == INT64_MAX ? INT64_MAX : (wake + 999) / 1000;
  if (!poll_deadlines.empty()) wake = std::min(wake, poll_deadlines.begin()->first);
  if (wake != INT64_MAX && wake != wake_at_ms) {
    wake_at_ms = wake;
    out.set_timer(kWakeTimer, std::max<int64_t>(0, wake - now_us / 1000));
  }
}

}  // namespace queen
