// A node's configuration: every knob the core reads, with the reference's defaults. The
// server fills it from QUEEN_* variables; the simulator from the seed.
#pragma once

#include <cstdint>

namespace queen {

// Test-only switches that plant known bugs in the real code path; the simulator turns one
// on to prove its checker notices. Never set by the server.
struct Mutants {
  bool answer_before_fsync = false;   // answer a push before its entry is durable
  bool skip_lease_check = false;      // accept an ack for a lease that is not live
  bool replay_partial_entry = false;  // recovery replays an entry missing from a log
};

struct NodeConfig {
  int64_t checkpoint_ms = 5;             // QUEEN_CONSUME_CHECKPOINT_MS
  bool consume_fast = false;             // QUEEN_CONSUME_FAST: answer pops/acks before commit
  uint32_t pipeline_max = 8;             // QUEEN_RAFT_PIPELINE: entries in flight
  uint32_t batch_cmds_max = 4096;        // QUEEN_RAFT_BATCH_MAX_CMDS per entry
  uint64_t batch_bytes_max = 4u << 20;   // QUEEN_RAFT_BATCH_MAX_BYTES per entry
  uint64_t segment_bytes = 64u << 20;    // QUEEN_RAFT_SEGMENT_BYTES: a log file rolls past it
  uint32_t pop_batch_max = 10000;        // largest batch one pop may lease
  int64_t pop_reply_margin_ms = 50;      // QUEEN_RAFT_POP_REPLY_MARGIN_MS
  uint32_t long_poll_waiters_max = 100000;
  int64_t timer_tick_ms = 50;            // QUEEN_RAFT_TIMER_TICK_MS (0: timers never fire)
  int64_t kv_sweep_ms = 1000;            // QUEEN_RAFT_KV_SWEEP_MS
  int64_t request_id_window_ms = 60000;  // QUEEN_RAFT_REQUEST_ID_WINDOW_S x 1000
  uint32_t request_outcomes_max = 1u << 20;
  Mutants mutants;
};

}  // namespace queen
