// Process-wide counts of the edge's own decisions, read by /metrics/prometheus: how requests
// fared at admission (queen_raft_admit_total{outcome}), how many commands took longer than
// QUEEN_RAFT_SLOW_COMMAND_MS (queen_raft_slow_commands_total), and whether the disk gate is
// closed (queen_raft_storage_full) and at what use of the disk (the status routes), and how
// much of the admission budget is held and how many requests wait for it
// (queen_raft_admit_in_use_bytes, queen_raft_admit_waiting), and where the connections are
// served (queen_http_serving_on_node, queen_http_connections_moved_total). Safe from any
// thread (relaxed atomics).
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

namespace queen::server {

// admitted: took its permit at once (or needed none); waited: took it after waiting;
// overloaded: the budget stayed full for the hold (429); queue_full: the node's command queue
// was full (429); storage_full: refused by the disk gate (507).
enum class AdmitOutcome : uint8_t { admitted, waited, overloaded, queue_full, storage_full };
constexpr size_t kAdmitOutcomes = 5;
const char* admit_outcome_name(AdmitOutcome outcome);

struct EdgeCounters {
  std::array<std::atomic<uint64_t>, kAdmitOutcomes> admit{};
  std::atomic<uint64_t> slow_commands{0};
  std::atomic<bool> storage_full{false};
  std::atomic<int> disk_used_pct{-1};  // the disk gate's last measurement (-1: none yet)
  std::atomic<uint64_t> admit_in_use_bytes{0};  // the edge's Admission, as it changes
  std::atomic<uint64_t> admit_waiting{0};
  std::atomic<bool> serving_on_node{false};    // new connections go to the node thread
  std::atomic<uint64_t> connections_moved{0};  // between the node thread and an edge thread

  void count(AdmitOutcome outcome) {
    admit[static_cast<size_t>(outcome)].fetch_add(1, std::memory_order_relaxed);
  }
};

EdgeCounters& edge_counters();

}  // namespace queen::server
