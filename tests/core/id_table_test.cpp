// IdTable: the store's partition table holds what a std::map keyed by id would, in the same
// order, after any mix of adds (ids rising, with gaps) and erases, including erases that empty
// whole chunks and leave single survivors; and sparse chunks are merged.
#include "core/state/id_table.h"

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <iterator>
#include <map>

#include "core/common/types.h"

namespace queen::testing {
namespace {

struct Value {
  PartitionId id;
  uint64_t payload = 0;
  bool operator==(const Value&) const = default;
};

void check_same(const IdTable<Value>& t, const std::map<uint64_t, uint64_t>& model) {
  RC_ASSERT(t.size() == model.size());
  auto it = t.begin();
  for (const auto& [id, payload] : model) {
    RC_ASSERT(it != t.end());
    RC_ASSERT(it->id.value == id);
    RC_ASSERT(it->payload == payload);
    const Value* found = t.find(PartitionId(id));
    RC_ASSERT(found != nullptr);
    RC_ASSERT(found->payload == payload);
    ++it;
  }
  RC_ASSERT(it == t.end());
}

RC_GTEST_PROP(IdTable, HoldsWhatAnOrderedMapHolds, ()) {
  IdTable<Value> t;
  std::map<uint64_t, uint64_t> model;
  uint64_t next_id = *rc::gen::inRange<uint64_t>(1, 100);
  const auto steps = *rc::gen::inRange<int>(1, 400);
  for (int s = 0; s < steps; ++s) {
    int op = *rc::gen::inRange<int>(0, 10);
    if (op < 6 || model.empty()) {
      int burst = *rc::gen::inRange<int>(1, 130);
      for (int k = 0; k < burst; ++k) {
        next_id += *rc::gen::inRange<uint64_t>(1, 4);
        t.push_back(Value{PartitionId(next_id), next_id * 7});
        model[next_id] = next_id * 7;
      }
    } else if (op < 9) {
      // A run of erases from a random place: it empties chunks, or leaves a few in each.
      auto it = model.begin();
      std::advance(it, *rc::gen::inRange<size_t>(0, model.size()));
      int run = *rc::gen::inRange<int>(1, 400);
      // Keep none, every other one, or one in a chunk's worth.
      int keep_every = *rc::gen::element<int>(0, 2, 64);
      for (int k = 0; k < run && it != model.end(); ++k) {
        if (keep_every != 0 && k % keep_every == keep_every - 1) {
          ++it;
          continue;
        }
        RC_ASSERT(t.erase(PartitionId(it->first)));
        it = model.erase(it);
      }
    } else {
      uint64_t probe = *rc::gen::inRange<uint64_t>(0, next_id + 2);
      RC_ASSERT(t.erase(PartitionId(probe)) == (model.erase(probe) == 1));
    }
    uint64_t probe = *rc::gen::inRange<uint64_t>(0, next_id + 2);
    auto ub = t.upper_bound(PartitionId(probe));
    auto mub = model.upper_bound(probe);
    RC_ASSERT((ub == t.end()) == (mub == model.end()));
    if (mub != model.end()) RC_ASSERT(ub->id.value == mub->first);
    RC_ASSERT(t.contains(PartitionId(probe)) == model.contains(probe));
  }
  check_same(t, model);
  IdTable<Value> copy = t;
  RC_ASSERT(copy == t);
}

TEST(IdTable, SparseChunksAreMerged) {
  constexpr uint64_t kChunks = 1000;
  IdTable<Value> t;
  for (uint64_t id = 1; id <= kChunks * IdTable<Value>::kChunkSlots; ++id)
    t.push_back(Value{PartitionId(id), id});
  EXPECT_EQ(t.chunks(), kChunks);
  // One survivor in each chunk: without merging, 1000 chunks would hold 1000 values.
  for (uint64_t id = 1; id <= kChunks * IdTable<Value>::kChunkSlots; ++id)
    if (id % IdTable<Value>::kChunkSlots != 0) {
      EXPECT_TRUE(t.erase(PartitionId(id)));
    }
  EXPECT_EQ(t.size(), kChunks);
  EXPECT_LT(t.chunks(), kChunks / 2);
  uint64_t expect = IdTable<Value>::kChunkSlots;
  for (const Value& v : t) {
    EXPECT_EQ(v.id.value, expect);
    expect += IdTable<Value>::kChunkSlots;
  }
  EXPECT_FALSE(t.erase(PartitionId(1)));
}

TEST(IdTable, AddsAfterEmptyingEverything) {
  IdTable<Value> t;
  for (uint64_t id = 1; id <= 300; ++id) t.push_back(Value{PartitionId(id), id});
  for (uint64_t id = 1; id <= 300; ++id) EXPECT_TRUE(t.erase(PartitionId(id)));
  EXPECT_TRUE(t.empty());
  EXPECT_EQ(t.begin(), t.end());
  EXPECT_EQ(t.last_id(PartitionId(0)), PartitionId(0));
  t.push_back(Value{PartitionId(301), 1});
  ASSERT_NE(t.find(PartitionId(301)), nullptr);
  EXPECT_EQ(t.last_id(PartitionId(0)), PartitionId(301));
  EXPECT_EQ(t.upper_bound(PartitionId(5))->id, PartitionId(301));
}

}  // namespace
}  // namespace queen::testing
