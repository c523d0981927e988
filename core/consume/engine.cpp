#include "core/consume/engine.h"

#include <algorithm>
#include <climits>

#include "core/qlog/log.h"

namespace queen {
namespace {

constexpr const char* kQueueMode = "__QUEUE_MODE__";
constexpr int64_t kUsPerS = 1'000'000;

bool is_done(const MsgState* s) { return s && (*s == MsgState::acked || *s == MsgState::dlq); }

}  // namespace

void Engine::load() {
  rows_ = store_.cursors();
  metas_ = store_.groups();
  for (const auto& [key, row] : rows_) {
    if (row.lease_expires_us != 0) expiries_.insert({row.lease_expires_us, key});
    if (const PartitionState* p = store_.partition(key.pid))
      groups_of_queue_[p->queue].insert(key.group);
  }
  for (const auto& [key, meta] : metas_) groups_of_queue_[key.queue].insert(key.group);
}

// ---------------------------------------------------------------------------- pop

const GroupMeta& Engine::ensure_group(const std::string& group, const QueueState& q,
                                      const PopCmd& cmd, int64_t now_us) {
  GroupKey key{group, q.id};
  auto it = metas_.find(key);
  if (it != metas_.end()) return it->second;
  GroupMeta meta;
  if (group != kQueueMode) {
    meta.mode = cmd.subscription_mode;
    meta.from_us = cmd.subscription_mode == SubscriptionMode::from_time ? cmd.subscription_from_us
                   : cmd.subscription_mode == SubscriptionMode::new_only ? now_us
                                                                         : 0;
  }
  groups_of_queue_[q.id].insert(group);
  dirty_metas_.insert(key);
  return metas_.emplace(key, meta).first->second;
}

Offset Engine::start_offset(const GroupMeta& meta, const PartitionState& p) const {
  if (meta.mode == SubscriptionMode::all) return Offset(0);
  return p.first_at_or_after(meta.from_us);
}

CursorRow& Engine::ensure_row(const std::string& group, const PartitionState& p) {
  CursorKey key{group, p.id};
  auto it = rows_.find(key);
  if (it != rows_.end()) return it->second;
  auto mit = metas_.find(GroupKey{group, p.queue});
  QUEEN_ASSERT(mit != metas_.end(), "a row is made only after its group's subscription");
  CursorRow row;
  row.next = start_offset(mit->second, p);
  mark_dirty(group, p.id);
  return rows_.emplace(key, row).first->second;
}

Engine::ReadySet& Engine::ready_set(const std::string& group, const QueueState& q) {
  ReadySet& rs = ready_[GroupKey{group, q.id}];
  if (rs.initialized) return rs;
  rs.initialized = true;
  const GroupMeta& meta = metas_.at(GroupKey{group, q.id});
  for (const auto& [name, pid] : q.partitions) {
    const PartitionState* p = store_.partition(pid);
    auto rit = rows_.find(CursorKey{group, pid});
    Offset next = rit != rows_.end() ? rit->second.next : start_offset(meta, *p);
    if (next < p->next_offset && !rs.seq_of.contains(pid)) {
      rs.seq_of[pid] = ++ready_seq_;
      rs.order.insert({ready_seq_, pid});
    }
  }
  return rs;
}

void Engine::make_ready(const std::string& group, const PartitionState& p) {
  woken_.insert(p.queue);
  auto it = ready_.find(GroupKey{group, p.queue});
  if (it == ready_.end() || !it->second.initialized) return;
  ReadySet& rs = it->second;
  if (rs.seq_of.contains(p.id)) return;
  rs.seq_of[p.id] = ++ready_seq_;
  rs.order.insert({ready_seq_, p.id});
}

Engine::PopResult Engine::pop(const PopCmd& cmd, int64_t now_us) {
  PopResult res;
  res.reply.queue = cmd.queue;
  res.reply.group = cmd.group;
  const QueueState* q = store_.queue(cmd.queue);
  if (!q) {
    res.reply.empty_reason = "queue_not_found";
    return res;
  }
  ensure_group(cmd.group, *q, cmd, now_us);
  if (cmd.partition) {
    auto pit = q->partitions.find(*cmd.partition);
    if (pit == q->partitions.end()) {
      res.reply.empty_reason = "partition_not_found";
      return res;
    }
    const PartitionState& p = *store_.partition(pit->second);
    CursorRow& row = ensure_row(cmd.group, p);
    if (row.lease_live(now_us)) {
      res.reply.empty_reason = "lease_held";
      return res;
    }
    if (row.next >= p.next_offset) return res;
    return claim(cmd.group, p, cmd, now_us);
  }
  ReadySet& rs = ready_set(cmd.group, *q);
  while (!rs.order.empty()) {
    auto [seq, pid] = *rs.order.begin();
    rs.order.erase(rs.order.begin());
    rs.seq_of.erase(pid);
    const PartitionState& p = *store_.partition(pid);
    CursorRow& row = ensure_row(cmd.group, p);
    if (row.lease_live(now_us) || row.next >= p.next_offset) continue;  // re-added on release
    return claim(cmd.group, p, cmd, now_us);
  }
  res.reply.empty_reason = "no_available_partition";
  return res;
}

Engine::PopResult Engine::claim(const std::string& group, const PartitionState& p,
                                const PopCmd& cmd, int64_t now_us) {
  PopResult res;
  res.reply.queue = cmd.queue;
  res.reply.group = group;
  CursorRow& row = rows_.at(CursorKey{group, p.id});
  uint32_t budget = std::clamp<uint32_t>(cmd.batch, 1, config_.pop_batch_max);
  std::vector<Offset> offsets;
  for (Offset o = row.next; o < p.next_offset && offsets.size() < budget; o = o.next())
    if (!is_done(row.state_of(o))) offsets.push_back(o);
  QUEEN_ASSERT(!offsets.empty(), "a claim needs a deliverable offset");
  std::string error;
  if (!read_messages(p, offsets, &res.reply.messages, &error)) {
    res.outcome = PopOutcome::error;
    res.error = ErrorReply{500, "internal", "reading partition " + p.name + ": " + error, 0};
    res.reply.messages.clear();
    return res;
  }
  for (Offset o : offsets)
    if (o < row.batch_end) ++stats_.redeliveries;
  // Keep only what a later batch must skip: settled offsets at or after the cursor.
  std::erase_if(row.settled, [&](const auto& s) {
    return s.first < row.next || (s.second != MsgState::acked && s.second != MsgState::dlq);
  });
  const QueueState* q = store_.queue(p.queue);
  int64_t lease_s = cmd.lease_time_s.value_or(q->options.lease_time_s);
  if (lease_s <= 0) lease_s = kPushCreatedLeaseTimeS;
  row.batch_start = offsets.front();
  row.batch_end = offsets.back().next();
  if (cmd.auto_ack) {
    row.lease_id = LeaseId{};
    row.lease_expires_us = 0;
    for (Offset o : offsets) row.set_state(o, MsgState::acked);
    while (is_done(row.state_of(row.next))) row.next = row.next.next();
    row.consumed_total += offsets.size();
    row.last_consumed_us = now_us;
    if (row.next < p.next_offset) make_ready(group, p);
  } else {
    row.lease_id = make_uuid_v7(now_us / 1000, env_.random_u64(), env_.random_u64());
    row.lease_expires_us = now_us + lease_s * kUsPerS;
    expiries_.insert({row.lease_expires_us, CursorKey{group, p.id}});
  }
  mark_dirty(group, p.id);
  for (auto& m : res.reply.messages) {
    m.delivery_attempt = row.retry_count + 1;
    m.lease_id = row.lease_id;
  }
  res.reply.lease_id = row.lease_id;
  res.reply.partitions_claimed = 1;
  res.outcome = PopOutcome::delivered;
  return res;
}

bool Engine::read_messages(const PartitionState& p, const std::vector<Offset>& offsets,
                           std::vector<PopMessage>* out, std::string* error) {
  const QueueState* q = store_.queue(p.queue);
  const AppendRow* cached_row = nullptr;
  EffAppend cached;
  for (Offset o : offsets) {
    const AppendRow* row = p.row_of(o);
    if (!row) {
      *error = "no append row for offset " + std::to_string(o.value);
      return false;
    }
    if (row != cached_row) {
      auto a = read_append(env_, *row, p.id);
      if (!a.ok()) {
        *error = a.error().message;
        return false;
      }
      cached = std::move(a.value());
      cached_row = row;
    }
    const MessageFrame& f = cached.frames[o.value - row->base.value];
    PopMessage m;
    m.queue = q->name;
    m.partition = p.name;
    m.partition_id = p.id;
    m.offset = o;
    m.transaction_id = f.transaction_id;
    m.message_id = f.message_id;
    m.trace_id = f.trace_id;
    m.created_us = row->created_us;
    m.payload = f.payload;
    out->push_back(std::move(m));
  }
  return true;
}

void Engine::hand_back(const PopReply& reply) {
  if (reply.lease_id.is_nil() || reply.messages.empty()) return;
  const PopMessage& m = reply.messages.front();
  auto it = rows_.find(CursorKey{reply.group, m.partition_id});
  if (it == rows_.end() || it->second.lease_id != reply.lease_id) return;
  it->second.lease_expires_us = 0;
  mark_dirty(reply.group, m.partition_id);
  const PartitionState& p = *store_.partition(m.partition_id);
  if (it->second.next < p.next_offset) make_ready(reply.group, p);
}

// ---------------------------------------------------------------------------- ack

AckReply Engine::ack(const AckCmd& cmd, int64_t now_us, bool* changed) {
  AckReply reply;
  reply.results.resize(cmd.items.size());
  // Settle completions first, so a failed ack in the same call hands back only what is
  // still unsettled and never lets a later completion skip past it.
  for (int pass = 0; pass < 2; ++pass) {
    for (uint32_t i = 0; i < cmd.items.size(); ++i) {
      bool hands_back = cmd.items[i].status == AckStatus::failed ||
                        cmd.items[i].status == AckStatus::retry;
      if (hands_back != (pass == 1)) continue;
      reply.results[i] = ack_one(cmd.items[i], i, now_us, changed);
    }
  }
  return reply;
}

AckResult Engine::ack_one(const AckItem& item, uint32_t index, int64_t now_us, bool* changed) {
  AckResult res;
  res.index = index;
  res.transaction_id = item.transaction_id;
  const PartitionState* p = store_.partition(item.partition_id);
  if (!p) {
    res.error = "partition " + std::to_string(item.partition_id.value) + " not found";
    return res;
  }
  res.queue = store_.queue(p->queue)->name;
  res.partition = p->name;
  auto rit = rows_.find(CursorKey{item.group, p->id});
  CursorRow empty_row;
  CursorRow& row = rit != rows_.end() ? rit->second : empty_row;
  std::optional<Offset> found;
  if (row.batch_start < row.batch_end)
    found = p->find_hash(item.txn_hash, row.batch_start, row.batch_end);
  if (!found) found = p->find_hash(item.txn_hash, Offset(0), p->next_offset);
  if (!found) {
    res.error = "message not found: transactionId " + item.transaction_id;
    return res;
  }
  Offset o = *found;
  const MsgState* st = row.state_of(o);
  bool live = row.lease_live(now_us);
  bool lease_ok = !item.lease_id || (live && *item.lease_id == row.lease_id);
  if (is_done(st) || o < row.next) {
    // Already applied: answered as the first time, from the state kept in the row.
    res.success = true;
    res.dlq = st && *st == MsgState::dlq;
    res.noop = !st;
    res.lease_released = !live;
    return res;
  }
  if (st && !live && item.lease_id && *item.lease_id == row.lease_id) {
    res.success = true;  // a repeated failed/retry ack: the batch was already handed back
    res.lease_released = true;
    return res;
  }
  bool in_batch = o >= row.batch_start && o < row.batch_end;
  if (item.lease_id && !config_.mutants.skip_lease_check && (!lease_ok || !in_batch)) {
    res.error = "Invalid or expired lease";
    return res;
  }
  if (rit == rows_.end()) {
    auto mit = metas_.find(GroupKey{item.group, p->queue});
    if (mit == metas_.end()) {
      res.error = "consumer group " + item.group + " has no cursor on partition " + p->name;
      return res;
    }
  }
  CursorRow& r = ensure_row(item.group, *p);
  *changed = true;
  mark_dirty(item.group, p->id);
  if (!live || !in_batch) {
    // No live lease to settle within: an unfenced ack moves the cursor past the message.
    r.next = std::max(r.next, o.next());
    r.consumed_total += 1;
    r.last_consumed_us = now_us;
    res.success = true;
    res.lease_released = !live;
    return res;
  }
  const QueueState* q = store_.queue(p->queue);
  SettleOutcome out = apply_status(r, o, item.status, q->options.retry_limit);
  finish(item.group, *p, r, o, item.error, out, &dlq_);
  res.dlq = out.dlq;
  res.lease_released = out.released;
  res.success = true;
  r.last_consumed_us = now_us;
  return res;
}

SettleOutcome apply_status(CursorRow& row, Offset o, AckStatus status, int64_t retry_limit) {
  SettleOutcome out;
  out.retries = row.retry_count;
  auto settle = [&](MsgState s) {
    row.set_state(o, s);
    while (is_done(row.state_of(row.next))) {
      row.next = row.next.next();
      ++row.consumed_total;
    }
    if (row.next >= row.batch_end) {
      row.retry_count = 0;
      row.lease_expires_us = 0;
      out.released = true;
    }
  };
  auto hand_back = [&](MsgState s) {
    row.set_state(o, s);
    row.lease_expires_us = 0;
    out.released = true;
  };
  switch (status) {
    case AckStatus::completed:
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
    dlq_sink->push_back(EffDlq{p.queue, p.id, group, o,
                               error.empty() ? "Retries exhausted" : error, out.retries});
    ++stats_.dlq_moves;
  }
  if (out.released && row.next < p.next_offset) make_ready(group, p);
}

// ---------------------------------------------------------------------------- transactions

CursorRow Engine::shadow_row(const std::string& group, const PartitionState& p,
                             const TxnConsumePlan& plan) const {
  CursorKey key{group, p.id};
  if (auto it = plan.rows.find(key); it != plan.rows.end()) return it->second;
  if (auto it = rows_.find(key); it != rows_.end()) return it->second;
  CursorRow row;
  GroupKey gk{group, p.queue};
  auto mit = metas_.find(gk);
  if (mit != metas_.end()) row.next = start_offset(mit->second, p);
  return row;
}

bool Engine::plan_txn_ack(const TxnAck& ack, const std::optional<LeaseId>& lease, int64_t now_us,
                          TxnConsumePlan* plan) {
  AckResult res;
  res.index = static_cast<uint32_t>(plan->acks.size());
  res.transaction_id = ack.transaction_id;
  auto refuse = [&](const std::string& why) {
    plan->ok = false;
    plan->reason = "rejected_ack";
    plan->error = "QACK " + why + ": transactionId " + ack.transaction_id;
    return false;
  };
  const PartitionState* p = store_.partition(ack.partition_id);
  if (!p) return refuse("partition " + std::to_string(ack.partition_id.value) + " not found");
  std::optional<Offset> o = p->find_hash(ack.txn_hash, Offset(0), p->next_offset);
  if (!o) return refuse("message not found");
  CursorRow row = shadow_row(ack.group, *p, *plan);
  const MsgState* st = row.state_of(*o);
  if (*o < row.next || (st && (*st == MsgState::acked || *st == MsgState::dlq)))
    return refuse("message already acked");
  bool live = row.lease_live(now_us);
  bool in_batch = *o >= row.batch_start && *o < row.batch_end;
  if (lease && (!live || *lease != row.lease_id || !in_batch))
    return refuse("lease expired or held by another worker");
  res.queue = store_.queue(p->queue)->name;
  res.partition = p->name;
  res.success = true;
  CursorKey key{ack.group, p->id};
  if (!live || !in_batch) {
    row.next = std::max(row.next, o->next());  // unfenced: the cursor moves past it
    ++row.consumed_total;
  } else {
    SettleOutcome out = apply_status(row, *o, ack.status,
                                     store_.queue(p->queue)->options.retry_limit);
    if (out.dlq)
      plan->dlq.push_back(EffDlq{p->queue, p->id, ack.group, *o,
                                 ack.error.empty() ? "Retries exhausted" : ack.error,
                                 out.retries});
    res.dlq = out.dlq;
    res.lease_released = out.released;
    plan->outcomes.emplace_back(key, out);
  }
  row.last_consumed_us = now_us;
  plan->rows[key] = std::move(row);
  if (!metas_.contains(GroupKey{ack.group, p->queue}))
    plan->metas[GroupKey{ack.group, p->queue}] = GroupMeta{};
  plan->acks.push_back(std::move(res));
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

TxnConsumePlan Engine::plan_txn(const TxnCmd& cmd, int64_t now_us) {
  TxnConsumePlan plan;
  // An ack without its own leaseId takes the single lease the call names, if there is one.
  std::set<LeaseId> named(cmd.required_leases.begin(), cmd.required_leases.end());
  for (const auto& op : cmd.operations)
    if (op.is_ack && op.ack.lease_id) named.insert(*op.ack.lease_id);
  std::optional<LeaseId> single;
  if (named.size() == 1) single = *named.begin();
  for (const auto& op : cmd.operations) {
    if (!op.is_ack) continue;
    if (!plan_txn_ack(op.ack, op.ack.lease_id ? op.ack.lease_id : single, now_us, &plan))
      return plan;
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
    rows_[key] = row;
    dirty_rows_.erase(key);  // the transaction's entry carries the row
    out.push_back(EffCursor{key.group, key.pid, row});
  }
  for (auto& d : plan.dlq) {
    ++stats_.dlq_moves;
    out.push_back(std::move(d));
  }
  for (const auto& [key, o] : plan.outcomes) {
    const PartitionState* p = store_.partition(key.pid);
    const CursorRow& row = rows_.at(key);
    if (o.released && row.next < p->next_offset) make_ready(key.group, *p);
  }
  return out;
}

// ---------------------------------------------------------------------------- checkpoints

std::vector<Effect> Engine::take_checkpoint() {
  std::vector<Effect> out;
  for (const auto& key : dirty_metas_) out.push_back(EffGroupMeta{key.group, key.queue,
                                                                  metas_.at(key)});
  for (const auto& key : dirty_rows_) out.push_back(EffCursor{key.group, key.pid, rows_.at(key)});
  for (auto& d : dlq_) out.push_back(std::move(d));
  dirty_metas_.clear();
  dirty_rows_.clear();
  dlq_.clear();
  return out;
}

void Engine::on_applied(const Entry& entry) {
  for (const auto& eff : entry.effects) {
    auto* a = std::get_if<EffAppend>(&eff);
    if (!a) continue;
    woken_.insert(a->queue);
    auto git = groups_of_queue_.find(a->queue);
    if (git == groups_of_queue_.end()) continue;
    const PartitionState* p = store_.partition(a->pid);
    for (const auto& group : git->second) make_ready(group, *p);
  }
}

void Engine::expire(int64_t now_us) {
  while (!expiries_.empty() && expiries_.begin()->first <= now_us) {
    auto [at, key] = *expiries_.begin();
    expiries_.erase(expiries_.begin());
    auto it = rows_.find(key);
    if (it == rows_.end() || it->second.lease_expires_us != at) continue;
    ++stats_.lease_expiries;
    const PartitionState* p = store_.partition(key.pid);
    // Expiry is a function of time: the row needs no new checkpoint for it.
    it->second.lease_expires_us = 0;
    if (it->second.next < p->next_offset) make_ready(key.group, *p);
  }
}

int64_t Engine::next_expiry_us() const {
  return expiries_.empty() ? INT64_MAX : expiries_.begin()->first;
}

std::vector<QueueId> Engine::take_woken() {
  std::vector<QueueId> out(woken_.begin(), woken_.end());
  woken_.clear();
  return out;
}

}  // namespace queen
