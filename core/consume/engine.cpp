#include "core/consume/engine.h"

#include <algorithm>
#include <climits>

#include "core/kv/maintenance.h"
#include "core/qlog/log.h"
#include "core/seal/seal.h"

namespace queen {
namespace {

constexpr const char* kQueueMode = "__QUEUE_MODE__";
constexpr int64_t kUsPerS = 1'000'000;

bool is_done(const MsgState* s) {
  return s && (*s == MsgState::acked || *s == MsgState::dlq);
}

// Moves the cursor over the settled prefix: it never stops before an offset already done.
void advance_cursor(CursorRow& row) {
  bool moved = false;
  while (is_done(row.state_of(row.next))) {
    row.next = row.next.next();
    ++row.consumed_total;
    moved = true;
  }
  if (moved) row.handed_back.clear();
}

}  // namespace

void Engine::reset() {
  rows_.clear();
  metas_.clear();
  ready_.clear();
  groups_of_queue_.clear();
  expiries_.clear();
  deferred_.clear();
  leases_.clear();
  dirty_rows_.clear();
  dirty_metas_.clear();
  deleted_rows_.clear();
  deleted_metas_.clear();
  dlq_.clear();
  woken_.clear();
}

void Engine::load(int64_t foreign_lease_grace_us) {
  rows_ = store_.cursors();
  metas_ = store_.groups();
  for (auto& [key, row] : rows_) {
    if (row.lease_expires_us != 0) row.lease_expires_us += foreign_lease_grace_us;
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
    meta.from_us = cmd.subscription_mode == SubscriptionMode::from_time  ? cmd.subscription_from_us
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
  row.next = std::max(start_offset(mit->second, p), p.log_start);
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

int64_t Engine::visible_at_us(const PartitionState& p, Offset next) const {
  const QueueOptions& o = store_.queue(p.queue)->options;
  int64_t at = 0;
  if (o.delayed_processing_s > 0) {
    if (const AppendRow* r = p.row_of(next)) at = r->created_us + o.delayed_processing_s * kUsPerS;
  }
  if (o.window_buffer_s > 0 && !p.rows.empty())
    at = std::max(at, p.rows.back().created_us + o.window_buffer_s * kUsPerS);
  return at;
}

Engine::PopResult Engine::pop(const PopCmd& cmd, int64_t now_us) {
  Maintenance m = maintenance_of(store_);
  if (m.pop) {  // pop maintenance: every pop is empty, at once
    PopResult paused;
    paused.reply.queue = cmd.queue;
    paused.reply.group = cmd.group;
    paused.reply.empty_reason = "paused";
    return paused;
  }
  hidden_from_us_ = m.push ? m.push_since_us : INT64_MAX;
  if (!cmd.queue.empty()) return pop_queue(cmd, now_us);
  // Discovery: the first queue of the namespace (and task) with something to deliver.
  PopResult res;
  res.reply.group = cmd.group;
  res.reply.empty_reason = "no_available_partition";
  for (const auto& [id, q] : store_.queues()) {
    if (q.options.ns != cmd.ns || (!cmd.task.empty() && q.options.task != cmd.task)) continue;
    PopCmd sub = cmd;
    sub.queue = q.name;
    PopResult r = pop_queue(sub, now_us);
    if (r.outcome != PopOutcome::empty) return r;
  }
  return res;
}

Engine::PopResult Engine::pop_queue(const PopCmd& cmd, int64_t now_us) {
  PopResult res;
  res.reply.queue = cmd.queue;
  res.reply.group = cmd.group;
  const QueueState* q = store_.queue(cmd.queue);
  if (!q) {
    res.reply.empty_reason = "queue_not_found";
    return res;
  }
  ensure_group(cmd.group, *q, cmd, now_us);
  uint32_t budget = std::clamp<uint32_t>(cmd.batch, 1, config_.pop_batch_max);
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
    } else if (row.next < p.next_offset && defer_until_visible(cmd.group, p, row, now_us)) {
      res.reply.empty_reason = "window_buffer_active";
    } else if (row.next < p.next_offset) {
      claim(cmd.group, p, cmd, now_us, &budget, &res);
    }
    return res;
  }
  uint32_t claims_max = std::clamp<uint32_t>(cmd.partitions, 1, kPopPartitionsMax);
  ReadySet& rs = ready_set(cmd.group, *q);
  while (!rs.order.empty() && budget > 0 && res.reply.partitions_claimed < claims_max &&
         res.outcome != PopOutcome::error) {
    auto [seq, pid] = *rs.order.begin();
    rs.order.erase(rs.order.begin());
    rs.seq_of.erase(pid);
    const PartitionState& p = *store_.partition(pid);
    CursorRow& row = ensure_row(cmd.group, p);
    if (row.lease_live(now_us) || row.next >= p.next_offset) continue;  // re-added on release
    if (defer_until_visible(cmd.group, p, row, now_us)) continue;
    claim(cmd.group, p, cmd, now_us, &budget, &res);
  }
  if (res.reply.messages.empty() && res.outcome != PopOutcome::error)
    res.reply.empty_reason = "no_available_partition";
  return res;
}

bool Engine::defer_until_visible(const std::string& group, const PartitionState& p,
                                 const CursorRow& row, int64_t now_us) {
  int64_t at = visible_at_us(p, row.next);
  if (at <= now_us) return false;
  deferred_.insert({at, CursorKey{group, p.id}});
  return true;
}

void Engine::claim(const std::string& group, const PartitionState& p, const PopCmd& cmd,
                   int64_t now_us, uint32_t* budget, PopResult* res) {
  CursorRow& row = rows_.at(CursorKey{group, p.id});
  const QueueOptions& qo = store_.queue(p.queue)->options;
  advance_cursor(row);
  if (row.next < p.log_start) {  // retention took what the group had not consumed
    row.next = p.log_start;
    std::erase_if(row.settled, [&](const auto& st) { return st.first < row.next; });
    mark_dirty(group, p.id);
  }
  if (cmd.conflation) {
    // Only the newest pending message is delivered; the ones before it count as consumed.
    Offset last(p.next_offset.value - 1);
    while (row.next < last) {
      if (!is_done(row.state_of(row.next))) ++row.consumed_total;
      row.next = row.next.next();
    }
    advance_cursor(row);
  }
  std::vector<Offset> offsets;
  bool skipped_deleted = false;
  for (Offset o = row.next; o < p.next_offset && offsets.size() < *budget; o = o.next()) {
    if (qo.delayed_processing_s > 0 && visible_at_us(p, o) > now_us) break;
    if (hidden_from_us_ != INT64_MAX) {  // push maintenance: what came since waits
      const AppendRow* r = p.row_of(o);
      if (r && r->created_us >= hidden_from_us_) break;
    }
    if (is_done(row.state_of(o))) continue;
    if (p.is_deleted(o)) {
      row.set_state(o, MsgState::acked);  // never delivered again; the cursor passes it
      skipped_deleted = true;
      continue;
    }
    offsets.push_back(o);
  }
  if (skipped_deleted) {
    advance_cursor(row);
    mark_dirty(group, p.id);
  }
  if (offsets.empty()) return;
  size_t first_msg = res->reply.messages.size();
  std::string error;
  if (!read_messages(p, offsets, &res->reply.messages, &error)) {
    res->outcome = PopOutcome::error;
    res->error = ErrorReply{500, "internal", "reading partition " + p.name + ": " + error, 0};
    res->reply.messages.clear();
    return;
  }
  bool again = offsets.front() < row.batch_end;  // a lease expired or a batch came back
  for (Offset o : offsets)
    if (o < row.batch_end) ++stats_.redeliveries;
  row.delivery_attempt = again ? row.delivery_attempt + 1 : 1;
  // Keep only what a later batch must skip: settled offsets at or after the cursor.
  std::erase_if(row.settled, [&](const auto& st) {
    return st.first < row.next || (st.second != MsgState::acked && st.second != MsgState::dlq);
  });
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
    if (res->reply.lease_id.is_nil())
      res->reply.lease_id = make_uuid_v7(now_us / 1000, env_.random_u64(), env_.random_u64());
    int64_t lease_s = cmd.lease_time_s.value_or(qo.lease_time_s);
    if (lease_s <= 0) lease_s = kPushCreatedLeaseTimeS;
    row.lease_id = res->reply.lease_id;
    row.lease_expires_us = now_us + lease_s * kUsPerS;
    expiries_.insert({row.lease_expires_us, CursorKey{group, p.id}});
    leases_[row.lease_id].push_back(CursorKey{group, p.id});
  }
  mark_dirty(group, p.id);
  for (size_t i = first_msg; i < res->reply.messages.size(); ++i) {
    res->reply.messages[i].delivery_attempt = row.delivery_attempt;
    res->reply.messages[i].lease_id = row.lease_id;
  }
  *budget -= static_cast<uint32_t>(offsets.size());
  ++res->reply.partitions_claimed;
  res->outcome = PopOutcome::delivered;
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
    // Each offset is read once: its frame's strings move into the message.
    MessageFrame& f = cached.frames[o.value - row->base.value];
    PopMessage m;
    m.queue = q->name;
    m.partition = p.name;
    m.partition_id = p.id;
    m.offset = o;
    m.transaction_id = std::move(f.transaction_id);
    m.message_id = f.message_id;
    m.trace_id = std::move(f.trace_id);
    m.created_us = row->created_us;
    m.payload = readable_payload(env_, std::move(f.payload));
    m.producer_sub = std::move(f.producer_sub);
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
  if (it->second.delivery_attempt > 0) --it->second.delivery_attempt;  // nobody received it
  mark_dirty(reply.group, m.partition_id);
  const PartitionState& p = *store_.partition(m.partition_id);
  if (it->second.next < p.next_offset) make_ready(reply.group, p);
}

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

