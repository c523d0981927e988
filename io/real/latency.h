// Latency histograms of this process, for GET /metrics/prometheus: how long the edge took to
// answer requests of each kind (from the request's dispatch to its answer being handed to the
// socket), how long each fdatasync of the disk writer took, and how long work handed from one
// thread to the next waited before that thread started it (a request crosses threads four
// times: a wait there is time no thread spends on it, e.g. behind other work or for a core).
//
// Contract:
// - record_us() is wait-free (relaxed atomics) and safe from any thread; a snapshot read
//   while others record may mix samples of the two moments, never lose a recorded one.
// - Buckets are cumulative upper bounds in microseconds (kBoundsUs) plus +Inf, as Prometheus
//   histograms have them; the sum is kept in microseconds.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>

#include "core/node/metrics.h"

namespace queen::real {

class LatencyHistogram {
 public:
  static constexpr auto kBoundsUs = kLatencyBoundsUs;       // core/node/metrics.h
  static constexpr size_t kBuckets = kBoundsUs.size() + 1;  // the last is +Inf

  struct Snapshot {
    std::array<uint64_t, kBuckets> cumulative{};  // samples at or below each bound
    uint64_t count = 0;
    int64_t sum_us = 0;
  };

  void record_us(int64_t us);
  Snapshot snapshot() const;

 private:
  std::array<std::atomic<uint64_t>, kBuckets> buckets_{};
  std::atomic<int64_t> sum_us_{0};
};

enum class RequestKind : uint8_t { push, pop, ack, transaction, other };
constexpr size_t kRequestKinds = 5;
const char* request_kind_name(RequestKind kind);

// The hand-offs between threads: a command from the edge to the node thread, a sync from
// the node to the disk writer (until the writer has written the appends queued before it and
// takes the sync up), a finished sync from the disk to the node thread, a reply from the
// node to the edge thread of its connection.
enum class Handoff : uint8_t { command, disk, sync, reply };
constexpr size_t kHandoffs = 4;
const char* handoff_name(Handoff stage);

struct ProcessLatencies {
  std::array<LatencyHistogram, kRequestKinds> requests;
  LatencyHistogram fsync;
  std::array<LatencyHistogram, kHandoffs> handoffs;
};

// The one set of histograms of this process.
ProcessLatencies& process_latencies();

using HandoffClock = std::chrono::steady_clock;
// Records the wait of a hand-off made at `since`.
void record_handoff(Handoff stage, HandoffClock::time_point since);

}  // namespace queen::real
