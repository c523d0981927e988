// A consumer group's views (core/consume/engine.h): a group's header and lag, its details
// whole (read a slice at a time, Engine::list_groups) or a page at a time, and the lag summary
// of groups on queues too large to count at a call, walked a slice per step.
#include "core/consume/engine.h"

#include <algorithm>

#include "core/state/partition_page.h"

namespace queen {
namespace {

constexpr int64_t kUsPerS = 1'000'000;

}  // namespace

GroupView Engine::view_header(const GroupKey& key, const GroupMeta& meta) const {
  const QueueState* q = store_.queue(key.queue);
  GroupView v;
  v.group = key.group;
  v.queue = q ? q->name : "";
  v.mode = meta.mode;
  v.subscription_us = meta.from_us;
  return v;
}

void Engine::tally(const GroupMeta& meta, const PartitionState& p, const CursorRow* row,
                   int64_t now_us, GroupView* v, GroupPartitionView* pv) const {
  Offset cursor = row ? row->next : start_offset(meta, p);
  if (row) ++v->members;
  cursor = std::max(cursor, p.log_start);
  uint64_t lag = p.unconsumed(cursor);
  int64_t oldest_us = 0, time_lag_s = 0;
  if (lag > 0) {
    if (const AppendRow* r = p.row_of(cursor)) {
      time_lag_s = std::max<int64_t>(0, (now_us - r->created_us) / kUsPerS);
      oldest_us = r->created_us;
    }
    ++v->partitions_with_lag;
    v->total_lag += lag;
    v->max_time_lag_s = std::max(v->max_time_lag_s, time_lag_s);
  }
  if (!pv) return;
  pv->queue = v->queue;
  pv->partition = p.name;
  pv->partition_id = p.id;
  pv->cursor = cursor;
  pv->offset_lag = lag;
  pv->time_lag_s = time_lag_s;
  pv->oldest_unconsumed_us = oldest_us;
  if (!row) return;
  pv->lease_active = row->lease_live(now_us);
  pv->lease_id = row->lease_id;
  pv->total_consumed = row->consumed_total;
  pv->last_consumed_us = row->last_consumed_us;
}

GroupView Engine::view_of(const GroupKey& key, const GroupMeta& meta, int64_t now_us) const {
  GroupView v = view_header(key, meta);
  const QueueState* q = store_.queue(key.queue);
  if (!q) return v;
  EngineRows::Walk rows(rows_, key.group);
  for (PartitionId pid : q->partitions)
    tally(meta, *store_.partition(pid), rows.at(pid), now_us, &v, nullptr);
  return v;
}

bool Engine::list_groups(GroupListing* l, size_t* budget) const {
  for (;;) {
    auto it = l->at ? metas_.lower_bound(*l->at) : metas_.begin();
    while (it != metas_.end() && !l->group.empty() && it->first.group != l->group) ++it;
    if (it == metas_.end()) return true;
    const QueueState* q = store_.queue(it->first.queue);
    if (!l->open || it->first != *l->at) {  // a group not read before
      l->at = it->first;
      l->from = PartitionId{};
      l->reply.groups.push_back(view_header(it->first, it->second));
      l->open = true;
      if (q && !l->lagging_min_s)  // no copy of the rows read as the list grows
        l->reply.groups.back().partitions.reserve(q->partitions.size());
    }
    if (q && !list_partitions(l, it->second, *q, budget)) return false;
    l->open = false;
    auto next = std::next(it);
    if (next == metas_.end()) return true;
    l->at = next->first;
  }
}

bool Engine::list_partitions(GroupListing* l, const GroupMeta& meta, const QueueState& q,
                             size_t* budget) const {
  GroupView& v = l->reply.groups.back();
  auto it = std::lower_bound(q.partitions.begin(), q.partitions.end(), l->from);
  EngineRows::Walk rows(rows_, v.group, l->from);
  for (; it != q.partitions.end(); ++it) {
    if (*budget == 0) {
      l->from = *it;
      return false;
    }
    --*budget;
    const PartitionState& p = *store_.partition(*it);
    GroupPartitionView pv;
    tally(meta, p, rows.at(*it), l->now_us, &v, &pv);
    if (l->lagging_min_s && (pv.offset_lag == 0 || pv.time_lag_s <= *l->lagging_min_s)) continue;
    if (v.partitions.size() == v.partitions.capacity()) {
      size_t read = static_cast<size_t>(it - q.partitions.begin());
      v.partitions.reserve(lagging_rows_ahead(v.partitions.size(), read, q.partitions.size()));
    }
    v.partitions.push_back(std::move(pv));
  }
  return true;
}

// The rows of a lagging list cannot be reserved at its start (few partitions lag, as a
// rule), and a vector grown by doubling moves every row at each growth: at a million rows one
// such move (and the faults of its new pages) held the node for tens of milliseconds. So once
// a sample has been read, the rows are reserved for the share of the queue that lags so far,
// a quarter more, never for more partitions than are left: a list whose lag is spread evenly
// moves its rows once, early, while they are few.
size_t Engine::lagging_rows_ahead(size_t rows, size_t read, size_t total) {
  size_t want = std::max<size_t>(rows * 2, 16);
  if (read >= kLaggingSamplePartitions) {
    size_t projected = rows * total / read;
    want = std::max(want, projected + projected / 4);
  }
  return std::min(want, rows + (total - read));
}

GroupsReply Engine::group_page(const GroupDetailsCmd& cmd, int64_t now_us) const {
  GroupsReply reply;
  for (const auto& entry : metas_) {
    const GroupKey& key = entry.first;  // named, not bound: the lambda below captures them
    const GroupMeta& meta = entry.second;
    if (key.group != cmd.group) continue;
    const QueueState* q = store_.queue(key.queue);
    if (!cmd.queue.empty() && (!q || q->name != cmd.queue)) continue;
    GroupView v = view_header(key, meta);
    if (!q) {
      reply.groups.push_back(std::move(v));
      continue;
    }
    EngineRows::Walk rows(rows_, key.group);
    auto count = [&](const PartitionState& p) {
      tally(meta, p, rows.at(p.id), now_us, &v, nullptr);
    };
    PartitionPageArgs args{cmd.offset, cmd.limit, cmd.search};
    for (const PartitionState* p : partition_page(store_, *q, args, &v.partitions_matched, count)) {
      GroupView scratch;  // the page's details, already counted in v
      scratch.queue = v.queue;
      tally(meta, *p, rows_.find(key.group, p->id), now_us, &scratch, &v.partitions.emplace_back());
    }
    reply.groups.push_back(std::move(v));
  }
  return reply;
}

bool Engine::walked_lag(const GroupKey& key) const {
  const QueueState* q = store_.queue(key.queue);
  return q && q->partitions.size() > kLagWalkSlicePartitions;
}

GroupsReply Engine::lag_summary(int64_t now_us, bool walk_unknown) {
  GroupsReply reply;
  for (const auto& [key, meta] : metas_) {
    if (!walked_lag(key)) {
      reply.groups.push_back(view_of(key, meta, now_us));
      continue;
    }
    auto it = lag_shown_.find(key);
    if (it == lag_shown_.end() && !walk_unknown) continue;
    if (it == lag_shown_.end()) it = lag_shown_.emplace(key, view_of(key, meta, now_us)).first;
    GroupView v = it->second;
    v.subscription_us = meta.from_us;  // what a walk cannot have seen change
    v.mode = meta.mode;
    reply.groups.push_back(std::move(v));
  }
  return reply;
}

void Engine::lag_step(int64_t now_us) {
  std::erase_if(lag_shown_, [&](const auto& kv) { return !metas_.contains(kv.first); });
  std::erase_if(lag_walks_, [&](const auto& kv) { return !metas_.contains(kv.first); });
  size_t budget = kLagWalkSlicePartitions;
  for (size_t groups = metas_.size(); budget > 0 && groups > 0; --groups) {
    auto it = metas_.lower_bound(lag_at_);
    if (it == metas_.end()) it = metas_.begin();
    auto next = std::next(it);
    const QueueState* q = store_.queue(it->first.queue);
    if (q && walked_lag(it->first) && !walk_slice(it->first, it->second, *q, now_us, &budget))
      return;  // the budget ran out inside this group's walk: it goes on from there
    lag_at_ = next == metas_.end() ? GroupKey{} : next->first;
  }
}

bool Engine::walk_slice(const GroupKey& key, const GroupMeta& meta, const QueueState& q,
                        int64_t now_us, size_t* budget) {
  auto [wit, fresh] = lag_walks_.try_emplace(key);
  LagWalk& w = wit->second;
  if (fresh) w.sum = view_header(key, meta);
  auto it = std::lower_bound(q.partitions.begin(), q.partitions.end(), w.from);
  EngineRows::Walk rows(rows_, key.group, w.from);
  for (; it != q.partitions.end() && *budget > 0; ++it, --*budget)
    tally(meta, *store_.partition(*it), rows.at(*it), now_us, &w.sum, nullptr);
  if (it != q.partitions.end()) {
    w.from = *it;
    return false;
  }
  lag_shown_[key] = std::move(w.sum);
  lag_walks_.erase(wit);
  return true;
}

}  // namespace queen