// One resolved ack of a call, in the order the call applies it.
struct AckStep {
  const std::string* group;
  PartitionId pid;
  Offset offset;
  int rank;
  uint32_t index;
  auto key() const { return std::tie(*group, pid, offset, rank, index); }
};

// Sorts a call's resolved acks partition by partition, each by offset, so that a failed or
// retry ack can stop every later ack of its partition in the call.
void order_steps(std::vector<AckStep>* steps) {
  std::sort(steps->begin(), steps->end(),
            [](const AckStep& a, const AckStep& b) { return a.key() < b.key(); });
}

bool same_partition(const AckStep& a, const AckStep& b) {
  return a.pid == b.pid && *a.group == *b.group;
}

// Whether an ack names a message the group has settled for good (below its cursor, acked or
// in the DLQ): a completed ack is then a harmless repeat, any other status comes too late,
// except a repeat of the DLQ move itself.
bool settled_too_late(const MsgState* st, AckStatus status) {
  if (status == AckStatus::completed) return false;
  return !(st && *st == MsgState::dlq && status != AckStatus::retry);
}

}  // namespace

std::optional<Offset> Engine::resolve_ack(const std::string& group, const PartitionState& p,
                                          const Hash128& txn_hash) const {
  std::optional<Offset> found;
  auto rit = rows_.find(CursorKey{group, p.id});
  if (rit != rows_.end() && rit->second.batch_start < rit->second.batch_end)
    found = p.find_hash(txn_hash, rit->second.batch_start, rit->second.batch_end);
  if (!found) found = p.find_hash(txn_hash, Offset(0), p.next_offset);
  return found;
}

