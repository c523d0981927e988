// Whole simulated runs: a seed replays byte for byte, and the checker is not vacuous (a
// planted bug is caught).
#include <gtest/gtest.h>

#include "sim/params.h"
#include "sim/run.h"

namespace queen::sim {
namespace {

TEST(SimRun, TheSameSeedGivesTheSameTrace) {
  for (uint64_t seed : {3u, 11u, 19u}) {
    RunParams p = choose_params(seed, 1, Mutant::none);
    RunOutcome a = run_seed(p, RunOptions{});
    RunOutcome b = run_seed(p, RunOptions{});
    EXPECT_EQ(a.trace_hash, b.trace_hash) << "seed " << seed;
    EXPECT_EQ(a.trace_lines, b.trace_lines) << "seed " << seed;
    EXPECT_EQ(a.counters, b.counters) << "seed " << seed;
    EXPECT_GT(a.trace_lines, 100u);
  }
  EXPECT_NE(run_seed(choose_params(3, 1, Mutant::none), RunOptions{}).trace_hash,
            run_seed(choose_params(4, 1, Mutant::none), RunOptions{}).trace_hash);
}

TEST(SimRun, ParametersComeFromTheSeedAlone) {
  EXPECT_EQ(choose_params(77, 1, Mutant::none).describe(),
            choose_params(77, 1, Mutant::none).describe());
  EXPECT_NE(choose_params(77, 1, Mutant::none).describe(),
            choose_params(78, 1, Mutant::none).describe());
}

TEST(SimRun, AnsweringBeforeFsyncIsCaughtAsALostPush) {
  int caught = 0;
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    RunOutcome o = run_seed(choose_params(seed, 1, Mutant::answer_before_fsync), RunOptions{});
    if (!o.violations.empty() && o.violations[0].invariant.rfind("1 ", 0) == 0) ++caught;
  }
  EXPECT_GE(caught, 3);
}

}  // namespace
}  // namespace queen::sim
