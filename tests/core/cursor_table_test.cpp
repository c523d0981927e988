// CursorTable: the cursor rows held by group and then partition hold what a std::map keyed by
// (group, partition) would, walked in the same order, after any mix of inserts (in and out of
// partition order), replaces, erases of one row, of a partition's rows in every group and of
// rows chosen by a predicate; a Walk over partitions in id order finds each group's rows; and
// a group whose last row goes is gone from the table.
#include "core/state/cursor_table.h"

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/common/types.h"

namespace queen::testing {
namespace {

using Model = std::map<std::pair<std::string, uint64_t>, uint64_t>;  // -> row.next

CursorRow row_at(uint64_t next) {
  CursorRow row;
  row.next = Offset(next);
  return row;
}

void check_same(const CursorTable& t, const Model& model) {
  RC_ASSERT(t.size() == model.size());
  RC_ASSERT(t.empty() == model.empty());
  std::vector<Model::value_type> walked;
  t.for_each([&](const std::string& group, PartitionId pid, const CursorRow& row) {
    walked.push_back({{group, pid.value}, row.next.value});
  });
  RC_ASSERT(walked == std::vector<Model::value_type>(model.begin(), model.end()));
  for (const char* group : {"a", "b", "c"}) {
    bool has_rows = false;
    CursorTable::Walk walk(t, group);
    for (uint64_t pid = 1; pid <= 40; ++pid) {
      auto it = model.find({group, pid});
      const CursorRow* found = t.find(group, PartitionId(pid));
      const CursorRow* walked_row = walk.at(PartitionId(pid));
      RC_ASSERT((found != nullptr) == (it != model.end()));
      RC_ASSERT(walked_row == found);
      if (found) RC_ASSERT(found->next.value == it->second);
      has_rows = has_rows || found != nullptr;
    }
    RC_ASSERT((t.group(group) != nullptr) == has_rows);
  }
}

RC_GTEST_PROP(CursorTable, HoldsWhatAMapByGroupAndPartitionHolds, ()) {
  CursorTable t;
  Model model;
  auto steps = *rc::gen::inRange(1, 200);
  for (int i = 0; i < steps; ++i) {
    std::string group(1, *rc::gen::element('a', 'b', 'c'));
    uint64_t pid = *rc::gen::inRange<uint64_t>(1, 41);
    uint64_t next = *rc::gen::inRange<uint64_t>(0, 1000);
    switch (*rc::gen::inRange(0, 6)) {
      case 0: {
        t.put(group, PartitionId(pid), row_at(next));
        model[{group, pid}] = next;
        break;
      }
      case 1: {
        auto [row, inserted] = t.try_emplace(group, PartitionId(pid), row_at(next));
        auto [it, model_inserted] = model.try_emplace({group, pid}, next);
        RC_ASSERT(inserted == model_inserted);
        RC_ASSERT(row->next.value == it->second);
        break;
      }
      case 2:
        RC_ASSERT(t.erase(group, PartitionId(pid)) == (model.erase({group, pid}) == 1));
        break;
      case 3:
        t.erase_partition(PartitionId(pid));
        std::erase_if(model, [&](const auto& kv) { return kv.first.second == pid; });
        break;
      case 4: {  // rows of an odd cursor in one group
        size_t erased = t.erase_if([&](const std::string& g, PartitionId, const CursorRow& r) {
          return g == group && r.next.value % 2 == 1;
        });
        size_t model_erased = std::erase_if(
            model, [&](const auto& kv) { return kv.first.first == group && kv.second % 2 == 1; });
        RC_ASSERT(erased == model_erased);
        break;
      }
      default:  // a row appended past the group's last, as a checkpoint's decode does
        uint64_t past = 1;
        for (const auto& [key, v] : model)
          if (key.first == group) past = key.second + 1;
        if (past > 40) break;
        t.put(group, PartitionId(past), row_at(next));
        model[{group, past}] = next;
        break;
    }
    check_same(t, model);
  }
  CursorTable copy = t;
  RC_ASSERT(copy == t);
  if (!model.empty()) {
    copy.at(model.begin()->first.first, PartitionId(model.begin()->first.second)).next =
        Offset(5000);
    RC_ASSERT(!(copy == t));
  }
}

TEST(CursorTable, WalkStartsAtTheGivenPartition) {
  CursorTable t;
  for (uint64_t pid : {2, 5, 9}) t.put("g", PartitionId(pid), row_at(pid * 10));
  t.put("h", PartitionId(6), row_at(60));
  CursorTable::Walk walk(t, "g", PartitionId(5));
  EXPECT_EQ(walk.at(PartitionId(2)), nullptr);  // before the walk's start
  ASSERT_NE(walk.at(PartitionId(5)), nullptr);
  EXPECT_EQ(walk.at(PartitionId(5))->next, Offset(50));
  EXPECT_EQ(walk.at(PartitionId(6)), nullptr);  // another group's row is not this group's
  EXPECT_EQ(walk.at(PartitionId(9))->next, Offset(90));
  EXPECT_EQ(walk.at(PartitionId(10)), nullptr);
  CursorTable::Walk none(t, "nobody");
  EXPECT_EQ(none.at(PartitionId(2)), nullptr);
}

}  // namespace
}  // namespace queen::testing
