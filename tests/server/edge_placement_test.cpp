// Unit tests of the rule placing the HTTP connections (server/edge_placement.h): the node
// thread serves them while few requests are in flight, the edge threads once more are, and
// a load near the bound does not make them hop.
#include "server/edge_placement.h"

#include <gtest/gtest.h>

namespace queen::server {
namespace {

constexpr int64_t kTickUs = kPlacementTickMs * 1000;

// A placement under test with its own clock, ticked once at its start.
struct Clocked {
  explicit Clocked(PlacementOptions o) : p(o) { p.tick(now_us); }
  Placement p;
  int64_t now_us = 1'000'000'000;
};

// One tick during which `in_flight` requests were in flight on average: requests of a tenth of
// a tick each, begun and ended one after another on ten lanes.
bool tick_at(Clocked& c, double in_flight) {
  int64_t requests = static_cast<int64_t>(in_flight * 10);
  for (int64_t i = 0; i < requests; ++i) {
    int64_t start = c.now_us + (i % 10) * kTickUs / 10;
    c.p.begin(start);
    c.p.end(start, start + kTickUs / 10);
  }
  c.now_us += kTickUs;
  return c.p.tick(c.now_us);
}

Clocked placement() {
  return Clocked({.busy_max = 10, .ticks_to_edge = 3, .ticks_to_node = 5, .back_fraction = 0.5});
}

TEST(Placement, TheNodeThreadServesWhileFewRequestsAreInFlight) {
  Clocked c = placement();
  EXPECT_TRUE(c.p.on_node());
  for (int i = 0; i < 50; ++i) EXPECT_FALSE(tick_at(c, 9.5));
  EXPECT_TRUE(c.p.on_node());
  EXPECT_DOUBLE_EQ(c.p.last_busy(), 9.5);
}

TEST(Placement, MoreInFlightForSeveralTicksMovesToTheEdgeThreads) {
  Clocked c = placement();
  EXPECT_FALSE(tick_at(c, 30));
  EXPECT_FALSE(tick_at(c, 30));
  EXPECT_TRUE(tick_at(c, 30));
  EXPECT_FALSE(c.p.on_node());
}

TEST(Placement, ABurstShorterThanTheTicksToMoveDoesNotMove) {
  Clocked c = placement();
  for (int round = 0; round < 10; ++round) {
    EXPECT_FALSE(tick_at(c, 100));
    EXPECT_FALSE(tick_at(c, 100));
    EXPECT_FALSE(tick_at(c, 1));  // the count of ticks past the bound starts again
  }
  EXPECT_TRUE(c.p.on_node());
}

TEST(Placement, ComingBackNeedsTheLoadWellBelowTheBound) {
  Clocked c = placement();
  for (int i = 0; i < 3; ++i) tick_at(c, 20);
  ASSERT_FALSE(c.p.on_node());
  for (int i = 0; i < 50; ++i) EXPECT_FALSE(tick_at(c, 6));  // below 10, above 10 x 0.5
  EXPECT_FALSE(c.p.on_node());
  for (int i = 0; i < 4; ++i) EXPECT_FALSE(tick_at(c, 4));
  EXPECT_TRUE(tick_at(c, 4));
  EXPECT_TRUE(c.p.on_node());
}

// A request held across several ticks counts in each of them for the time it spent in it,
// not all at once when it ends.
TEST(Placement, ARequestHeldLongCountsInEveryTickItSpans) {
  Clocked c = placement();
  int64_t start = c.now_us;
  for (int i = 0; i < 12; ++i) c.p.begin(start);  // twelve long polls
  for (int tick = 0; tick < 2; ++tick) {
    c.now_us += kTickUs;
    EXPECT_FALSE(c.p.tick(c.now_us));
    EXPECT_DOUBLE_EQ(c.p.last_busy(), 12.0);
  }
  c.now_us += kTickUs / 2;
  for (int i = 0; i < 6; ++i) c.p.end(start, c.now_us);  // six answered half-way into the third
  c.now_us += kTickUs / 2;
  EXPECT_FALSE(c.p.tick(c.now_us));  // 6 x 1/2 + 6: nine, not over ten
  EXPECT_DOUBLE_EQ(c.p.last_busy(), 9.0);
  for (int tick = 0; tick < 2; ++tick) {  // the six still held: not over ten either
    c.now_us += kTickUs;
    EXPECT_FALSE(c.p.tick(c.now_us));
    EXPECT_DOUBLE_EQ(c.p.last_busy(), 6.0);
  }
  for (int i = 0; i < 6; ++i) c.p.end(start, c.now_us);
  EXPECT_TRUE(c.p.on_node());
  c.now_us += 2 * kTickUs;  // a late tick measures the whole time since the last one
  c.p.tick(c.now_us);
  EXPECT_DOUBLE_EQ(c.p.last_busy(), 0.0);
}

TEST(Placement, WithNoBoundTheEdgeThreadsAlwaysServe) {
  Clocked c(PlacementOptions{.busy_max = 0});
  EXPECT_FALSE(c.p.adaptive());
  EXPECT_FALSE(c.p.on_node());
  for (int i = 0; i < 50; ++i) EXPECT_FALSE(tick_at(c, 30));
  EXPECT_FALSE(c.p.on_node());
}

}  // namespace
}  // namespace queen::server
