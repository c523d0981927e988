// What the console's charts and the status/analytics routes read of the past: a ring of the
// node's figures, sampled every QUEEN_STATUS_SAMPLE_MS (5 s) for the last kSamplesMax samples
// (an hour at the default), kept in memory by this process only (not replicated, gone at a
// restart), and the buckets those routes answer with.
//
// Contract:
// - A sample holds counters since the process started (pushed, popped, acked, ...) and gauges
//   as they were (queue depth, pop lag, commit index, RSS). A bucket's figures are the counters'
//   growth between the samples in it and the one before it, and its rates that growth over the
//   time those samples span; a gauge is the bucket's last sample's (lag: its mean and max).
// - Per-queue figures are kept for at most kQueuesSampledMax queues, the deepest first (ties by
//   name), so the ring's size does not grow with the number of queues.
// - Safe from any thread: the sampler adds on the node thread, routes read on edge threads.
#pragma once

#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/node/metrics.h"

namespace queen::server {

constexpr size_t kSamplesMax = 720;
constexpr size_t kQueuesSampledMax = 64;
constexpr int64_t kStatusSampleMsDefault = 5000;  // QUEEN_STATUS_SAMPLE_MS

struct QueueSample {
  std::string name;
  uint64_t appended = 0;  // since the queue was created
  uint64_t popped = 0;    // handed out by pops since the process started
  uint64_t depth = 0;
  uint64_t dlq = 0;
  uint64_t lag_avg_ms = 0, lag_max_ms = 0;  // pop lag over the last minute or two
};

struct StatusSample {
  int64_t at_ms = 0;  // Unix time
  // Counters since the process started.
  uint64_t pushed = 0, popped = 0, acked = 0, ack_failed = 0, dlq_moves = 0;
  uint64_t txn_committed = 0, entries_committed = 0;
  uint64_t cpu_user_us = 0, cpu_system_us = 0;
  // Gauges.
  std::string role;
  uint64_t node_id = 0, leader = 0, term = 0;
  uint64_t commit_index = 0, applied_index = 0, last_index = 0;
  uint64_t rss_bytes = 0;
  uint64_t depth = 0, dlq = 0;              // over every queue
  uint64_t lag_avg_ms = 0, lag_max_ms = 0;  // pop lag over the sampled queues
  std::vector<QueueSample> queues;
};

// The sample of a metrics reply taken at `at_ms`, with this process's RSS and CPU time.
StatusSample sample_of(const MetricsReply& m, int64_t at_ms);

// One bucket of a time range: [start_ms, start_ms + width).
struct StatusBucket {
  int64_t start_ms = 0;
  uint32_t samples = 0;
  int64_t span_ms = 0;  // covered by the samples in it (for rates)
  uint64_t pushed = 0, popped = 0, acked = 0, ack_failed = 0, dlq_moves = 0, txn_committed = 0;
  uint64_t cpu_user_us = 0, cpu_system_us = 0;
  std::optional<StatusSample> last;  // the bucket's last sample (gauges)
  double per_second(uint64_t n) const { return span_ms > 0 ? n * 1000.0 / span_ms : 0.0; }
};

class StatusHistory {
 public:
  void add(StatusSample sample);
  std::optional<StatusSample> latest() const;
  // The samples with from_ms <= at_ms <= to_ms, oldest first, and the one before the first.
  std::vector<StatusSample> range(int64_t from_ms, int64_t to_ms) const;
  void clear();

 private:
  mutable std::mutex mutex_;
  std::deque<StatusSample> ring_;
};

StatusHistory& status_history();

// The buckets of [from_ms, to_ms) `width_ms` wide, every one of them (empty ones too), from
// `samples` (StatusHistory::range).
std::vector<StatusBucket> bucketize(const std::vector<StatusSample>& samples, int64_t from_ms,
                                    int64_t to_ms, int64_t width_ms);

// The reference's bucket for a range: up to 1 h 1 min, 6 h 5, 24 h 15, 7 d 60, else 360.
int64_t default_bucket_ms(int64_t range_ms);

}  // namespace queen::server
