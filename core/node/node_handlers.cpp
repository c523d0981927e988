// The handlers of pushes, configuration, acks, KV, locks, timers and transactions. Every
// command kind has a `handle` overload (here, node_polls.cpp or node_admin.cpp): the node
// dispatches with std::visit, so a kind without one does not compile.
#include "core/node/node_impl.h"

namespace queen {

void NodeImpl::handle(ReplyHandle h, CommandEnvelope&, PushCmd& push) {
  PushReply r = planner.plan_push(std::move(push.items), env.now_us(), &open);
  if (maintenance_of(store).push) {  // stored, and held back from consumers for now
    for (PushResult& x : r.results)
      if (x.status == PushStatus::queued) x.status = PushStatus::buffered;
  }
  park_planned(h, Reply{std::move(r)});
}

void NodeImpl::handle(ReplyHandle h, CommandEnvelope&, ConfigureCmd& cfg) {
  park_planned(h, Reply{planner.plan_configure(cfg, &open)});
}

void NodeImpl::handle(ReplyHandle h, CommandEnvelope&, AckCmd& ack) {
  bool changed = false;
  AckReply r = engine.ack(std::move(ack), env.now_us(), &changed);
  bool any_success =
      std::any_of(r.results.begin(), r.results.end(), [](const AckResult& a) { return a.success; });
  if (changed || any_success) return answer_after_checkpoint(h, Reply{std::move(r)});
  send(Parked{h, Reply{std::move(r)}});
}

void NodeImpl::handle(ReplyHandle h, CommandEnvelope&, KvCmd& x) {
  handle_kv(h, x);
}
void NodeImpl::handle(ReplyHandle h, CommandEnvelope&, LockCmd& x) {
  handle_locks(h, x);
}
void NodeImpl::handle(ReplyHandle h, CommandEnvelope&, TimerCmd& x) {
  handle_timers(h, x);
}
void NodeImpl::handle(ReplyHandle h, CommandEnvelope&, TxnCmd& x) {
  handle_txn(h, x);
}

void NodeImpl::handle(ReplyHandle h, CommandEnvelope&, TimerQueryCmd& x) {
  TimerQueryReply r = timers.query(x);
  for (TimerView& t : r.timers) t.payload = readable_payload(env, t.payload);
  out.reply(h, Reply{std::move(r)});
}

// -------------------------------------------------------------- KV, locks, timers, txns
// A KV or lock call that changed nothing is answered now; one that did commits its scratch
// into the open entry and is answered once that entry commits.
void NodeImpl::commit_kv_or_answer(ReplyHandle h, KvScratch scratch, Reply r, bool changed) {
  if (!changed || scratch.effects.empty()) return send(Parked{h, std::move(r)});
  kv.commit(std::move(scratch), &open);
  ++open.commands;
  park_planned(h, std::move(r));
}

void NodeImpl::handle_kv(ReplyHandle h, const KvCmd& cmd) {
  KvScratch scratch;
  KvReply r = kv.run(cmd.ops, env.now_us(), &scratch);
  bool ok = r.ok;
  commit_kv_or_answer(h, std::move(scratch), Reply{std::move(r)}, ok);
}

void NodeImpl::handle_locks(ReplyHandle h, const LockCmd& cmd) {
  KvScratch scratch;
  LockReply r = locks.run(cmd, env.now_us(), &scratch);
  commit_kv_or_answer(h, std::move(scratch), Reply{std::move(r)}, true);
}

void NodeImpl::handle_timers(ReplyHandle h, const TimerCmd& cmd) {
  std::vector<TimerOp> ops = cmd.ops;
  if (auto refused = planner.seal_timer_payloads(&ops)) return send(Parked{h, Reply{*refused}});
  TimerScratch scratch;
  TimerReply r = timers.run(ops, env.now_us(), &scratch);
  timers.commit(std::move(scratch), &open);
  ++open.commands;
  park_planned(h, Reply{std::move(r)});
}

void NodeImpl::fire_timers() {
  timer_tick_armed = false;
  int64_t now_us = env.now_us();
  auto due = timers.take_due(now_us, open.entry.index.value);
  for (auto& [key, row] : due) {
    PushCmd push;
    push.items.push_back(PushItem{key.first, row.partition, row.txn, row.txn_hash, row.message_id,
                                  row.payload, "", looks_sealed(row.payload), ""});
    auto pushed = planner.plan_push(std::move(push.items), now_us, &open);
    if (pushed.refused) {
      fire_failed(key, std::move(row), pushed.refused->message, now_us);
      continue;
    }
    open.entry.effects.push_back(EffTimerDelete{key.first, key.second});
  }
  if (!due.empty()) after_plan();
}

// A fire refused (a clear payload for a queue encrypted since, and no key): the timer is
// retried after a backoff; the last allowed failure dead-letters it under __timer__.
void NodeImpl::fire_failed(const TimerKey& key, TimerRow row, const std::string& error,
                           int64_t now_us) {
  ++row.attempts;
  const QueueState* q = store.queue(key.first);
  if (row.attempts >= TimerPlanner::kFireAttemptsMax && q != nullptr) {
    open.entry.effects.push_back(EffTimerDlq{q->id, key.second, std::move(row), error});
    open.entry.effects.push_back(EffTimerDelete{key.first, key.second});
    return;
  }
  row.deliver_at_us = now_us + TimerPlanner::fire_backoff_ms(row.attempts) * 1000;
  open.entry.effects.push_back(EffTimerPut{key.first, key.second, std::move(row)});
}

void NodeImpl::sweep_kv() {
  sweep_armed = false;
  auto effects = kv.sweep(env.now_us(), open.entry.index.value);
  if (effects.empty()) return;
  for (auto& e : effects) open.entry.effects.push_back(std::move(e));
  ++open.commands;
  after_plan();
}

void NodeImpl::run_retention() {
  retention_armed = false;
  int64_t now_us = env.now_us();
  RetentionPass pass =
      retention.scan(store, now_us, config.retention_visit_max,
                     config.partition_cleanup_after_s * 1'000'000, config.rows_window_min_s);
  size_t before = open.entry.effects.size();
  // Idle in the store; the planner and the engine know what has not landed there yet.
  std::set<PartitionId> leased;
  if (!pass.idle.empty()) leased = engine.leased_partitions(now_us);
  for (PartitionId pid : pass.idle) {
    if (planner.appending(pid) || leased.contains(pid)) continue;
    planner.plan_delete_partition(*store.partition(pid), &open);
  }
  for (auto& e : pass.effects) open.entry.effects.push_back(std::move(e));
  int64_t traces_from_us = now_us - config.trace_retention_s * 1'000'000;
  if (config.trace_retention_s > 0 && !store.traces().empty() &&
      store.traces().front().created_us < traces_from_us)
    open.entry.effects.push_back(EffTraceTrim{traces_from_us});
  if (open.entry.effects.size() == before) return;
  ++open.commands;
  after_plan();
}

TxnReply NodeImpl::rollback(TxnReply r, std::string reason, std::string error) {
  r.success = false;
  r.reason = std::move(reason);
  r.error = std::move(error) + "; the transaction rolled back";
  r.results.clear();
  return r;
}

// Every item the transaction pushes, in order: one operation's own list when only one
// operation pushes, else copied into `joined`.
const std::vector<PushItem>& NodeImpl::pushed_items(const TxnCmd& cmd,
                                                    std::vector<PushItem>* joined) {
  const TxnOperation* only = nullptr;
  size_t pushing = 0;
  for (const auto& op : cmd.operations) {
    if (op.is_ack) continue;
    only = &op;
    ++pushing;
  }
  if (pushing == 1) return only->items;
  for (const auto& op : cmd.operations)
    if (!op.is_ack) joined->insert(joined->end(), op.items.begin(), op.items.end());
  return *joined;
}

// Checks every part of the call before changing anything, so a refusal leaves no trace;
// then plans all of it into the open entry: one entry, all or nothing on disk. Takes the
// pushed items out of `cmd` as it plans them.
void NodeImpl::handle_txn(ReplyHandle h, TxnCmd& cmd) {
  int64_t now_us = env.now_us();
  TxnReply reply;
  reply.transaction_id = cmd.transaction_id;
  TxnConsumePlan consume = engine.plan_txn(cmd, now_us);
  if (!consume.ok) return send(Parked{h, Reply{rollback(reply, consume.reason, consume.error)}});
  std::vector<PushItem> joined;  // only when more than one operation pushes
  const std::vector<PushItem>& items = pushed_items(cmd, &joined);
  auto found = planner.find_duplicate(items, now_us);
  if (!found.ok()) {
    ErrorReply e{api::Errc::internal,
                 "cannot check the pushes for duplicates: " + found.error().message};
    return send(Parked{h, Reply{std::move(e)}});
  }
  if (const auto& dup = found.value()) {
    std::string e = "QDUP transactionId " + dup->transaction_id + " is already in partition " +
                    dup->partition + " at offset " + std::to_string(dup->offset.value);
    return send(Parked{h, Reply{rollback(reply, "duplicate", e)}});
  }
  std::vector<TimerOp> timer_ops = cmd.timers;
  if (auto refused = planner.seal_refusal(items)) return send(Parked{h, Reply{*refused}});
  if (auto refused = planner.seal_timer_payloads(&timer_ops))
    return send(Parked{h, Reply{*refused}});
  KvScratch kv_scratch;
  KvReply kvr = kv.run(cmd.kv, now_us, &kv_scratch);
  if (!kvr.ok) {
    TxnReply r = rollback(reply, "kv_precondition",
                          "QKV precondition " + kvr.kv_reason + " failed at kv[" +
                              std::to_string(kvr.failed_index) + "]");
    // In the flat index space of the results: every ack and pushed item, then the kv ops.
    r.failed_index = static_cast<uint32_t>(consume.acks.size() + items.size()) + kvr.failed_index;
    r.kv_reason = kvr.kv_reason;
    r.failed_row = kvr.failed_row;
    return send(Parked{h, Reply{std::move(r)}});
  }
  TimerScratch timer_scratch;
  TimerReply tr = timers.run(timer_ops, now_us, &timer_scratch);
  reply.success = true;
  uint32_t index = 0, ack_no = 0;
  for (uint32_t i = 0; i < cmd.operations.size(); ++i) {
    TxnResult res;
    res.op_index = i;
    if (cmd.operations[i].is_ack) {
      res.index = index++;
      res.type = TxnResultType::ack;
      res.ack = consume.acks.at(ack_no++);
      reply.results.push_back(std::move(res));
      continue;
    }
    // One result per pushed item, each with its own index.
    res.type = TxnResultType::push;
    auto pushed = planner.plan_push(std::move(cmd.operations[i].items), now_us, &open).results;
    for (auto& item : pushed) {
      TxnResult one = res;
      one.index = index++;
      one.pushes.push_back(std::move(item));
      reply.results.push_back(std::move(one));
    }
  }
  for (auto& k : kvr.results) {
    TxnResult res;
    res.index = index++;
    res.type = TxnResultType::kv;
    res.op_index = k.index;
    res.kv = std::move(k);
    reply.results.push_back(std::move(res));
  }
  for (auto& t : tr.results) {
    TxnResult res;
    res.index = index++;
    res.type = TxnResultType::timer;
    res.op_index = t.index;
    res.success = t.ok;
    res.timer = std::move(t);
    reply.results.push_back(std::move(res));
  }
  for (uint32_t i = 0; i < cmd.positions.size(); ++i) {
    TxnResult res;
    res.index = index++;
    res.type = TxnResultType::position;
    res.op_index = i;
    reply.results.push_back(std::move(res));
  }
  kv.commit(std::move(kv_scratch), &open);
  timers.commit(std::move(timer_scratch), &open);
  for (auto& e : engine.commit_txn(std::move(consume))) open.entry.effects.push_back(std::move(e));
  ++open.commands;
  park_planned(h, Reply{std::move(reply)});
}

}  // namespace queen