// Each partition's acks apply in offset order. A failed or retry ack that hands its batch
// back stops the partition there: no later ack of the call moves past it, and the messages
// after it come back with it (a completed ack among them is answered as redelivered).
AckReply Engine::ack(AckCmd cmd, int64_t now_us, bool* changed) {
  AckReply reply;
  reply.results.resize(cmd.items.size());
  std::vector<AckStep> steps;
  steps.reserve(cmd.items.size());
  for (uint32_t i = 0; i < cmd.items.size(); ++i) {
    AckItem& item = cmd.items[i];
    const PartitionState* p = store_.partition(item.partition_id);
    std::optional<Offset> o = p ? resolve_ack(item.group, *p, item.txn_hash) : std::nullopt;
    if (!o) {
      reply.results[i] = refuse_unresolved(item, i, p);
      continue;
    }
    steps.push_back(AckStep{&item.group, p->id, *o, signal_rank(item.status), i});
  }
  order_steps(&steps);
  const AckStep* stopped = nullptr;
  for (const AckStep& step : steps) {
    AckItem& item = cmd.items[step.index];
    if (stopped && same_partition(*stopped, step)) {
      reply.results[step.index] = redelivered(item, step.index, stopped->offset);
      continue;
    }
    AckResult& res = reply.results[step.index];
    res = ack_one(item, step.index, step.offset, now_us, changed);
    if (res.success && is_signal(item.status) && !res.dlq && !res.noop) stopped = &step;
  }
  return reply;
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
  AckResult res;
  res.index = index;
  res.transaction_id = std::move(item.transaction_id);
  res.queue = store_.queue(p.queue)->name;
  res.partition = p.name;
  return res;
}

