// Seeded streams and simulated clocks.
#include <gtest/gtest.h>

#include <set>

#include "io/sim/clock.h"
#include "io/sim/rng.h"

namespace queen::sim {
namespace {

TEST(SimRng, SameSeedAndNameGiveTheSameStream) {
  Rng a = Rng::stream(42, "disk.0");
  Rng b = Rng::stream(42, "disk.0");
  for (int i = 0; i < 100; ++i) EXPECT_EQ(a.next(), b.next());
}

TEST(SimRng, StreamsAreIndependentOfEachOther) {
  // Drawing from one stream never shifts another: adding a fault kind reshuffles nothing.
  Rng lone = Rng::stream(7, "client.net");
  Rng other = Rng::stream(7, "faults.new_kind");
  Rng shared = Rng::stream(7, "client.net");
  for (int i = 0; i < 50; ++i) other.next();
  for (int i = 0; i < 100; ++i) EXPECT_EQ(lone.next(), shared.next());
  EXPECT_NE(Rng::stream(7, "a").next(), Rng::stream(7, "b").next());
  EXPECT_NE(Rng::stream(7, "a").next(), Rng::stream(8, "a").next());
}

TEST(SimRng, RangesStayInBounds) {
  Rng r(1);
  std::set<int64_t> seen;
  for (int i = 0; i < 10000; ++i) {
    int64_t v = r.range(-3, 3);
    ASSERT_GE(v, -3);
    ASSERT_LE(v, 3);
    seen.insert(v);
    ASSERT_LT(r.below(10), 10u);
  }
  EXPECT_EQ(seen.size(), 7u);
  int hits = 0;
  for (int i = 0; i < 10000; ++i) hits += r.per_mille(250) ? 1 : 0;
  EXPECT_NEAR(hits, 2500, 250);
}

TEST(SimClock, SkewStaysWithinTheBoundAndTimeNeverGoesBack) {
  for (int64_t drift : {-200, -1, 0, 1, 200}) {
    ClockModel c{.offset_us = 400'000, .drift_ppm = drift, .max_skew_us = 500'000, .start_us = 0};
    int64_t last = c.local_us(0);
    for (int64_t t = 0; t < 10'000'000'000; t += 7'777'777) {
      int64_t local = c.local_us(t);
      ASSERT_LE(std::abs(local - t), 500'000) << "drift " << drift << " at " << t;
      ASSERT_GE(local, last);
      last = local;
    }
  }
}

}  // namespace
}  // namespace queen::sim
