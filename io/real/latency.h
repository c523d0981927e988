// Latency histograms of this process, for GET /metrics/prometheus: how long the edge took to
// answer requests of each kind (from the request's dispatch to its answer being handed to the
// socket), and how long each fdatasync of the disk writer took.
//
// Contract:
// - record_us() is wait-free (relaxed atomics) and safe from any thread; a snapshot read
//   while others record may mix samples of the two moments, never lose a recorded one.
// - Buckets are cumulative upper bounds in microseconds (kBoundsUs) plus +Inf, as Prometheus
//   histograms have them; the sum is kept in microseconds.
#pragma once

#include <array>
#include <atomic>
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

struct ProcessLatencies {
  std::array<LatencyHistogram, kRequestKinds> requests;
  LatencyHistogram fsync;
};

// The one set of histograms of this process.
ProcessLatencies& process_latencies();

}  // namespace queen::real
