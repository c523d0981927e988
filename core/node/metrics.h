// The metrics of one node, as the node thread answers a MetricsCmd: its place in the Raft
// cluster, counters since the process started, gauges read from the applied store (queue
// depth, dead letters) and, on a leader, the consumption engine's group lag.
//
// Contract: one snapshot taken on the node thread between two events, so its figures agree
// with each other. Counters only grow while the process lives and start at zero with it.
// Every list is ordered by name, so the same state renders the same bytes. The node's own
// clock (Env) times commits and pop lag; the edge adds the process figures (uptime, memory,
// CPU).
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/api/errc.h"

namespace queen {

struct MetricsCmd {};

// The bounds of every latency histogram, the node's and the edge's (io/real/latency.h):
// upper bounds in microseconds, then +Inf.
inline constexpr std::array<int64_t, 14> kLatencyBoundsUs = {
    500,    1000,   2500,   5000,    10000,   25000,   50000,
    100000, 250000, 500000, 1000000, 2500000, 5000000, 10000000};
// The bucket of a sample (kLatencyBoundsUs.size() is +Inf); a negative sample counts as 0.
inline size_t latency_bucket(int64_t us) {
  auto at = std::lower_bound(kLatencyBoundsUs.begin(), kLatencyBoundsUs.end(), us);
  return static_cast<size_t>(at - kLatencyBoundsUs.begin());
}

// A latency histogram on kLatencyBoundsUs: a count per bucket (not cumulative), the number of
// samples and their sum.
struct LatencyBuckets {
  std::array<uint64_t, kLatencyBoundsUs.size() + 1> counts{};
  uint64_t count = 0;
  int64_t sum_us = 0;

  void record(int64_t us) {
    us = std::max<int64_t>(us, 0);
    ++counts[latency_bucket(us)];
    ++count;
    sum_us += us;
  }
};

// How old the messages of one queue were when pops handed them out (now minus their creation
// time): the minute under way and the one before, so a scrape sees the last minute or two.
struct PopLagWindow {
  static constexpr int64_t kMinuteMs = 60'000;
  struct Minute {
    uint64_t count = 0;
    uint64_t sum_ms = 0;
    uint64_t max_ms = 0;
  };
  int64_t minute_start_ms = 0;
  Minute now, before;

  // Starts a new minute when `now_ms` is past the one under way (an idle one counts as empty).
  void roll(int64_t now_ms) {
    if (now_ms < minute_start_ms + kMinuteMs) return;
    before = now_ms < minute_start_ms + 2 * kMinuteMs ? now : Minute{};
    now = Minute{};
    minute_start_ms = now_ms - now_ms % kMinuteMs;
  }
  void record(int64_t now_ms, int64_t lag_ms) {
    roll(now_ms);
    uint64_t lag = static_cast<uint64_t>(std::max<int64_t>(lag_ms, 0));
    ++now.count;
    now.sum_ms += lag;
    now.max_ms = std::max(now.max_ms, lag);
  }
};

// What the node answered, counted as the answers leave the node thread (an answer to a client
// that went away is not counted).
struct TrafficCounters {
  uint64_t push_requests = 0;
  uint64_t push_queued = 0;      // messages stored
  uint64_t push_duplicates = 0;  // messages answered with their original offset
  uint64_t push_failed = 0;      // items answered with status error
  uint64_t pop_delivered = 0;    // pops answered with messages
  uint64_t pop_empty = 0;        // pops answered with none
  uint64_t pop_messages = 0;     // messages handed out by pops
  uint64_t ack_success = 0;      // acks answered success:true (any status)
  uint64_t ack_failed = 0;       // acks answered success:false
  uint64_t txn_committed = 0;
  uint64_t txn_rolled_back = 0;
  uint64_t messages_deleted = 0;
  std::map<api::Errc, uint64_t> errors;  // error answers by code
  // From an entry's stamp to its commit, for the entries this node proposed.
  LatencyBuckets commit_latency;
  std::map<std::string, PopLagWindow> pop_lag;  // by queue
  // Messages handed out by pops, by queue (at most kPopLagQueuesMax queues; never forgotten).
  std::map<std::string, uint64_t> popped_by_queue;
};

struct QueueMetrics {
  std::string queue;
  std::string ns, task;
  uint32_t partitions = 0;
  uint64_t messages = 0;  // appended since the queue was created
  uint64_t depth = 0;     // not yet consumed by queue mode (__QUEUE_MODE__), deleted excluded
  uint64_t dlq = 0;       // dead letters
  uint64_t deleted = 0;   // messages deleted by DELETE /api/v1/messages/...
  // Pop lag over the last minute or two (PopLagWindow); 0 when nothing was popped.
  uint64_t pop_lag_avg_ms = 0;
  uint64_t pop_lag_max_ms = 0;
  uint64_t popped = 0;  // messages handed out by pops since the process started
};

struct GroupLagMetrics {
  std::string queue;
  std::string group;
  uint64_t lag_messages = 0;  // not yet consumed by the group, over its partitions
  int64_t lag_seconds = 0;    // age of the oldest message the group has not consumed
  uint32_t partitions_with_lag = 0;
};

struct MetricsReply {
  uint64_t node_id = 0;
  std::string role;  // leader, follower, pre_candidate, candidate
  uint64_t leader = 0;
  uint64_t term = 0;
  uint64_t commit_index = 0;
  uint64_t applied_index = 0;
  uint64_t last_index = 0;
  bool writable = false;          // plans commands (a leader that applied an entry of its term)
  uint64_t inflight_entries = 0;  // written or proposed, not yet applied

  // Since the process started.
  uint64_t entries_committed = 0;
  uint64_t syncs = 0;
  uint64_t checkpoints = 0;
  uint64_t lease_expiries = 0;
  uint64_t redeliveries = 0;
  uint64_t dlq_moves = 0;
  uint64_t entries_read_back = 0;
  uint64_t store_checkpoints = 0;
  uint64_t log_files_reclaimed = 0;
  uint64_t snapshots_sent = 0;
  uint64_t snapshots_installed = 0;  // counted across the in-place restarts they cause
  uint64_t raft_messages_refused = 0;  // malformed, out of bounds, or not from a member
  uint64_t forward_retries = 0;        // a follower's commands sent again (a retry, a new leader)
  uint64_t forward_unknown = 0;        // and answered outcome_unknown at their deadline
  uint64_t transfers = 0;              // graceful stops that handed leadership over
  uint64_t recovered_entries = 0;    // replayed at start
  uint64_t torn_tails_cut = 0;       // at start
  // transactionId dedup (core/planner/dedup.h), on the node that plans: zero on a follower.
  uint64_t dedup_checks = 0;
  uint64_t dedup_duplicates = 0;
  uint64_t dedup_ring_candidates = 0;  // offsets a partition's hash ring named, each checked
  uint64_t dedup_cold_scans = 0;       // windows of small partitions scanned whole
  uint64_t dedup_ring_bytes = 0;       // the hash rings' tables, now
  uint64_t dedup_ring_catch_ups = 0;   // rings brought up to their rows (core/planner/dedup.h)
  uint64_t dedup_ring_evictions = 0;   // rings dropped to keep within dedup_front_bytes_max
  // Append rows' hashes read back from their message records (core/qlog/row_hashes.h).
  uint64_t row_hash_reads = 0;
  uint64_t row_hash_cache_bytes = 0;  // now
  TrafficCounters traffic;

  std::vector<QueueMetrics> queues;     // by queue name
  bool groups_known = false;            // the engine is live only on a writable leader
  std::vector<GroupLagMetrics> groups;  // by queue, then group
};

}  // namespace queen
