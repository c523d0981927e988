// One simulated run of one seed: a world with its nodes, the workload and the checker, driven
// through three phases. Safety: faults on (crashes and restarts at random events and right
// after push answers, fsync errors, torn and lost unsynced writes, corrupted reads, lost
// replies, pauses past the lease time). Liveness: faults healed; every client must finish and
// every group drain every queue within liveness_ms_max of simulated time. Final: the clients
// stop, the node settles, crashes and recovers one last time, and the checker reads
// everything back.
#pragma once

#include <cstdint>
#include <cstdio>
#include <vector>

#include "io/sim/world.h"
#include "sim/params.h"

namespace queen::sim {

struct RunOptions {
  FILE* trace_out = nullptr;  // echo every trace line (--trace)
};

struct RunOutcome {
  uint64_t seed = 0;
  uint64_t trace_hash = 0;
  uint64_t trace_lines = 0;
  int64_t sim_us = 0;
  std::vector<Violation> violations;
  Counters counters;
};

RunOutcome run_seed(const RunParams& params, const RunOptions& options);

// The world of the run in progress (nullptr between runs): lets a crash handler print the
// last trace lines when the core stops the process on a failed assertion.
SimWorld* current_world();

}  // namespace queen::sim
