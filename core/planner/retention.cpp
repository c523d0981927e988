#include "core/planner/retention.h"

#include <algorithm>

namespace queen {
namespace {

constexpr int64_t kUsPerS = 1'000'000;

bool has_retention(const QueueOptions& o) {
  return o.max_wait_time_s > 0 ||
         (o.retention_enabled && (o.retention_s > 0 || o.completed_retention_s > 0));
}

// Below the lowest committed cursor of every group of the queue, if each has one here.
std::optional<Offset> consumed_by_all(const Store& store, const PartitionState& p,
                                      const std::vector<std::string>& groups) {
  if (groups.empty()) return std::nullopt;
  Offset lowest = p.next_offset;
  for (const std::string& g : groups) {
    const CursorRow* row = store.cursor(g, p.id);
    if (!row) return std::nullopt;
    lowest = std::min(lowest, row->next);
  }
  return lowest;
}

// `to`, or less, so that at most kRetentionRowsPerStepMax append rows lie between `from`
// and it: one step's apply stays short however far behind retention is.
Offset cap_rows(const PartitionState& p, Offset from, Offset to) {
  if (!(from < to)) return from;
  auto first = std::upper_bound(p.rows.begin(), p.rows.end(), from,
                                [](Offset v, const AppendRow& r) { return v < r.end(); });
  auto limit = static_cast<size_t>(p.rows.end() - first);
  if (limit <= kRetentionRowsPerStepMax) return to;
  Offset cap = (first + kRetentionRowsPerStepMax)->base;
  return std::min(to, cap);
}

}  // namespace

EffRetention retention_marks(const Store& store, const QueueState& q, const PartitionState& p,
                             const std::vector<std::string>& groups, int64_t now_us,
                             int64_t rows_window_min_s) {
  const QueueOptions& o = q.options;
  Offset log_start = p.log_start;
  int64_t all_s = 0;
  if (o.retention_enabled && o.retention_s > 0) all_s = o.retention_s;
  if (o.max_wait_time_s > 0)
    all_s = all_s > 0 ? std::min(all_s, o.max_wait_time_s) : o.max_wait_time_s;
  if (all_s > 0) log_start = std::max(log_start, p.first_at_or_after(now_us - all_s * kUsPerS));
  if (o.retention_enabled && o.completed_retention_s > 0) {
    if (auto consumed = consumed_by_all(store, p, groups)) {
      Offset old = p.first_at_or_after(now_us - o.completed_retention_s * kUsPerS);
      log_start = std::max(log_start, std::min(*consumed, old));
    }
  }
  log_start = cap_rows(p, p.log_start, std::min(log_start, p.next_offset));
  int64_t rows_s = std::max({o.dedup_window_s, o.completed_retention_s, rows_window_min_s});
  Offset rows_start = std::min(log_start, p.first_at_or_after(now_us - rows_s * kUsPerS));
  Offset rows_from = p.rows.empty() ? p.next_offset : p.rows.front().base;
  rows_start = cap_rows(p, rows_from, rows_start);
  return EffRetention{q.id, p.id, log_start, rows_start};
}

bool partition_idle(const Store& store, const PartitionState& p, int64_t now_us, int64_t idle_us) {
  if (idle_us <= 0 || !p.rows.empty() || p.log_start < p.next_offset) return false;
  if (std::max(p.created_us, p.last_append_us) + idle_us > now_us) return false;
  if (auto d = store.dlq().find(p.queue); d != store.dlq().end()) {
    for (const DlqEntry& e : d->second)
      if (!e.timer && e.pid == p.id) return false;
  }
  return true;
}

RetentionPass RetentionScanner::scan(const Store& store, int64_t now_us, uint32_t visit_max,
                                     int64_t idle_us, int64_t rows_window_min_s) {
  RetentionPass out;
  const auto& parts = store.partitions();
  if (parts.empty()) return out;
  std::map<QueueId, std::vector<std::string>> groups;
  for (const auto& [key, meta] : store.groups()) groups[key.queue].push_back(key.group);
  static const std::vector<std::string> kNone;
  auto it = parts.upper_bound(last_visited_);
  for (uint32_t visited = 0; visited < std::min<size_t>(visit_max, parts.size()); ++visited) {
    if (it == parts.end()) it = parts.begin();
    const PartitionState& p = *it;
    last_visited_ = p.id;
    ++it;
    const QueueState* q = store.queue(p.queue);
    if (!q) continue;
    if (partition_idle(store, p, now_us, idle_us)) {
      out.idle.push_back(p.id);
      continue;
    }
    if (!has_retention(q->options)) continue;
    auto g = groups.find(q->id);
    EffRetention e = retention_marks(store, *q, p, g == groups.end() ? kNone : g->second, now_us,
                                     rows_window_min_s);
    bool rows_move = !p.rows.empty() && p.rows.front().end() <= e.rows_start;
    if (p.log_start < e.log_start || rows_move) out.effects.push_back(e);
  }
  return out;
}

}  // namespace queen
