// A log that contradicts the store (a diverged or damaged node) stops the node with a message
// that says what was found and how to repair it, instead of an assertion at every start.
#include <gtest/gtest.h>

#include "core/state/store.h"

namespace queen {
namespace {

Entry entry(uint64_t index, std::vector<Effect> effects) {
  return Entry{LogIndex(index), Term(3), static_cast<int64_t>(index) * 1000, std::move(effects)};
}

EffAppend append(PartitionId pid, uint64_t base, uint32_t count) {
  EffAppend a;
  a.queue = QueueId(1);
  a.pid = pid;
  a.base = Offset(base);
  a.count = count;
  return a;
}

TEST(DivergedLog, AnAppendThatLeavesAGapIsAnErrorNamingTheRepair) {
  Store s;
  ASSERT_TRUE(s.apply(entry(1, {EffCreateQueue{QueueId(1), "q", QueueOptions{}},
                                EffCreatePartition{PartitionId(1), QueueId(1), "p"},
                                append(PartitionId(1), 0, 2)}),
                      {})
                  .ok());
  Status st = s.apply(entry(2, {append(PartitionId(1), 5, 1)}), {});  // offsets 2-4 missing
  ASSERT_FALSE(st.ok());
  const std::string& why = st.error().message;
  EXPECT_NE(why.find("entry 2"), std::string::npos) << why;
  EXPECT_NE(why.find("offset 5 where the next is 2"), std::string::npos) << why;
  EXPECT_NE(why.find("QUEEN_RAFT_DIR"), std::string::npos) << why;
}

TEST(DivergedLog, EffectsOnUnknownQueuesAndPartitionsAreErrors) {
  Store s;
  EXPECT_FALSE(s.apply(entry(1, {append(PartitionId(9), 0, 1)}), {}).ok());
  Store t;
  EXPECT_FALSE(t.apply(entry(1, {EffCreatePartition{PartitionId(1), QueueId(4), "p"}}), {}).ok());
  Store u;
  EXPECT_FALSE(u.apply(entry(1, {EffCreateQueue{QueueId(2), "q", QueueOptions{}}}), {}).ok());
}

}  // namespace
}  // namespace queen
