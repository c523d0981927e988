// Admission's fair share: under contention, room that frees up goes to the waiting source
// holding the fewest bytes, so a peer forwarding a flood cannot starve the node's own clients,
// and one client address cannot hold more than half the budget.
#include "server/admission.h"

#include <gtest/gtest.h>

#include <limits>
#include <vector>

namespace queen::server {
namespace {

constexpr AdmitSource kFollowerA = 2;
constexpr AdmitSource kFollowerB = 3;

struct Log {
  std::vector<int> granted;  // labels, in grant order
  Admission::Granted mark(int label) {
    return [this, label] { granted.push_back(label); };
  }
};

TEST(Admission, GrantsAtOnceWhileTheBudgetHasRoomAndNobodyWaits) {
  Admission admission(100);
  Log log;
  EXPECT_FALSE(admission.acquire(admission.permit_for(60), log.mark(1)));
  EXPECT_FALSE(admission.acquire(admission.permit_for(40, kFollowerA), log.mark(2)));
  EXPECT_EQ(admission.in_use(), 100u);
  EXPECT_EQ(admission.in_use_by(kFollowerA), 40u);
  EXPECT_TRUE(log.granted.empty()) << "granted at once: no callback";
  // A permit never exceeds the budget.
  EXPECT_EQ(admission.permit_for(1000).bytes, 100u);
}

TEST(Admission, FreedRoomGoesToTheSourceHoldingLeastNotToTheFlood) {
  Admission admission(100);
  Log log;
  ASSERT_FALSE(admission.acquire(admission.permit_for(50, kFollowerA), log.mark(0)));
  ASSERT_FALSE(admission.acquire(admission.permit_for(50, kFollowerA), log.mark(0)));
  // The follower queues three more before the node's own client arrives.
  for (int i = 1; i <= 3; ++i)
    ASSERT_TRUE(admission.acquire(admission.permit_for(50, kFollowerA), log.mark(i)));
  ASSERT_TRUE(admission.acquire(admission.permit_for(50), log.mark(10)));
  EXPECT_EQ(admission.waiting(), 4u);

  admission.release(AdmitPermit{50, kFollowerA});
  ASSERT_EQ(log.granted, (std::vector<int>{10})) << "the local client holds 0 bytes: it goes first";
  admission.release(AdmitPermit{50, kFollowerA});
  // Now both hold 50 and only the follower waits: first come, first served within it.
  EXPECT_EQ(log.granted, (std::vector<int>{10, 1}));
  EXPECT_EQ(admission.in_use_by(kLocalClients), 50u);
  EXPECT_EQ(admission.in_use_by(kFollowerA), 50u);
}

TEST(Admission, ContendingSourcesConvergeToEqualShares) {
  Admission admission(120);
  Log log;
  // Three sources each keep many 10-byte requests waiting; whoever is granted later releases.
  std::vector<AdmitPermit> held;
  for (int i = 0; i < 12; ++i) {  // the follower A fills the budget first
    AdmitPermit p = admission.permit_for(10, kFollowerA);
    ASSERT_FALSE(admission.acquire(p, log.mark(0)));
    held.push_back(p);
  }
  // A queues its flood first; in arrival order it alone would be served.
  for (AdmitSource s : {kFollowerA, kLocalClients, kFollowerB}) {
    for (int i = 0; i < 40; ++i)
      admission.acquire(admission.permit_for(10, s), log.mark(static_cast<int>(s)));
  }
  // Release A's initial holdings one by one, plus each newly granted permit's predecessor,
  // until the budget has turned over several times.
  for (int round = 0; round < 36; ++round) {
    admission.release(held[round % held.size()]);
    held[round % held.size()] = AdmitPermit{10, static_cast<AdmitSource>(log.granted.back())};
  }
  EXPECT_EQ(admission.in_use(), 120u);
  EXPECT_EQ(admission.in_use_by(kLocalClients), 40u);
  EXPECT_EQ(admission.in_use_by(kFollowerA), 40u);
  EXPECT_EQ(admission.in_use_by(kFollowerB), 40u);
}

TEST(Admission, AWaiterThatGivesUpTakesNothingAndUnblocksOthers) {
  Admission admission(100);
  Log log;
  AdmitPermit big = admission.permit_for(100, kFollowerA);
  ASSERT_FALSE(admission.acquire(big, log.mark(0)));
  auto hog = admission.acquire(admission.permit_for(100), log.mark(1));
  auto small = admission.acquire(admission.permit_for(30, kFollowerB), log.mark(2));
  ASSERT_TRUE(hog && small);
  EXPECT_TRUE(admission.withdraw(*hog));
  EXPECT_FALSE(admission.withdraw(*hog)) << "withdrawn once";
  admission.release(big);
  EXPECT_EQ(log.granted, (std::vector<int>{2}));
  EXPECT_EQ(admission.in_use(), 30u);
  EXPECT_EQ(admission.waiting(), 0u);
  EXPECT_FALSE(admission.withdraw(*small)) << "already granted: nothing to withdraw";
}

// The gauges /metrics/prometheus shows follow every grant, wait, withdrawal and release.
TEST(Admission, PublishesWhatIsHeldAndWaiting) {
  EdgeCounters published;
  Admission admission(100, &published);
  Log log;
  AdmitPermit held = admission.permit_for(70, kFollowerA);
  ASSERT_FALSE(admission.acquire(held, log.mark(0)));
  auto first = admission.acquire(admission.permit_for(40), log.mark(1));
  auto second = admission.acquire(admission.permit_for(40), log.mark(2));
  ASSERT_TRUE(first && second);
  EXPECT_EQ(published.admit_in_use_bytes.load(), 70u);
  EXPECT_EQ(published.admit_waiting.load(), 2u);
  EXPECT_TRUE(admission.withdraw(*second));
  EXPECT_EQ(published.admit_waiting.load(), 1u);
  admission.release(held);
  EXPECT_EQ(log.granted, (std::vector<int>{1}));
  EXPECT_EQ(published.admit_in_use_bytes.load(), 40u);
  EXPECT_EQ(published.admit_waiting.load(), 0u);
  admission.release(admission.permit_for(40));
  EXPECT_EQ(published.admit_in_use_bytes.load(), 0u);
}

// One client address, however slowly it sends, holds at most half the budget: its requests
// past that wait without holding up another address's.
TEST(Admission, AClientAddressHoldsAtMostHalfTheBudget) {
  Admission admission(100);
  Log log;
  AdmitSource slow = client_source("127.0.0.2");
  AdmitSource other = client_source("127.0.0.1");
  EXPECT_NE(slow, other);
  EXPECT_NE(slow & kClientSourceBit, 0u);
  EXPECT_EQ(admission.permit_for(1000, slow).bytes, 50u) << "a permit is capped at the share";
  AdmitPermit first = admission.permit_for(50, slow);
  ASSERT_FALSE(admission.acquire(first, log.mark(0)));
  auto second = admission.acquire(admission.permit_for(50, slow), log.mark(1));
  ASSERT_TRUE(second) << "at its cap: it waits";
  // Another address is served at once, although a request was queued before it.
  EXPECT_FALSE(admission.acquire(admission.permit_for(30, other), log.mark(2)));
  EXPECT_EQ(admission.in_use_by(other), 30u);
  admission.release(first);  // the slow address drops below its cap: its waiter goes
  EXPECT_EQ(log.granted, (std::vector<int>{1}));
  EXPECT_EQ(admission.in_use_by(slow), 50u);
}

// The gate counts what admission let in as about to be written: a burst as large as the free
// room closes it before any of it is on disk.
TEST(DiskGate, ClosesForBytesOnTheirWayNotOnlyForBytesWritten) {
  DiskGate gate(DiskGateOptions{.data_dir = ::testing::TempDir(), .high_pct = 99, .low_pct = 98});
  gate.check(0);
  ASSERT_GE(gate.last_pct(), 0) << "statvfs of the test folder";
  if (gate.last_pct() >= 98) GTEST_SKIP() << "the test's disk is nearly full already";
  EXPECT_FALSE(gate.full());
  gate.check(std::numeric_limits<uint64_t>::max() / 2);  // more than the disk can take
  EXPECT_EQ(gate.last_pct(), 100);
  EXPECT_TRUE(gate.full());
  gate.check(0);
  EXPECT_FALSE(gate.full()) << "below low_pct again once the burst is answered";
}

}  // namespace
}  // namespace queen::server
