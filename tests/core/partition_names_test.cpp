// PartitionNames: the (queue, name) -> id table finds every id it holds after any mix of
// inserts, erases (tombstones) and rebuilds, also when many share a hash (long probe runs
// across the table's end) and when ids are large.
#include "core/state/partition_names.h"

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <iterator>
#include <map>
#include <optional>

namespace queen::testing {
namespace {

// Finds the id filed under `h`, whichever it is (the names' check always holds).
std::optional<PartitionId> find_exact(const PartitionNames& t, uint64_t h, PartitionId want) {
  return t.find(h, [&](PartitionId id) { return id == want; });
}

RC_GTEST_PROP(PartitionNames, EveryIdHeldIsFoundAndNoErasedOne, ()) {
  PartitionNames t;
  std::map<uint64_t, uint64_t> held;  // id -> hash
  uint64_t next_id = *rc::gen::element<uint64_t>(1, (uint64_t{1} << 47) - 1000);
  const auto hash_bits = *rc::gen::inRange<int>(1, 8);  // few distinct hashes: long runs
  const auto steps = *rc::gen::inRange<int>(1, 600);
  for (int s = 0; s < steps; ++s) {
    bool erase = !held.empty() && *rc::gen::inRange<int>(0, 3) == 0;
    if (erase) {
      auto it = held.begin();
      std::advance(it, *rc::gen::inRange<size_t>(0, held.size()));
      t.erase(it->second, PartitionId(it->first));
      RC_ASSERT(!find_exact(t, it->second, PartitionId(it->first)));
      held.erase(it);
    } else {
      // High bits set too, so that the home slot wraps near the table's end.
      uint64_t h = (*rc::gen::inRange<uint64_t>(0, 1u << hash_bits)) * 0x9e3779b97f4a7c15ull;
      if (t.has_room()) {
        t.insert(h, PartitionId(next_id));
        held[next_id] = h;
      } else {  // as the store does: rebuild from the full list, the new id in it
        held[next_id] = h;
        auto fill = *rc::gen::element(PartitionNames::Fill::grow, PartitionNames::Fill::start);
        t.rebuild(
            held.size(),
            [&](auto add) {
              for (const auto& [id, hh] : held) add(hh, PartitionId(id));
            },
            fill);
      }
      next_id += *rc::gen::element<uint64_t>(1, 1, 1u << 20, uint64_t{1} << 36);
    }
    RC_ASSERT(t.size() == held.size());
  }
  for (const auto& [id, h] : held) RC_ASSERT(find_exact(t, h, PartitionId(id)) == PartitionId(id));
}

// A store just decoded holds the ids it held before it stopped: its table is sized to them
// (at most 2/3 full), not with room to double as a full table's rebuild is (at most 3/8),
// which at 10M partitions is 128 MiB of memory less. Either way each id is found.
TEST(PartitionNames, AStartSizesTheTableToItsIdsAndAGrowthForTwiceAsMany) {
  for (size_t live : {size_t{0}, size_t{1}, size_t{1000}, size_t{10922}, size_t{10923}}) {
    PartitionNames start, grow;
    auto each = [&](auto add) {
      for (size_t i = 1; i <= live; ++i) add(i * 0x9e3779b97f4a7c15ull, PartitionId(i));
    };
    start.rebuild(live, each, PartitionNames::Fill::start);
    grow.rebuild(live, each, PartitionNames::Fill::grow);
    EXPECT_GE(start.slots() * 2, (live + 1) * 3) << live;
    EXPECT_TRUE(start.slots() == 16 || start.slots() < (live + 1) * 3) << live;  // the least
    EXPECT_GE(grow.slots() * 3, (live + 1) * 8) << live;
    EXPECT_TRUE(grow.slots() == 16 || grow.slots() * 3 < (live + 1) * 16) << live;
    for (size_t i = 1; i <= live; ++i) {
      uint64_t h = i * 0x9e3779b97f4a7c15ull;
      ASSERT_EQ(find_exact(start, h, PartitionId(i)), PartitionId(i)) << live;
      ASSERT_EQ(find_exact(grow, h, PartitionId(i)), PartitionId(i)) << live;
    }
  }
}

// A rebuild inserts its adds a batch at a time in the order of their home slots: across
// several batches, with a run of equal hashes homed at the table's last slot (it wraps to the
// front, where later batches insert), every id is found once.
TEST(PartitionNames, ARebuildOfSeveralBatchesFindsEveryId) {
  constexpr size_t kLive = 2'200'003;  // three batches
  PartitionNames t;
  uint64_t last_home = ~uint64_t{0};  // home() keeps the low bits: the last slot
  auto hash_of = [&](size_t i) { return i % 2000 == 0 ? last_home : i * 0x9e3779b97f4a7c15ull; };
  t.rebuild(
      kLive,
      [&](auto add) {
        for (size_t i = 1; i <= kLive; ++i) add(hash_of(i), PartitionId(i));
      },
      PartitionNames::Fill::start);
  ASSERT_EQ(t.size(), kLive);
  for (size_t i = 1; i <= kLive; ++i)
    ASSERT_EQ(find_exact(t, hash_of(i), PartitionId(i)), PartitionId(i)) << i;
  EXPECT_FALSE(find_exact(t, last_home, PartitionId(kLive + 1)));
}

TEST(PartitionNames, HashesDifferByQueueAndName) {
  EXPECT_NE(PartitionNames::hash(QueueId(1), "a"), PartitionNames::hash(QueueId(2), "a"));
  EXPECT_NE(PartitionNames::hash(QueueId(1), "a"), PartitionNames::hash(QueueId(1), "b"));
  EXPECT_EQ(PartitionNames::hash(QueueId(1), "a"), PartitionNames::hash(QueueId(1), "a"));
}

}  // namespace
}  // namespace queen::testing
