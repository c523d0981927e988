#include "server/status_history.h"

#include <sys/resource.h>

#include <algorithm>

#include "server/observability.h"

namespace queen::server {
namespace {

// The growth of a counter between two samples (a restart of the process starts it over).
uint64_t growth(uint64_t before, uint64_t after) {
  return after >= before ? after - before : after;
}

std::vector<QueueSample> sampled_queues(const MetricsReply& m) {
  std::vector<const QueueMetrics*> order;
  for (const QueueMetrics& q : m.queues) order.push_back(&q);
  std::sort(order.begin(), order.end(), [](const QueueMetrics* a, const QueueMetrics* b) {
    return a->depth != b->depth ? a->depth > b->depth : a->queue < b->queue;
  });
  if (order.size() > kQueuesSampledMax) order.resize(kQueuesSampledMax);
  std::vector<QueueSample> out;
  for (const QueueMetrics* q : order) {
    out.push_back(QueueSample{q->queue, q->messages, q->popped, q->depth, q->dlq, q->pop_lag_avg_ms,
                              q->pop_lag_max_ms});
  }
  std::sort(out.begin(), out.end(),
            [](const QueueSample& a, const QueueSample& b) { return a.name < b.name; });
  return out;
}

void add_growth(const StatusSample& before, const StatusSample& s, StatusBucket* b) {
  b->span_ms += s.at_ms - before.at_ms;
  b->pushed += growth(before.pushed, s.pushed);
  b->popped += growth(before.popped, s.popped);
  b->acked += growth(before.acked, s.acked);
  b->ack_failed += growth(before.ack_failed, s.ack_failed);
  b->dlq_moves += growth(before.dlq_moves, s.dlq_moves);
  b->txn_committed += growth(before.txn_committed, s.txn_committed);
  b->cpu_user_us += growth(before.cpu_user_us, s.cpu_user_us);
  b->cpu_system_us += growth(before.cpu_system_us, s.cpu_system_us);
}

}  // namespace

StatusSample sample_of(const MetricsReply& m, int64_t at_ms) {
  StatusSample s;
  s.at_ms = at_ms;
  s.pushed = m.traffic.push_queued;
  s.popped = m.traffic.pop_messages;
  s.acked = m.traffic.ack_success;
  s.ack_failed = m.traffic.ack_failed;
  s.dlq_moves = m.dlq_moves;
  s.txn_committed = m.traffic.txn_committed;
  s.entries_committed = m.entries_committed;
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  s.cpu_user_us = micros(ru.ru_utime);
  s.cpu_system_us = micros(ru.ru_stime);
  s.role = m.role;
  s.node_id = m.node_id;
  s.leader = m.leader;
  s.term = m.term;
  s.commit_index = m.commit_index;
  s.applied_index = m.applied_index;
  s.last_index = m.last_index;
  s.rss_bytes = resident_bytes();
  uint64_t lag_sum = 0, lag_queues = 0;
  for (const QueueMetrics& q : m.queues) {
    s.depth += q.depth;
    s.dlq += q.dlq;
    s.lag_max_ms = std::max(s.lag_max_ms, q.pop_lag_max_ms);
    if (q.pop_lag_avg_ms > 0) lag_sum += q.pop_lag_avg_ms, ++lag_queues;
  }
  s.lag_avg_ms = lag_queues == 0 ? 0 : lag_sum / lag_queues;
  s.queues = sampled_queues(m);
  return s;
}

void StatusHistory::add(StatusSample sample) {
  std::lock_guard lock(mutex_);
  ring_.push_back(std::move(sample));
  while (ring_.size() > kSamplesMax) ring_.pop_front();
}

std::optional<StatusSample> StatusHistory::latest() const {
  std::lock_guard lock(mutex_);
  if (ring_.empty()) return std::nullopt;
  return ring_.back();
}

std::vector<StatusSample> StatusHistory::range(int64_t from_ms, int64_t to_ms) const {
  std::lock_guard lock(mutex_);
  std::vector<StatusSample> out;
  for (size_t i = 0; i < ring_.size(); ++i) {
    const StatusSample& s = ring_[i];
    bool in = s.at_ms >= from_ms && s.at_ms <= to_ms;
    bool before_first = !in && s.at_ms < from_ms && i + 1 < ring_.size() &&
                        ring_[i + 1].at_ms >= from_ms && ring_[i + 1].at_ms <= to_ms;
    if (in || before_first) out.push_back(s);
  }
  return out;
}

void StatusHistory::clear() {
  std::lock_guard lock(mutex_);
  ring_.clear();
}

StatusHistory& status_history() {
  static StatusHistory history;
  return history;
}

std::vector<StatusBucket> bucketize(const std::vector<StatusSample>& samples, int64_t from_ms,
                                    int64_t to_ms, int64_t width_ms) {
  std::vector<StatusBucket> out;
  if (width_ms <= 0 || to_ms <= from_ms) return out;
  int64_t start = from_ms - from_ms % width_ms;
  for (int64_t t = start; t < to_ms; t += width_ms) out.push_back(StatusBucket{.start_ms = t});
  for (size_t i = 0; i < samples.size(); ++i) {
    const StatusSample& s = samples[i];
    if (s.at_ms < start || s.at_ms >= to_ms) continue;
    StatusBucket& b = out[static_cast<size_t>((s.at_ms - start) / width_ms)];
    ++b.samples;
    if (i > 0) add_growth(samples[i - 1], s, &b);
    b.last = s;
  }
  return out;
}

int64_t default_bucket_ms(int64_t range_ms) {
  constexpr int64_t kMinuteMs = 60'000, kHourMs = 60 * kMinuteMs;
  if (range_ms <= kHourMs) return kMinuteMs;
  if (range_ms <= 6 * kHourMs) return 5 * kMinuteMs;
  if (range_ms <= 24 * kHourMs) return 15 * kMinuteMs;
  if (range_ms <= 7 * 24 * kHourMs) return 60 * kMinuteMs;
  return 360 * kMinuteMs;
}

}  // namespace queen::server
