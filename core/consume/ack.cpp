// The consumption engine's acks and a transaction's acks (engine.h): one call applies
// partition by partition in offset order; a failed or retry ack stops its partition there.
#include "core/consume/engine.h"

#include <algorithm>
#include <map>
#include <span>
#include <string_view>
#include <tuple>
#include <utility>

#include "core/consume/cursor_rules.h"

namespace queen {

// ---------------------------------------------------------------------------- ack

namespace {

// At one offset a call's strongest signal applies first: dlq, failed, retry, then completed.
int signal_rank(AckStatus s) {
  switch (s) {
    case AckStatus::dlq:
      return 0;
    case AckStatus::failed:
      return 1;
    case AckStatus::retry:
      return 2;
    case AckStatus::completed:
      return 3;
  }
  return 3;
}

bool is_signal(AckStatus s) {
  return s != AckStatus::completed;
}

// The answer to an ack a failed or retry ack before it in the same call kept from applying.
std::string not_committed(Offset stop) {
  return "not committed: the failed or retry ack at offset " + std::to_string(stop.value) +
         " in the same call stops the cursor there; this message is delivered again";
}

// Numbers a call's consumer groups by their first appearance, so that its acks sort and
// group by number rather than by comparing names.
class GroupNumbers {
 public:
  uint32_t of(const std::string& group) {
    if (last_ && *last_ == group) return last_no_;
    last_ = &group;
    last_no_ = numbers_.try_emplace(group, static_cast<uint32_t>(numbers_.size())).first->second;
    return last_no_;
  }

