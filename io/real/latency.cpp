#include "io/real/latency.h"

#include <algorithm>

namespace queen::real {

void LatencyHistogram::record_us(int64_t us) {
  us = std::max<int64_t>(0, us);
  buckets_[latency_bucket(us)].fetch_add(1, std::memory_order_relaxed);
  sum_us_.fetch_add(us, std::memory_order_relaxed);
}

LatencyHistogram::Snapshot LatencyHistogram::snapshot() const {
  Snapshot s;
  uint64_t running = 0;
  for (size_t i = 0; i < kBuckets; ++i) {
    running += buckets_[i].load(std::memory_order_relaxed);
    s.cumulative[i] = running;
  }
  s.count = running;
  s.sum_us = sum_us_.load(std::memory_order_relaxed);
  return s;
}

const char* handoff_name(Handoff stage) {
  switch (stage) {
    case Handoff::command:
      return "command";
    case Handoff::disk:
      return "disk";
    case Handoff::sync:
      return "sync";
    case Handoff::reply:
      return "reply";
  }
  return "command";
}

void record_handoff(Handoff stage, HandoffClock::time_point since) {
  auto waited = std::chrono::duration_cast<std::chrono::microseconds>(HandoffClock::now() - since);
  process_latencies().handoffs[static_cast<size_t>(stage)].record_us(waited.count());
}

const char* request_kind_name(RequestKind kind) {
  switch (kind) {
    case RequestKind::push:
      return "push";
    case RequestKind::pop:
      return "pop";
    case RequestKind::ack:
      return "ack";
    case RequestKind::transaction:
      return "transaction";
    case RequestKind::other:
      return "other";
  }
  return "other";
}

ProcessLatencies& process_latencies() {
  static ProcessLatencies latencies;
  return latencies;
}

}  // namespace queen::real
