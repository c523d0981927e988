// Every consumer group's cursor rows, keyed by group name and then partition id. Walks go in
// (group, partition) order, as over a std::map<CursorKey, CursorRow>, but the group's name is
// kept once per group rather than once per row: a group that has read a million partitions
// holds a million rows, and a name in each made a row's node a sixth larger. Rows are stable
// in memory until erased. Appending rows in partition order (a checkpoint's decode) costs no
// search.
#pragma once

#include <cstddef>
#include <iterator>
#include <map>
#include <string>
#include <string_view>
#include <utility>

#include "core/common/assert.h"
#include "core/common/types.h"
#include "core/state/cursor.h"

namespace queen {

class CursorTable {
 public:
  using Rows = std::map<PartitionId, CursorRow>;

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  void clear() {
    groups_.clear();
    size_ = 0;
  }

  const CursorRow* find(std::string_view group, PartitionId pid) const {
    const Rows* rows = this->group(group);
    if (!rows) return nullptr;
    auto it = rows->find(pid);
    return it == rows->end() ? nullptr : &it->second;
  }
  CursorRow* find(std::string_view group, PartitionId pid) {
    return const_cast<CursorRow*>(std::as_const(*this).find(group, pid));
  }
  const CursorRow& at(std::string_view group, PartitionId pid) const {
    const CursorRow* row = find(group, pid);
    QUEEN_ASSERT(row != nullptr, "the cursor row is known to exist");
    return *row;
  }
  CursorRow& at(std::string_view group, PartitionId pid) {
    return const_cast<CursorRow&>(std::as_const(*this).at(group, pid));
  }

  // The group's rows in partition order, or null when it has none.
  const Rows* group(std::string_view name) const {
    auto it = groups_.find(name);
    return it == groups_.end() ? nullptr : &it->second;
  }

  // Inserts `row` unless the group already has one on `pid`; returns the row kept there and
  // whether it was inserted.
  std::pair<CursorRow*, bool> try_emplace(std::string_view group, PartitionId pid, CursorRow row) {
    Rows& rows = group_rows(group);
    if (rows.empty() || rows.rbegin()->first < pid) {
      ++size_;
      return {&rows.emplace_hint(rows.end(), pid, std::move(row))->second, true};
    }
    auto [it, inserted] = rows.try_emplace(pid, std::move(row));
    size_ += inserted ? 1 : 0;
    return {&it->second, inserted};
  }
  // Sets the group's row on `pid`, inserting or replacing it.
  void put(std::string_view group, PartitionId pid, CursorRow row) {
    auto [at, inserted] = try_emplace(group, pid, CursorRow{});
    *at = std::move(row);
  }

  bool erase(std::string_view group, PartitionId pid) {
    auto it = groups_.find(group);
    if (it == groups_.end() || it->second.erase(pid) == 0) return false;
    --size_;
    if (it->second.empty()) groups_.erase(it);
    return true;
  }
  // Erases every group's row on `pid`: one lookup per group.
  void erase_partition(PartitionId pid) {
    for (auto it = groups_.begin(); it != groups_.end();) {
      size_ -= it->second.erase(pid);
      it = it->second.empty() ? groups_.erase(it) : std::next(it);
    }
  }
  // Erases the rows for which pred(group, pid, row) holds; returns how many.
  template <class Pred>
  size_t erase_if(Pred pred) {
    size_t erased = 0;
    for (auto git = groups_.begin(); git != groups_.end();) {
      const std::string& name = git->first;
      erased += std::erase_if(git->second,
                              [&](const auto& kv) { return pred(name, kv.first, kv.second); });
      git = git->second.empty() ? groups_.erase(git) : std::next(git);
    }
    size_ -= erased;
    return erased;
  }

  // Calls f(group, pid, row) for every row in (group, partition) order.
  template <class F>
  void for_each(F f) const {
    for (const auto& [name, rows] : groups_)
      for (const auto& [pid, row] : rows) f(name, pid, row);
  }

  // Reads one group's rows alongside a walk over partitions in id order: each row is read
  // once, without a lookup.
  class Walk {
   public:
    Walk(const CursorTable& table, std::string_view group, PartitionId from = PartitionId{}) {
      if (const Rows* rows = table.group(group)) {
        it_ = rows->lower_bound(from);
        end_ = rows->end();
      }
    }
    // The group's row on `pid`; `pid` must not be below the one asked before.
    const CursorRow* at(PartitionId pid) {
      while (it_ != end_ && it_->first < pid) ++it_;
      return it_ != end_ && it_->first == pid ? &it_->second : nullptr;
    }

   private:
    Rows::const_iterator it_{};
    Rows::const_iterator end_{};
  };

  // Calls f(pid, row) for each of the group's rows in partition order.
  template <class F>
  void for_each_in(std::string_view name, F f) const {
    if (const Rows* rows = group(name))
      for (const auto& [pid, row] : *rows) f(pid, row);
  }

  bool operator==(const CursorTable& o) const { return groups_ == o.groups_; }

 private:
  Rows& group_rows(std::string_view name) {
    auto it = groups_.find(name);
    if (it == groups_.end()) it = groups_.emplace(std::string(name), Rows{}).first;
    return it->second;
  }

  std::map<std::string, Rows, std::less<>> groups_;
  size_t size_ = 0;
};

}  // namespace queen
