// The simulated disk's crash model: synced bytes always survive, loss is a suffix of the
// unsynced bytes, tearing never reaches below the durable prefix, syncs complete in order.
#include <gtest/gtest.h>

#include "io/sim/disk.h"

namespace queen::sim {
namespace {

Bytes bytes_of(Rng& rng, size_t n) {
  Bytes b(n);
  for (auto& x : b) x = static_cast<uint8_t>(1 + rng.below(255));  // never zero: tears show
  return b;
}

DiskFaultRates rates(uint32_t keep, uint32_t torn) {
  DiskFaultRates r;
  r.crash_keep_per_mille = keep;
  r.crash_torn_per_mille = torn;
  return r;
}

// Appends `writes` random writes, syncs the first `synced` of them, crashes.
struct Scenario {
  Bytes before;
  uint64_t durable = 0;
  CrashReport report;
  Bytes after;
};

Scenario crash_after_writes(uint64_t seed, DiskFaultRates r, int writes, int synced) {
  Rng rng(seed);
  SimDisk disk(Rng(seed + 1), r);
  for (int i = 0; i < writes; ++i) {
    disk.append("log", bytes_of(rng, 1 + rng.below(1500)));
    if (i + 1 == synced) {
      SyncPlan plan = disk.plan_sync("log", 0);
      disk.complete_sync("log", plan.upto_bytes);
    }
  }
  Scenario s;
  s.before = *disk.contents("log");
  s.durable = disk.durable_size("log");
  s.report = disk.crash();
  s.after = *disk.contents("log");
  EXPECT_EQ(disk.durable_size("log"), s.after.size()) << "after a crash every byte left is durable";
  return s;
}

TEST(SimDisk, SyncedBytesSurviveEveryCrash) {
  for (uint64_t seed = 1; seed <= 300; ++seed) {
    Scenario s = crash_after_writes(seed, rates(300, 300), 8, 4);
    ASSERT_GE(s.after.size(), s.durable) << "seed " << seed;
    ASSERT_TRUE(std::equal(s.before.begin(), s.before.begin() + s.durable, s.after.begin()))
        << "seed " << seed << ": a synced byte changed";
  }
}

TEST(SimDisk, LossIsASuffixAndOnlyTheLastSectorIsTorn) {
  for (uint64_t seed = 1; seed <= 300; ++seed) {
    Scenario s = crash_after_writes(seed, rates(0, 1000), 6, 2);
    ASSERT_LE(s.after.size(), s.before.size());
    uint64_t n = s.after.size();
    uint64_t sector = n == 0 ? 0 : (n - 1) / SimDisk::kSectorBytes * SimDisk::kSectorBytes;
    uint64_t intact = std::max(sector, s.durable);
    ASSERT_TRUE(
        std::equal(s.before.begin(), s.before.begin() + std::min(intact, n), s.after.begin()))
        << "seed " << seed << ": bytes before the last sector changed";
    EXPECT_EQ(s.report.torn_writes, s.durable < s.before.size() ? 1u : 0u);
  }
}

TEST(SimDisk, KeptSuffixIsWhole) {
  Scenario s = crash_after_writes(7, rates(1000, 0), 5, 1);
  EXPECT_EQ(s.after, s.before);
  EXPECT_EQ(s.report.files_kept, 1u);
}

TEST(SimDisk, DroppedWritesAreCutAtAWriteBoundary) {
  for (uint64_t seed = 1; seed <= 100; ++seed) {
    Rng rng(seed);
    SimDisk disk(Rng(seed), rates(0, 0));
    std::vector<uint64_t> boundaries{0};
    for (int i = 0; i < 5; ++i) {
      disk.append("log", bytes_of(rng, 100 + rng.below(900)));
      boundaries.push_back(disk.size("log"));
    }
    CrashReport r = disk.crash();
    uint64_t n = disk.size("log");
    EXPECT_NE(std::find(boundaries.begin(), boundaries.end(), n), boundaries.end())
        << "seed " << seed << ": cut at " << n << " is not a write boundary";
    EXPECT_GE(r.writes_dropped, 1u);
  }
}

TEST(SimDisk, SyncsOfOneFileCompleteInCallOrder) {
  DiskFaultRates r;
  r.sync_latency_us_min = 1;
  r.sync_latency_us_max = 10'000;
  SimDisk disk(Rng(3), r);
  int64_t last = 0;
  for (int i = 0; i < 200; ++i) {
    disk.append("log", Bytes(10, 1));
    SyncPlan p = disk.plan_sync("log", i * 100);
    EXPECT_GE(p.done_at_us, last);
    EXPECT_EQ(p.upto_bytes, disk.size("log"));
    last = p.done_at_us;
  }
}

TEST(SimDisk, SyncCoversOnlyBytesAppendedBeforeIt) {
  SimDisk disk(Rng(1), rates(0, 0));
  disk.append("log", Bytes(100, 1));
  SyncPlan p = disk.plan_sync("log", 0);
  disk.append("log", Bytes(50, 2));
  disk.complete_sync("log", p.upto_bytes);
  EXPECT_EQ(disk.durable_size("log"), 100u);
  disk.crash();  // keep 0, torn 0: the unsynced write is dropped
  EXPECT_EQ(disk.size("log"), 100u);
}

TEST(SimDisk, FailedSyncsHappenAtTheirRate) {
  DiskFaultRates r;
  r.sync_fail_per_mille = 500;
  SimDisk disk(Rng(9), r);
  int failed = 0;
  for (int i = 0; i < 1000; ++i) failed += disk.plan_sync("log", 0).ok ? 0 : 1;
  EXPECT_GT(failed, 400);
  EXPECT_LT(failed, 600);
}

TEST(SimDisk, ReadCorruptionOnlyTouchesUnsyncedBytes) {
  DiskFaultRates r;
  r.read_corrupt_per_mille = 1000;
  SimDisk disk(Rng(5), r);
  Rng rng(5);
  Bytes synced = bytes_of(rng, 3000);
  disk.append("log", synced);
  disk.complete_sync("log", disk.plan_sync("log", 0).upto_bytes);
  Bytes tail = bytes_of(rng, 3000);
  disk.append("log", tail);
  bool corrupted = false;
  Result<Bytes> whole = disk.read("log", 0, 6000, &corrupted);
  ASSERT_TRUE(whole.ok());
  EXPECT_TRUE(corrupted);
  EXPECT_TRUE(std::equal(synced.begin(), synced.end(), whole.value().begin()));
  EXPECT_NE(Bytes(whole.value().begin() + 3000, whole.value().end()), tail);
  EXPECT_EQ(*disk.contents("log"), [&] {
    Bytes all = synced;
    all.insert(all.end(), tail.begin(), tail.end());
    return all;
  }()) << "a corrupted read must not change the stored bytes";
  Result<Bytes> head = disk.read("log", 0, 3000, &corrupted);
  EXPECT_FALSE(corrupted);
  EXPECT_EQ(head.value(), synced);
}

TEST(SimDisk, TruncateAndRemoveAreDurable) {
  SimDisk disk(Rng(1), rates(1000, 0));
  disk.append("a", Bytes(1000, 1));
  disk.complete_sync("a", disk.plan_sync("a", 0).upto_bytes);
  ASSERT_TRUE(disk.truncate("a", 400).ok());
  disk.append("b", Bytes(10, 1));
  ASSERT_TRUE(disk.remove("b").ok());
  disk.crash();
  EXPECT_EQ(disk.size("a"), 400u);
  EXPECT_FALSE(disk.exists("b"));
  EXPECT_FALSE(disk.remove("b").ok());
  bool corrupted = false;
  EXPECT_FALSE(disk.read("missing", 0, 1, &corrupted).ok());
}

}  // namespace
}  // namespace queen::sim
