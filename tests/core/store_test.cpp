// The store applied by hand: what deleting a partition takes with it.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <map>
#include <set>
#include <tuple>
#include <vector>

#include "core/common/assert.h"
#include "core/state/store.h"

namespace queen::testing {
namespace {

// An append row keeps its record's location in 20 bytes: any queue's own log, any shared log
// (the id's top bit), file number, length and position come back as they were set.
RC_GTEST_PROP(AppendRowLocation, ComesBackAsItWasSet, ()) {
  uint64_t number = *rc::gen::inRange<uint64_t>(0, uint64_t{1} << 31);
  bool shared = *rc::gen::arbitrary<bool>();
  RecordLocation w{LogId(shared ? kSharedLogBit | number : number), *rc::gen::arbitrary<uint32_t>(),
                   *rc::gen::arbitrary<uint32_t>(), *rc::gen::arbitrary<uint64_t>()};
  AppendRow row;
  row.set_where(w);
  RC_ASSERT(row.where() == w);
}

struct Applier {
  Store s;
  uint64_t index = 0;
  void apply(std::vector<Effect> effects) {
    Entry e{LogIndex(++index), Term(1), static_cast<int64_t>(index) * 1000, std::move(effects)};
    QUEEN_ASSERT(s.apply(e, {}).ok(), "the test's entries fit the store");
  }
};

// Groups with cursors on overlapping sets of partitions; deleting partitions removes exactly
// their cursors, in every group (the cursors are found a group at a time), and no other.
RC_GTEST_PROP(Store, DeletingAPartitionTakesItsCursorsInEveryGroupAndNoOther, ()) {
  Applier a;
  a.apply({EffCreateQueue{QueueId(1), "q", QueueOptions{}}});
  const uint64_t partitions = 12;
  for (uint64_t i = 1; i <= partitions; ++i)
    a.apply({EffCreatePartition{PartitionId(i), QueueId(1), "p" + std::to_string(i)}});
  std::set<std::pair<std::string, uint64_t>> model;
  auto cursors = *rc::gen::container<std::vector<std::pair<uint8_t, uint8_t>>>(
      rc::gen::pair(rc::gen::inRange<uint8_t>(0, 5), rc::gen::inRange<uint8_t>(1, partitions + 1)));
  for (auto [g, p] : cursors) {
    std::string group = g == 0 ? "" : "g" + std::to_string(g);
    a.apply({EffCursor{group, PartitionId(p), CursorRow{}}});
    model.insert({group, p});
  }
  auto deletes =
      *rc::gen::container<std::vector<uint8_t>>(rc::gen::inRange<uint8_t>(1, partitions + 1));
  for (uint8_t p : deletes) {
    a.apply({EffPartitionDelete{QueueId(1), PartitionId(p)}});
    std::erase_if(model, [&](const auto& c) { return c.second == p; });
  }
  std::set<std::pair<std::string, uint64_t>> left;
  a.s.cursors().for_each([&](const std::string& group, PartitionId pid, const CursorRow&) {
    left.insert({group, pid.value});
  });
  RC_ASSERT(left == model);
}

}  // namespace
}  // namespace queen::testing