 private:
  std::map<std::string_view, uint32_t> numbers_;
  const std::string* last_ = nullptr;
  uint32_t last_no_ = 0;
};

// One resolved ack of a call, in the order the call applies it.
struct AckStep {
  uint32_t group_no;  // GroupNumbers' number of its group
  PartitionId pid;
  Offset offset;
  int rank;
  uint32_t index;
  auto key() const { return std::tie(group_no, pid, offset, rank, index); }
};

// Sorts a call's resolved acks partition by partition, each by offset, so that a failed or
// retry ack can stop every later ack of its partition in the call.
void order_steps(std::vector<AckStep>* steps) {
  std::sort(steps->begin(), steps->end(),
            [](const AckStep& a, const AckStep& b) { return a.key() < b.key(); });
}

bool same_partition(const AckStep& a, const AckStep& b) {
  return a.pid == b.pid && a.group_no == b.group_no;
}

// The end of the run of items from `i` on: those of the same group and partition.
size_t end_of_run(const std::vector<AckItem>& items, size_t i) {
  size_t end = i + 1;
  while (end < items.size() && items[end].partition_id == items[i].partition_id &&
         items[end].group == items[i].group)
    ++end;
  return end;
}

std::optional<Offset> first_in_batch(const std::vector<std::pair<Hash128, Offset>>& batch,
                                     const Hash128& h) {
  auto it = std::lower_bound(batch.begin(), batch.end(), std::make_pair(h, Offset(0)));
  if (it == batch.end() || it->first != h) return std::nullopt;
  return it->second;
}

// Whether an ack names a message the group has settled for good (below its cursor, acked or
// in the DLQ): a completed ack is then a harmless repeat, any other status comes too late,
// except a repeat of the DLQ move itself.
bool settled_too_late(const MsgState* st, AckStatus status) {
  if (status == AckStatus::completed) return false;
  return !(st && *st == MsgState::dlq && status != AckStatus::retry);
}

}  // namespace

Result<std::optional<Offset>> Engine::resolve_ack(const std::string& group, const PartitionState& p,
                                                  const Hash128& txn_hash) {
  return resolve_in(p, ack_window(group, p), txn_hash, nullptr);
}

Engine::AckWindow Engine::ack_window(const std::string& group, const PartitionState& p) const {
  AckWindow w;
  w.cursor = p.log_start;
  if (const CursorRow* row = rows_.find(group, p.id)) {
    w.batch_start = row->batch_start;
    w.batch_end = row->batch_end;
    w.cursor = row->next;
  } else if (auto mit = metas_.find(GroupKey{group, p.queue}); mit != metas_.end()) {
    w.cursor = std::max(start_offset(mit->second, p), p.log_start);
  }
  w.cursor = std::min(w.cursor, p.next_offset);
  return w;
}

Result<std::optional<Offset>> Engine::resolve_in(const PartitionState& p, const AckWindow& w,
                                                 const Hash128& txn_hash,
                                                 const BatchHashes* batch) {
  if (w.batch_start < w.batch_end) {
    if (batch) {
      if (auto o = first_in_batch(*batch, txn_hash)) return o;
    } else {
      auto found = hashes_.find(p, txn_hash, w.batch_start, w.batch_end);
      if (!found.ok() || found.value()) return found;
    }
  }
  Offset ahead(std::min(p.next_offset.value, w.cursor.value + kAckScanMessagesMax));
  auto found = hashes_.find(p, txn_hash, w.cursor, ahead, kAckScanRowsMax);
  if (!found.ok() || found.value()) return found;
  Offset behind(w.cursor.value - std::min(w.cursor.value, kAckScanMessagesMax));
  return hashes_.find_last(p, txn_hash, behind, w.cursor, kAckScanRowsMax);
}

void Engine::resolve_run(const PartitionState& p, std::span<const AckItem> run,
                         std::vector<Result<std::optional<Offset>>>* found) {
  AckWindow w = ack_window(run.front().group, p);
  BatchHashes batch;
  bool indexed = run.size() >= kAckIndexedRunMin && w.batch_start < w.batch_end &&
                 hashes_.collect(p, w.batch_start, w.batch_end, &batch).ok();
  // An unreadable batch is looked in ack by ack, each answered with the read's error.
  if (indexed) std::sort(batch.begin(), batch.end());
  for (const AckItem& item : run)
    found->push_back(resolve_in(p, w, item.txn_hash, indexed ? &batch : nullptr));
}

// Each partition's acks apply in offset order. A failed or retry ack that hands its batch
// back stops the partition there: no later ack of the call moves past it, and the messages
// after it come back with it (a completed ack among them is answered as redelivered).
AckReply Engine::ack(AckCmd cmd, int64_t now_us, bool* changed) {
  AckReply reply;
  reply.results.resize(cmd.items.size());
  std::vector<AckStep> steps;
  steps.reserve(cmd.items.size());
  GroupNumbers groups;
  std::vector<Result<std::optional<Offset>>> found;
  // Resolved first, run by run as the items come.
  for (size_t from = 0; from < cmd.items.size();) {
    size_t end = end_of_run(cmd.items, from);
    const PartitionState* p = store_.partition(cmd.items[from].partition_id);
    found.clear();
    if (p) resolve_run(*p, std::span(cmd.items).subspan(from, end - from), &found);
    uint32_t group_no = groups.of(cmd.items[from].group);
    for (size_t i = from; i < end; ++i) {
      AckItem& item = cmd.items[i];
      auto o = p ? std::move(found[i - from]) : std::optional<Offset>();
      if (!o.ok() || !o.value()) {
        reply.results[i] = refuse_unresolved(item, i, p);
        if (!o.ok()) reply.results[i].error = "cannot resolve the ack: " + o.error().message;
        continue;
      }
      steps.push_back(
          AckStep{group_no, p->id, *o.value(), signal_rank(item.status), static_cast<uint32_t>(i)});
    }
    from = end;
  }
  // Then partition by partition, each in offset order.
  order_steps(&steps);
  AckTarget target;
  const AckStep* stopped = nullptr;
  for (size_t s = 0; s < steps.size(); ++s) {
    const AckStep& step = steps[s];
    AckItem& item = cmd.items[step.index];
    if (s == 0 || !same_partition(steps[s - 1], step)) {
      target = ack_target(item.group, step.pid);
      stopped = nullptr;
    }
    if (stopped) {
      reply.results[step.index] = redelivered(item, step.index, stopped->offset);
      continue;
    }
    AckResult& res = reply.results[step.index];
    res = ack_one(item, step.index, step.offset, now_us, &target, changed);
    if (res.success && is_signal(item.status) && !res.dlq && !res.noop) stopped = &step;
  }
  return reply;
}

Engine::AckTarget Engine::ack_target(const std::string& group, PartitionId pid) const {
  AckTarget t;
  t.p = store_.partition(pid);
  t.q = store_.queue(t.p->queue);
  t.row = rows_.find(group, pid);
  return t;
}

AckResult Engine::refuse_unresolved(AckItem& item, uint32_t index, const PartitionState* p) {
  if (!p) {
    AckResult res;
    res.index = index;
    res.transaction_id = std::move(item.transaction_id);
    res.error = "partition " + std::to_string(item.partition_id.value) + " not found";
    return res;
  }
  AckResult res = result_for(item, index, *p);
  res.error = "unresolvable: transaction not in the ack window: transactionId " +
              res.transaction_id + " is not a message of partition " + p->name;
  return res;
}

AckResult Engine::result_for(AckItem& item, uint32_t index, const PartitionState& p) const {
  return result_for(item, index, p, *store_.queue(p.queue));
}

AckResult Engine::result_for(AckItem& item, uint32_t index, const PartitionState& p,
                             const QueueState& q) const {
  AckResult res;
  res.index = index;
  res.transaction_id = std::move(item.transaction_id);
  res.queue = q.name;
  res.partition = p.name;
  return res;
}

AckResult Engine::redelivered(AckItem& item, uint32_t index, Offset stop) {
  AckResult res = result_for(item, index, *store_.partition(item.partition_id));
  res.error = not_committed(stop);
  res.lease_released = true;
  return res;
}

AckResult Engine::ack_one(AckItem& item, uint32_t index, Offset o, int64_t now_us, AckTarget* t,
                          bool* changed) {
  const PartitionState* p = t->p;
  AckResult res = result_for(item, index, *p, *t->q);
  const CursorRow* found = t->row;
  const CursorRow empty_row;
  const CursorRow& row = found ? *found : empty_row;
  const MsgState* st = row.state_of(o);
  bool live = row.lease_live(now_us);
  bool lease_ok = !item.lease_id || (live && *item.lease_id == row.lease_id);
  if (is_done(st) || o < row.next) {
    if (settled_too_late(st, item.status)) {
      res.error = "already committed: the cursor moved past this message (offset " +
                  std::to_string(o.value) + ") before this ack";
      return res;
    }
    // Already applied: answered as the first time, from the state kept in the row.
    res.success = true;
    res.dlq = st && *st == MsgState::dlq;
    res.noop = o < row.next;
    res.lease_released = !live;
    return res;
  }
  bool same_status = st && ((*st == MsgState::failed && item.status == AckStatus::failed) ||
                            (*st == MsgState::retried && item.status == AckStatus::retry));
  bool handed_back = item.lease_id &&
                     (item.status == AckStatus::failed || item.status == AckStatus::retry) &&
                     std::find(row.handed_back.begin(), row.handed_back.end(),
                               std::make_pair(*item.lease_id, o)) != row.handed_back.end();
  if (handed_back || (same_status && !live && item.lease_id && *item.lease_id == row.lease_id)) {
    res.success = true;  // a repeated failed/retry ack: the batch was already handed back
    res.lease_released = true;
    return res;
  }
  bool in_batch = o >= row.batch_start && o < row.batch_end;
  if (item.lease_id && !config_.mutants.skip_lease_check && (!lease_ok || !in_batch)) {
    res.error = "Invalid or expired lease";
    return res;
  }
  if (!found) {
    auto mit = metas_.find(GroupKey{item.group, p->queue});
    if (mit == metas_.end()) {
      res.error = "consumer group " + item.group + " has no cursor on partition " + p->name;
      return res;
    }
  }
  if (!in_batch && row.settled.size() >= config_.pop_batch_max) {
    res.error = "too many acks ahead of the cursor without a lease";
    return res;
  }
  if (!t->changing) {
    t->changing = &ensure_row(item.group, *p);
    t->row = t->changing;
    mark_dirty(item.group, p->id);
  }
  CursorRow& r = *t->changing;
  *changed = true;
  // An unfenced ack (no leaseId) settles its message like any other, never skipping the ones
  // before it; outside the live batch it must not end another worker's lease.
  int64_t keep_expiry = r.lease_expires_us;
  SettleOutcome out = apply_status(r, o, item.status, t->q->options.retry_limit);
  if (live && !in_batch) {
    r.lease_expires_us = keep_expiry;
    out.released = false;
  }
  if (keep_expiry != 0 && r.lease_expires_us == 0)
    forget_lease(CursorKey{item.group, p->id}, r.lease_id, keep_expiry);
  finish(item.group, *p, r, o, item.error, out, &dlq_);
  res.dlq = out.dlq;
  res.lease_released = !live || out.released;
  res.success = true;
  r.last_consumed_us = now_us;
  return res;
}

SettleOutcome apply_status(CursorRow& row, Offset o, AckStatus status, int64_t retry_limit) {
  SettleOutcome out;
  out.retries = row.retry_count;
  auto settle = [&](MsgState s) {
    row.set_state(o, s);
    advance_cursor(row);
    if (row.next >= row.batch_end) {
      row.retry_count = 0;
      row.lease_expires_us = 0;
      out.released = true;
    }
  };
  auto hand_back = [&](MsgState s) {
    row.set_state(o, s);
    if (row.lease_expires_us != 0) {
      if (row.handed_back.size() >= CursorRow::kHandedBackMax)
        row.handed_back.erase(row.handed_back.begin(), row.handed_back.begin() + 1);
      row.handed_back.push_back({row.lease_id, o});
    }
    row.lease_expires_us = 0;
    out.released = true;
  };
  switch (status) {
    case AckStatus::completed:
      // An ack is an offset commit within its leased batch: what the batch holds below it and
      // no ack settled yet is completed with it. A batch handed back commits nothing for others.
      if (row.lease_expires_us != 0 && o >= row.batch_start && o < row.batch_end) {
        for (Offset x = row.next; x < o; x = x.next())
          if (!row.state_of(x)) row.set_state(x, MsgState::acked);
      }
      settle(MsgState::acked);
      break;
    case AckStatus::dlq:
      out.dlq = true;
      settle(MsgState::dlq);
      break;
    case AckStatus::failed:
      if (row.retry_count >= static_cast<uint32_t>(std::max<int64_t>(0, retry_limit))) {
        out.dlq = true;
        settle(MsgState::dlq);
      } else {
        ++row.retry_count;
        hand_back(MsgState::failed);
      }
      break;
    case AckStatus::retry:
      hand_back(MsgState::retried);
      break;
  }
  return out;
}

void Engine::finish(const std::string& group, const PartitionState& p, CursorRow& row, Offset o,
                    const std::string& error, const SettleOutcome& out,
                    std::vector<EffDlq>* dlq_sink) {
  if (out.dlq) {
    // retry_count is the budget spent on this message (it is reset once the batch is done).
    dlq_sink->push_back(
        EffDlq{p.queue, p.id, group, o, error.empty() ? "Retries exhausted" : error, out.retries});
    ++stats_.dlq_moves;
  }
  if (out.released && row.next < p.next_offset) make_ready(group, p);
}

// ---------------------------------------------------------------------------- transactions

CursorRow Engine::shadow_row(const std::string& group, const PartitionState& p,
                             const TxnConsumePlan& plan) const {
  CursorKey key{group, p.id};
  if (auto it = plan.rows.find(key); it != plan.rows.end()) return it->second;
  if (const CursorRow* row = rows_.find(group, p.id)) return *row;
  CursorRow row;
  GroupKey gk{group, p.queue};
  auto mit = metas_.find(gk);
  if (mit != metas_.end()) row.next = start_offset(mit->second, p);
  return row;
}

bool Engine::plan_txn_ack(const TxnAck& ack, uint32_t index,
                          const Result<std::optional<Offset>>& found,
                          const std::optional<LeaseId>& lease, int64_t now_us,
                          TxnConsumePlan* plan) {
  AckResult& res = plan->acks[index];
  res.index = index;
  res.transaction_id = ack.transaction_id;
  auto refuse = [&](const std::string& why) {
    plan->ok = false;
    plan->reason = "rejected_ack";
    plan->error = "QACK " + why + ": transactionId " + ack.transaction_id;
    return false;
  };
  const PartitionState* p = store_.partition(ack.partition_id);
  if (!p) return refuse("partition " + std::to_string(ack.partition_id.value) + " not found");
  if (!found.ok()) return refuse("cannot be resolved: " + found.error().message);
  std::optional<Offset> o = found.value();
  if (!o) return refuse("message not found");
  res.queue = store_.queue(p->queue)->name;
  res.partition = p->name;
  CursorRow row = shadow_row(ack.group, *p, *plan);
  const MsgState* st = row.state_of(*o);
  if (*o < row.next || (st && (*st == MsgState::acked || *st == MsgState::dlq))) {
    if (lease || ack.status != AckStatus::completed) return refuse("message already acked");
    res.success = true;  // a lease-less repeat of a completed ack: nothing to do
    res.noop = true;
    res.lease_released = !row.lease_live(now_us);
    return true;
  }
  bool live = row.lease_live(now_us);
  bool in_batch = *o >= row.batch_start && *o < row.batch_end;
  if (lease && (!live || *lease != row.lease_id || !in_batch))
    return refuse("lease expired or held by another worker");
  res.success = true;
  CursorKey key{ack.group, p->id};
  int64_t keep_expiry = row.lease_expires_us;
  SettleOutcome out =
      apply_status(row, *o, ack.status, store_.queue(p->queue)->options.retry_limit);
  if (live && !in_batch) {  // unfenced, outside the live batch: that lease stays
    row.lease_expires_us = keep_expiry;
    out.released = false;
  }
  if (out.dlq)
    plan->dlq.push_back(EffDlq{p->queue, p->id, ack.group, *o,
                               ack.error.empty() ? "Retries exhausted" : ack.error, out.retries});
  res.dlq = out.dlq;
  res.lease_released = !live || out.released;
  plan->outcomes.emplace_back(key, out);
  row.last_consumed_us = now_us;
  plan->rows[key] = std::move(row);
  if (!metas_.contains(GroupKey{ack.group, p->queue}))
    plan->metas[GroupKey{ack.group, p->queue}] = GroupMeta{};
  return true;
}

bool Engine::plan_position(const PositionOp& pos, TxnConsumePlan* plan) {
  const PartitionState* p = store_.partition(pos.queue, pos.partition);
  if (!p) {
    plan->ok = false;
    plan->reason = "queue_not_found";
    plan->error = "QPOS no partition " + pos.partition + " in queue " + pos.queue;
    return false;
  }
  CursorKey key{pos.group, p->id};
  CursorRow row = shadow_row(pos.group, *p, *plan);
  row.next = pos.offset ? std::min(pos.offset->next(), p->next_offset) : Offset(0);
  row.lease_expires_us = 0;
  row.settled.clear();
  row.retry_count = 0;
  plan->rows[key] = std::move(row);
  if (!metas_.contains(GroupKey{pos.group, p->queue}))
    plan->metas[GroupKey{pos.group, p->queue}] = GroupMeta{};
  plan->outcomes.emplace_back(key, SettleOutcome{true, false, 0});
  return true;
}

// A transaction's acks follow the rules of one ack call: partition by partition in offset
// order, a failed or retry ack stopping every later ack of its partition.
TxnConsumePlan Engine::plan_txn(const TxnCmd& cmd, int64_t now_us) {
  TxnConsumePlan plan;
  // An ack without its own leaseId takes the single lease the call names, if there is one.
  std::set<LeaseId> named(cmd.required_leases.begin(), cmd.required_leases.end());
  std::vector<const TxnAck*> acks;
  for (const auto& op : cmd.operations) {
    if (!op.is_ack) continue;
    acks.push_back(&op.ack);
    if (op.ack.lease_id) named.insert(*op.ack.lease_id);
  }
  std::optional<LeaseId> single;
  if (named.size() == 1) single = *named.begin();
  plan.acks.resize(acks.size());
  std::vector<AckStep> steps;
  std::vector<Result<std::optional<Offset>>> found;
  GroupNumbers groups;
  for (uint32_t i = 0; i < acks.size(); ++i) {
    const PartitionState* p = store_.partition(acks[i]->partition_id);
    found.push_back(p ? resolve_ack(acks[i]->group, *p, acks[i]->txn_hash)
                      : Result<std::optional<Offset>>(std::optional<Offset>()));
    std::optional<Offset> o;
    if (found.back().ok()) o = found.back().value();  // else unresolved: plan_txn_ack says why
    // An unresolved ack sorts first and refuses the whole call.
    steps.push_back(AckStep{groups.of(acks[i]->group), p ? p->id : PartitionId{},
                            o.value_or(Offset(0)), o ? signal_rank(acks[i]->status) : -1, i});
  }
  order_steps(&steps);
  std::stable_partition(steps.begin(), steps.end(), [](const AckStep& s) { return s.rank < 0; });
  const AckStep* stopped = nullptr;
  for (const AckStep& step : steps) {
    const TxnAck& ack = *acks[step.index];
    if (stopped && same_partition(*stopped, step)) {
      AckResult& res = plan.acks[step.index];
      res.index = step.index;
      res.transaction_id = ack.transaction_id;
      res.error = not_committed(stopped->offset);
      res.lease_released = true;
      continue;
    }
    if (!plan_txn_ack(ack, step.index, found[step.index], ack.lease_id ? ack.lease_id : single,
                      now_us, &plan))
      return plan;
    const AckResult& res = plan.acks[step.index];
    if (is_signal(ack.status) && !res.dlq && !res.noop) stopped = &step;
  }
  for (const auto& pos : cmd.positions)
    if (!plan_position(pos, &plan)) return plan;
  return plan;
}

std::vector<Effect> Engine::commit_txn(TxnConsumePlan&& plan) {
  std::vector<Effect> out;
  for (auto& [key, meta] : plan.metas) {
    metas_[key] = meta;
    groups_of_queue_[key.queue].insert(key.group);
    dirty_metas_.erase(key);
    out.push_back(EffGroupMeta{key.group, key.queue, meta});
  }
  for (auto& [key, row] : plan.rows) {
    const CursorRow* was = rows_.find(key.group, key.pid);
    if (was && was->lease_expires_us != 0 &&
        (row.lease_id != was->lease_id || row.lease_expires_us != was->lease_expires_us))
      forget_lease(key, was->lease_id, was->lease_expires_us);
    rows_.put(key.group, key.pid, row);
    dirty_rows_.erase(key);  // the transaction's entry carries the row
    out.push_back(EffCursor{key.group, key.pid, row});
  }
  for (auto& d : plan.dlq) {
    ++stats_.dlq_moves;
    out.push_back(std::move(d));
  }
  for (const auto& [key, o] : plan.outcomes) {
    const PartitionState* p = store_.partition(key.pid);
    const CursorRow& row = rows_.at(key.group, key.pid);
    if (o.released && row.next < p->next_offset) make_ready(key.group, *p);
  }
  return out;
}

}  // namespace queen