AckResult Engine::redelivered(AckItem& item, uint32_t index, Offset stop) {
  AckResult res = result_for(item, index, *store_.partition(item.partition_id));
  res.error = not_committed(stop);
  res.lease_released = true;
  return res;
}

AckResult Engine::ack_one(AckItem& item, uint32_t index, Offset o, int64_t now_us, bool* changed) {
  const PartitionState* p = store_.partition(item.partition_id);
  AckResult res = result_for(item, index, *p);
  auto rit = rows_.find(CursorKey{item.group, p->id});
  CursorRow empty_row;
  CursorRow& row = rit != rows_.end() ? rit->second : empty_row;
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
  if (rit == rows_.end()) {
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
  CursorRow& r = ensure_row(item.group, *p);
  *changed = true;
  mark_dirty(item.group, p->id);
  // An unfenced ack (no leaseId) settles its message like any other, never skipping the ones
  // before it; outside the live batch it must not end another worker's lease.
  int64_t keep_expiry = r.lease_expires_us;
  const QueueState* q = store_.queue(p->queue);
  SettleOutcome out = apply_status(r, o, item.status, q->options.retry_limit);
  if (live && !in_batch) {
    r.lease_expires_us = keep_expiry;
    out.released = false;
  }
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
        row.handed_back.erase(row.handed_back.begin());
      row.handed_back.emplace_back(row.lease_id, o);
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

// ---------------------------------------------------------------------------- administration

LeaseExtendReply Engine::extend(const LeaseExtendCmd& cmd, int64_t now_us) {
  LeaseExtendReply reply;
  reply.lease_id = cmd.lease_id;
  auto it = leases_.find(cmd.lease_id);
  if (it == leases_.end()) {
    reply.error = "Lease not found";
    return reply;
  }
  int64_t want = now_us + std::max<int64_t>(1, cmd.seconds) * kUsPerS;
  std::vector<CursorKey> live;
  for (const CursorKey& key : it->second) {
    auto rit = rows_.find(key);
    if (rit == rows_.end() || rit->second.lease_id != cmd.lease_id) continue;
    CursorRow& row = rit->second;
    if (!row.lease_live(now_us)) continue;
    row.lease_expires_us = std::max(row.lease_expires_us, want);
    expiries_.insert({row.lease_expires_us, key});
    mark_dirty(key.group, key.pid);
    live.push_back(key);
    if (reply.expires_us == 0 || row.lease_expires_us < reply.expires_us)
      reply.expires_us = row.lease_expires_us;
  }
  if (live.empty()) {
    leases_.erase(it);
    reply.error = "Lease already expired";
    return reply;
  }
  reply.renewed = static_cast<uint32_t>(live.size());
  it->second = std::move(live);
  reply.success = true;
  return reply;
}

GroupChangeReply Engine::delete_group(const GroupDeleteCmd& cmd) {
  GroupChangeReply reply;
  reply.group = cmd.group;
  reply.queue = cmd.queue;
  const QueueState* only = cmd.queue.empty() ? nullptr : store_.queue(cmd.queue);
  if (!cmd.queue.empty() && !only) return reply;
  for (auto it = rows_.begin(); it != rows_.end();) {
    const PartitionState* p = store_.partition(it->first.pid);
    if (it->first.group != cmd.group || (only && (!p || p->queue != only->id))) {
      ++it;
      continue;
    }
    deleted_rows_.insert(it->first);
    dirty_rows_.erase(it->first);
    ++reply.partitions;
    it = rows_.erase(it);
  }
  for (auto it = metas_.begin(); it != metas_.end();) {
    if (it->first.group != cmd.group || (only && it->first.queue != only->id)) {
      ++it;
      continue;
    }
    ready_.erase(it->first);
    if (!cmd.delete_metadata) {
      ++it;
      continue;
    }
    deleted_metas_.insert(it->first);
    dirty_metas_.erase(it->first);
    groups_of_queue_[it->first.queue].erase(cmd.group);
    reply.metadata_deleted = true;
    it = metas_.erase(it);
  }
  return reply;
}

GroupChangeReply Engine::seek(const SeekCmd& cmd) {
  GroupChangeReply reply;
  reply.group = cmd.group;
  reply.queue = cmd.queue;
  reply.partition = cmd.partition;
  reply.to_end = cmd.to_end;
  reply.timestamp_us = cmd.timestamp_us;
  const QueueState* q = store_.queue(cmd.queue);
  if (!q) return reply;
  PopCmd as_all;
  as_all.subscription_mode = SubscriptionMode::all;
  ensure_group(cmd.group, *q, as_all, 0);
  for (const auto& [name, pid] : q->partitions) {
    if (!cmd.partition.empty() && name != cmd.partition) continue;
    const PartitionState& p = *store_.partition(pid);
    CursorRow& row = ensure_row(cmd.group, p);
    row.next = cmd.to_end ? p.next_offset : p.first_at_or_after(cmd.timestamp_us + 1);
    row.lease_expires_us = 0;
    row.settled.clear();
    row.retry_count = 0;
    mark_dirty(cmd.group, pid);
    if (row.next < p.next_offset) make_ready(cmd.group, p);
    ++reply.partitions;
    reply.moved_to = static_cast<int64_t>(row.next.value) - 1;
  }
  return reply;
}

GroupChangeReply Engine::update_subscription(const SubscriptionCmd& cmd) {
  GroupChangeReply reply;
  reply.group = cmd.group;
  reply.timestamp_us = cmd.timestamp_us;
  for (auto& [key, meta] : metas_) {
    if (key.group != cmd.group) continue;
    meta.mode = SubscriptionMode::from_time;
    meta.from_us = cmd.timestamp_us;
    dirty_metas_.insert(key);
    ++reply.partitions;
  }
  return reply;
}

GroupView Engine::view_of(const GroupKey& key, const GroupMeta& meta, bool details,
                          int64_t now_us) const {
  GroupView v;
  const QueueState* q = store_.queue(key.queue);
  v.group = key.group;
  v.queue = q ? q->name : "";
  v.mode = meta.mode;
  v.subscription_us = meta.from_us;
  if (!q) return v;
  for (const auto& [name, pid] : q->partitions) {
    const PartitionState& p = *store_.partition(pid);
    auto rit = rows_.find(CursorKey{key.group, pid});
    GroupPartitionView pv;
    pv.queue = q->name;
    pv.partition = name;
    pv.partition_id = pid;
    pv.cursor = start_offset(meta, p);
    if (rit != rows_.end()) {
      ++v.members;
      pv.cursor = rit->second.next;
      pv.lease_active = rit->second.lease_live(now_us);
      pv.lease_id = rit->second.lease_id;
      pv.total_consumed = rit->second.consumed_total;
      pv.last_consumed_us = rit->second.last_consumed_us;
    }
    pv.cursor = std::max(pv.cursor, p.log_start);
    pv.offset_lag = p.unconsumed(pv.cursor);
    if (pv.offset_lag > 0) {
      if (const AppendRow* r = p.row_of(pv.cursor)) {
        pv.time_lag_s = std::max<int64_t>(0, (now_us - r->created_us) / kUsPerS);
        pv.oldest_unconsumed_us = r->created_us;
      }
      ++v.partitions_with_lag;
      v.total_lag += pv.offset_lag;
      v.max_time_lag_s = std::max(v.max_time_lag_s, pv.time_lag_s);
    }
    if (details) v.partitions.push_back(std::move(pv));
  }
  return v;
}

GroupsReply Engine::groups(const std::string& group, int64_t now_us, bool details) const {
  GroupsReply reply;
  for (const auto& [key, meta] : metas_) {
    if (!group.empty() && key.group != group) continue;
    reply.groups.push_back(view_of(key, meta, details || !group.empty(), now_us));
  }
  return reply;
}

void Engine::drop_queue(QueueId queue) {
  std::erase_if(rows_, [&](const auto& kv) { return store_.partition(kv.first.pid) == nullptr; });
  std::erase_if(metas_, [&](const auto& kv) { return kv.first.queue == queue; });
  std::erase_if(ready_, [&](const auto& kv) { return kv.first.queue == queue; });
  std::erase_if(dirty_rows_, [&](const CursorKey& k) { return !store_.partition(k.pid); });
  std::erase_if(dirty_metas_, [&](const GroupKey& k) { return k.queue == queue; });
  std::erase_if(dlq_, [&](const EffDlq& d) { return d.queue == queue; });
  groups_of_queue_.erase(queue);
}

void Engine::drop_partition(const EffPartitionDelete& e) {
  auto of_pid = [&](const CursorKey& k) { return k.pid == e.pid; };
  std::erase_if(rows_, [&](const auto& kv) { return of_pid(kv.first); });
  std::erase_if(dirty_rows_, of_pid);
  std::erase_if(deleted_rows_, of_pid);
  std::erase_if(expiries_, [&](const auto& x) { return of_pid(x.second); });
  std::erase_if(deferred_, [&](const auto& x) { return of_pid(x.second); });
  for (auto& [lease, keys] : leases_) std::erase_if(keys, of_pid);
  std::erase_if(leases_, [](const auto& kv) { return kv.second.empty(); });
  std::erase_if(dlq_, [&](const EffDlq& d) { return d.pid == e.pid; });
  for (auto& [key, rs] : ready_) {
    if (key.queue != e.queue) continue;
    if (auto it = rs.seq_of.find(e.pid); it != rs.seq_of.end()) {
      rs.order.erase({it->second, e.pid});
      rs.seq_of.erase(it);
    }
  }
}

std::set<PartitionId> Engine::leased_partitions(int64_t now_us) const {
  std::set<PartitionId> out;
  for (const auto& [key, row] : rows_)
    if (row.lease_live(now_us)) out.insert(key.pid);
  return out;
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

bool Engine::plan_txn_ack(const TxnAck& ack, uint32_t index, const std::optional<LeaseId>& lease,
                          int64_t now_us, TxnConsumePlan* plan) {
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
  std::optional<Offset> o = p->find_hash(ack.txn_hash, Offset(0), p->next_offset);
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
  for (uint32_t i = 0; i < acks.size(); ++i) {
    const PartitionState* p = store_.partition(acks[i]->partition_id);
    std::optional<Offset> o =
        p ? p->find_hash(acks[i]->txn_hash, Offset(0), p->next_offset) : std::nullopt;
    // An unresolved ack sorts first and refuses the whole call.
    steps.push_back(AckStep{&acks[i]->group, p ? p->id : PartitionId{}, o.value_or(Offset(0)),
                            o ? signal_rank(acks[i]->status) : -1, i});
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
    if (!plan_txn_ack(ack, step.index, ack.lease_id ? ack.lease_id : single, now_us, &plan))
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
  for (const auto& key : dirty_metas_)
    out.push_back(EffGroupMeta{key.group, key.queue, metas_.at(key)});
  for (const auto& key : dirty_rows_) out.push_back(EffCursor{key.group, key.pid, rows_.at(key)});
  for (auto& d : dlq_) out.push_back(std::move(d));
  for (const auto& key : deleted_rows_) out.push_back(EffCursorDelete{key.group, key.pid});
  for (const auto& key : deleted_metas_) out.push_back(EffGroupMetaDelete{key.group, key.queue});
  dirty_metas_.clear();
  dirty_rows_.clear();
  dlq_.clear();
  deleted_rows_.clear();
  deleted_metas_.clear();
  return out;
}

// Whether an effect switches maintenance (its row in the system namespace).
bool touches_maintenance(const Effect& eff) {
  const KvKey key{kSystemNamespace, kMaintenanceKey};
  if (auto* put = std::get_if<EffKvPut>(&eff))
    return put->ns == key.first && put->key == key.second;
  if (auto* del = std::get_if<EffKvDelete>(&eff))
    return del->ns == key.first && del->key == key.second;
  return false;
}

void Engine::on_applied(const Entry& entry) {
  for (const auto& eff : entry.effects) {
    if (touches_maintenance(eff)) {
      // What push maintenance held back may now be delivered: every ready set is built again.
      ready_.clear();
      for (const auto& [id, q] : store_.queues()) woken_.insert(id);
    }
    if (auto* d = std::get_if<EffDeleteQueue>(&eff)) drop_queue(d->id);
    if (auto* d = std::get_if<EffPartitionDelete>(&eff)) drop_partition(*d);
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
  while (!deferred_.empty() && deferred_.begin()->first <= now_us) {
    CursorKey key = deferred_.begin()->second;
    deferred_.erase(deferred_.begin());
    if (const PartitionState* p = store_.partition(key.pid)) make_ready(key.group, *p);
  }
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
  int64_t at = expiries_.empty() ? INT64_MAX : expiries_.begin()->first;
  if (!deferred_.empty()) at = std::min(at, deferred_.begin()->first);
  return at;
}

std::vector<QueueId> Engine::take_woken() {
  std::vector<QueueId> out(woken_.begin(), woken_.end());
  woken_.clear();
  return out;
}

}  // namespace queen
