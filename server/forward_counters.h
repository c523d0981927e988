// Process-wide counts of forwarded prepared commands (server/command_forwarder.h), read by
// /metrics/prometheus: commands this node forwarded to a leader, commands peers forwarded
// that this node served, and forwards that failed with their stream.
#pragma once

#include <atomic>
#include <cstdint>

namespace queen::server {

struct ForwardCounters {
  std::atomic<uint64_t> sent{0};
  std::atomic<uint64_t> served{0};
  std::atomic<uint64_t> lost{0};
};

ForwardCounters& forward_counters();

}  // namespace queen::server
