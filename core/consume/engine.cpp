#include "core/consume/engine.h"

#include <algorithm>
#include <climits>

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

AckReply Engine::ack(AckCmd cmd, int64_t now_us, bool* changed) {
  AckReply reply;
  reply.results.resize(cmd.items.size());
  // Settle completions first, so a failed ack in the same call hands back only what is
  // still unsettled and never lets a later completion skip past it.
  for (int pass = 0; pass < 2; ++pass) {
    for (uint32_t i = 0; i < cmd.items.size(); ++i) {
      bool hands_back =
          cmd.items[i].status == AckStatus::failed || cmd.items[i].status == AckStatus::retry;
      if (hands_back != (pass == 1)) continue;
      reply.results[i] = ack_one(cmd.items[i], i, now_us, changed);
    }
  }
  return reply;
}

AckResult Engine::ack_one(AckItem& item, uint32_t index, int64_t now_us, bool* changed) {
  AckResult res;
  res.index = index;
  res.transaction_id = std::move(item.transaction_id);
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
    res.error = "message not found: transactionId " + res.transaction_id;
    return res;
  }
  Offset o = *found;
  const MsgState* st = row.state_of(o);
  bool live = row.lease_live(now_us);
  bool lease_ok = !item.lease_id || (live && *item.lease_id == row.lease_id);
  if (!st && o < row.next && item.status == AckStatus::failed) {
    res.error = "message at offset " + std::to_string(o.value) +
                " is already consumed: a failed ack below the cursor is refused";
    return res;
  }
  if (is_done(st) || o < row.next) {
    // Already applied: answered as the first time, from the state kept in the row.
    res.success = true;
    res.dlq = st && *st == MsgState::dlq;
    res.noop = !st;
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
  }
  return reply;
}

GroupChangeReply Engine::update_subscription(const SubscriptionCmd& cmd) {
  GroupChangeReply reply;
  reply.group = cmd.group;
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

void Engine::on_applied(const Entry& entry) {
  for (const auto& eff : entry.effects) {
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
