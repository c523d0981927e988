#include "core/consume/engine.h"

#include <algorithm>
#include <climits>

#include "core/consume/cursor_rules.h"
#include "core/kv/maintenance.h"
#include "core/qlog/log.h"
#include "core/seal/seal.h"

namespace queen {
namespace {

constexpr int64_t kUsPerS = 1'000'000;

}  // namespace

void Engine::reset() {
  rows_.clear();
  metas_.clear();
  ready_.clear();
  lag_walks_.clear();
  lag_shown_.clear();
  lag_at_ = GroupKey{};
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
  metas_ = store_.groups();
  // The committed rows are read where they are; only a leased row is copied, to give its
  // lease the grace.
  store_.cursors().for_each([&](const std::string& group, PartitionId pid, const CursorRow& row) {
    if (row.lease_expires_us != 0) {
      int64_t expires_us = row.lease_expires_us + foreign_lease_grace_us;
      if (foreign_lease_grace_us != 0) rows_.mut_at(group, pid).lease_expires_us = expires_us;
      expiries_.insert({expires_us, CursorKey{group, pid}, row.lease_id});
    }
    if (const PartitionState* p = store_.partition(pid)) groups_of_queue_[p->queue].insert(group);
  });
  for (const auto& [key, meta] : metas_) groups_of_queue_[key.queue].insert(key.group);
}

// ---------------------------------------------------------------------------- pop

const GroupMeta& Engine::ensure_group(const std::string& group, const QueueState& q,
                                      const PopCmd& cmd, int64_t now_us) {
  GroupKey key{group, q.id};
  auto it = metas_.find(key);
  if (it != metas_.end()) return it->second;
  GroupMeta meta;
  if (group != kQueueModeGroup) {
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
  if (CursorRow* row = rows_.mut(group, p.id)) return *row;
  auto mit = metas_.find(GroupKey{group, p.queue});
  QUEEN_ASSERT(mit != metas_.end(), "a row is made only after its group's subscription");
  CursorRow row;
  row.next = std::max(start_offset(mit->second, p), p.log_start);
  mark_dirty(group, p.id);
  return rows_.put(group, p.id, std::move(row));
}

Engine::ReadySet& Engine::ready_set(const std::string& group, const QueueState& q) {
  ReadySet& rs = ready_[GroupKey{group, q.id}];
  if (rs.initialized) return rs;
  rs.initialized = true;
  rs.scan_from = q.partitions.empty() ? PartitionId{} : q.partitions.front();
  rs.scan_end = q.partitions.empty() ? PartitionId{} : q.partitions.back().next();
  return rs;
}

const PartitionState* Engine::scan_next(const std::string& group, const QueueState& q,
                                        ReadySet& rs) {
  const GroupMeta& meta = metas_.at(GroupKey{group, q.id});
  auto it = std::lower_bound(q.partitions.begin(), q.partitions.end(), rs.scan_from);
  for (; it != q.partitions.end() && *it < rs.scan_end; ++it) {
    const PartitionState* p = store_.partition(*it);
    const CursorRow* row = rows_.find(group, *it);
    Offset next = row ? row->next : start_offset(meta, *p);
    if (next < p->next_offset) {
      rs.scan_from = it->next();
      return p;
    }
  }
  rs.scan_from = rs.scan_end;
  return nullptr;
}

void Engine::make_ready(const std::string& group, const PartitionState& p) {
  woken_.insert(p.queue);
  auto it = ready_.find(GroupKey{group, p.queue});
  if (it == ready_.end() || !it->second.initialized) return;
  ReadySet& rs = it->second;
  if (rs.scanning(p.id) || rs.seq_of.contains(p.id)) return;  // a pop will come to it
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
    const PartitionState* found = store_.partition(q->id, *cmd.partition);
    if (!found) {
      res.reply.empty_reason = "partition_not_found";
      return res;
    }
    const PartitionState& p = *found;
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
  while (budget > 0 && res.reply.partitions_claimed < claims_max &&
         res.outcome != PopOutcome::error) {
    const PartitionState* scanned =
        rs.scan_from < rs.scan_end ? scan_next(cmd.group, *q, rs) : nullptr;
    if (!scanned && rs.order.empty()) break;
    if (!scanned) {
      PartitionId pid = rs.order.begin()->second;
      rs.order.erase(rs.order.begin());
      rs.seq_of.erase(pid);
      scanned = store_.partition(pid);
    }
    const PartitionState& p = *scanned;
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
  CursorRow& row = rows_.mut_at(group, p.id);
  const QueueOptions& qo = store_.queue(p.queue)->options;
  advance_cursor(row);
  if (row.next < p.log_start) {  // retention took what the group had not consumed
    row.next = p.log_start;
    erase_if(row.settled, [&](const auto& st) { return st.first < row.next; });
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
    res->error = ErrorReply{api::Errc::internal, "reading partition " + p.name + ": " + error, 0};
    res->reply.messages.clear();
    return;
  }
  bool again = offsets.front() < row.batch_end;  // a lease expired or a batch came back
  for (Offset o : offsets)
    if (o < row.batch_end) ++stats_.redeliveries;
  row.delivery_attempt = again ? row.delivery_attempt + 1 : 1;
  // Keep only what a later batch must skip: settled offsets at or after the cursor.
  erase_if(row.settled, [&](const auto& st) {
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
      res->reply.lease_id =
          LeaseId{make_uuid_v7(now_us / 1000, env_.random_u64(), env_.random_u64())};
    int64_t lease_s = cmd.lease_time_s.value_or(qo.lease_time_s);
    if (lease_s <= 0) lease_s = kPushCreatedLeaseTimeS;
    if (row.lease_expires_us != 0)  // expired, and expire() has not come to it yet
      forget_lease(CursorKey{group, p.id}, row.lease_id, row.lease_expires_us);
    row.lease_id = res->reply.lease_id;
    row.lease_expires_us = now_us + lease_s * kUsPerS;
    expiries_.insert({row.lease_expires_us, CursorKey{group, p.id}, row.lease_id});
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
      if (!row->hashes_inline()) hashes_.remember(p.id, row->base, cached.hashes);  // for acks
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
  const CursorRow* leased = rows_.find(reply.group, m.partition_id);
  if (!leased || leased->lease_id != reply.lease_id) return;
  CursorRow* row = rows_.mut(reply.group, m.partition_id);
  if (row->lease_expires_us != 0)
    forget_lease(CursorKey{reply.group, m.partition_id}, row->lease_id, row->lease_expires_us);
  row->lease_expires_us = 0;
  if (row->delivery_attempt > 0) --row->delivery_attempt;  // nobody received it
  mark_dirty(reply.group, m.partition_id);
  const PartitionState& p = *store_.partition(m.partition_id);
  if (row->next < p.next_offset) make_ready(reply.group, p);
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
    const CursorRow* found = rows_.find(key.group, key.pid);
    if (!found || found->lease_id != cmd.lease_id || !found->lease_live(now_us)) continue;
    CursorRow& row = rows_.mut_at(key.group, key.pid);
    expiries_.erase({row.lease_expires_us, key, cmd.lease_id});
    row.lease_expires_us = std::max(row.lease_expires_us, want);
    expiries_.insert({row.lease_expires_us, key, cmd.lease_id});
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
  size_t erased = rows_.erase_group_if(cmd.group, [&](PartitionId pid, const CursorRow&) {
    const PartitionState* p = store_.partition(pid);
    if (only && (!p || p->queue != only->id)) return false;
    deleted_rows_.insert(CursorKey{cmd.group, pid});
    dirty_rows_.erase(CursorKey{cmd.group, pid});
    return true;
  });
  reply.partitions += static_cast<uint32_t>(erased);
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
  for (PartitionId pid : q->partitions) {
    const PartitionState& p = *store_.partition(pid);
    if (!cmd.partition.empty() && p.name != cmd.partition) continue;
    CursorRow& row = ensure_row(cmd.group, p);
    row.next = cmd.to_end ? p.next_offset : p.first_at_or_after(cmd.timestamp_us + 1);
    if (row.lease_expires_us != 0)
      forget_lease(CursorKey{cmd.group, pid}, row.lease_id, row.lease_expires_us);
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

void Engine::forget_lease(const CursorKey& key, LeaseId lease, int64_t expires_us) {
  expiries_.erase({expires_us, key, lease});
  auto it = leases_.find(lease);
  if (it == leases_.end()) return;
  std::erase(it->second, key);
  if (it->second.empty()) leases_.erase(it);
}

void Engine::drop_queue(QueueId queue) {
  rows_.drop_partitions_if([&](PartitionId pid) { return store_.partition(pid) == nullptr; });
  std::erase_if(metas_, [&](const auto& kv) { return kv.first.queue == queue; });
  std::erase_if(ready_, [&](const auto& kv) { return kv.first.queue == queue; });
  std::erase_if(dirty_rows_, [&](const CursorKey& k) { return !store_.partition(k.pid); });
  std::erase_if(dirty_metas_, [&](const GroupKey& k) { return k.queue == queue; });
  std::erase_if(dlq_, [&](const EffDlq& d) { return d.queue == queue; });
  groups_of_queue_.erase(queue);
}

void Engine::drop_partition(const EffPartitionDelete& e) {
  auto of_pid = [&](const CursorKey& k) { return k.pid == e.pid; };
  rows_.erase_partition(e.pid);
  std::erase_if(dirty_rows_, of_pid);
  std::erase_if(deleted_rows_, of_pid);
  std::erase_if(expiries_, [&](const auto& x) { return of_pid(std::get<1>(x)); });
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
  rows_.for_each([&](const std::string&, PartitionId pid, const CursorRow& row) {
    if (row.lease_live(now_us)) out.insert(pid);
  });
  return out;
}

// ---------------------------------------------------------------------------- checkpoints

std::vector<Effect> Engine::take_checkpoint() {
  std::vector<Effect> out;
  for (const auto& key : dirty_metas_)
    out.push_back(EffGroupMeta{key.group, key.queue, metas_.at(key)});
  for (const auto& key : dirty_rows_)
    out.push_back(EffCursor{key.group, key.pid, rows_.at(key.group, key.pid)});
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

namespace {

// Whether an effect switches maintenance (its row in the system namespace).
bool touches_maintenance(const Effect& eff) {
  const KvKey key{kSystemNamespace, kMaintenanceKey};
  if (auto* put = std::get_if<EffKvPut>(&eff))
    return put->ns == key.first && put->key == key.second;
  if (auto* del = std::get_if<EffKvDelete>(&eff))
    return del->ns == key.first && del->key == key.second;
  return false;
}

}  // namespace

void Engine::on_applied(const Entry& entry) {
  for (const auto& eff : entry.effects) {
    if (touches_maintenance(eff)) {
      // What push maintenance held back may now be delivered: every ready set is built again.
      ready_.clear();
      for (const auto& [id, q] : store_.queues()) woken_.insert(id);
    }
    if (auto* c = std::get_if<EffCursor>(&eff)) rows_.settle(c->group, c->pid);
    if (auto* c = std::get_if<EffCursorDelete>(&eff)) rows_.settle(c->group, c->pid);
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
  while (!expiries_.empty() && std::get<0>(*expiries_.begin()) <= now_us) {
    auto [at, key, lease] = *expiries_.begin();
    forget_lease(key, lease, at);
    const CursorRow* leased = rows_.find(key.group, key.pid);
    if (!leased || leased->lease_id != lease || leased->lease_expires_us != at) continue;
    CursorRow* row = rows_.mut(key.group, key.pid);
    ++stats_.lease_expiries;
    const PartitionState* p = store_.partition(key.pid);
    // Expiry is a function of time: the row needs no new checkpoint for it.
    row->lease_expires_us = 0;
    if (row->next < p->next_offset) make_ready(key.group, *p);
  }
}

int64_t Engine::next_expiry_us() const {
  int64_t at = expiries_.empty() ? INT64_MAX : std::get<0>(*expiries_.begin());
  if (!deferred_.empty()) at = std::min(at, deferred_.begin()->first);
  return at;
}

std::vector<QueueId> Engine::take_woken() {
  std::vector<QueueId> out(woken_.begin(), woken_.end());
  woken_.clear();
  return out;
}

}  // namespace queen
