// The consumption engine's cursor rows: the store's committed rows, overlaid with the rows the
// engine changed that the store has not applied as they are now, and with the erases it has
// not applied yet. A row nobody is changing exists once, in the store: a group that has read a
// million partitions holds a million rows, and a second copy in the engine doubled them.
//
// Contract: reads see the overlay's row, else nothing if the row was erased here, else the
// committed row. A row is changed only through mut() or put(), which copy it into the overlay
// first, so the store's rows are never written here. settle() is called for each cursor
// effect the store applied: a row the store now holds exactly as the overlay does leaves the
// overlay, and an erase the store applied leaves the erased set.
#pragma once

#include <set>
#include <string>
#include <string_view>
#include <utility>

#include "core/common/assert.h"
#include "core/state/cursor_table.h"
#include "core/state/store.h"

namespace queen {

class EngineRows {
 public:
  explicit EngineRows(const CursorTable& committed) : committed_(committed) {}

  void clear() {
    overlay_.clear();
    erased_.clear();
  }
  size_t overlay_size() const { return overlay_.size() + erased_.size(); }

  const CursorRow* find(std::string_view group, PartitionId pid) const {
    if (const CursorRow* row = overlay_.find(group, pid)) return row;
    if (is_erased(group, pid)) return nullptr;
    return committed_.find(group, pid);
  }
  const CursorRow& at(std::string_view group, PartitionId pid) const {
    const CursorRow* row = find(group, pid);
    QUEEN_ASSERT(row != nullptr, "the cursor row is known to exist");
    return *row;
  }
  // The row to change, or null when there is none.
  CursorRow* mut(std::string_view group, PartitionId pid) {
    if (CursorRow* row = overlay_.find(group, pid)) return row;
    if (is_erased(group, pid)) return nullptr;
    const CursorRow* committed = committed_.find(group, pid);
    if (!committed) return nullptr;
    return overlay_.try_emplace(group, pid, *committed).first;
  }
  CursorRow& mut_at(std::string_view group, PartitionId pid) {
    CursorRow* row = mut(group, pid);
    QUEEN_ASSERT(row != nullptr, "the cursor row is known to exist");
    return *row;
  }
  // Sets the row, inserting or replacing it.
  CursorRow& put(std::string_view group, PartitionId pid, CursorRow row) {
    if (!erased_.empty()) erased_.erase(CursorKey{std::string(group), pid});
    auto [at, inserted] = overlay_.try_emplace(group, pid, CursorRow{});
    *at = std::move(row);
    return *at;
  }

  // Erases `group`'s rows for which pred(pid, row) holds; returns how many. Reads only that
  // group's committed rows.
  template <class Pred>
  size_t erase_group_if(std::string_view group, Pred pred) {
    size_t erased = 0;
    if (const CursorTable::Rows* rows = committed_.group(group)) {
      for (const auto& [pid, row] : *rows) {
        if (is_erased(group, pid) || overlay_.find(group, pid) || !pred(pid, row)) continue;
        erased_.insert(CursorKey{std::string(group), pid});
        ++erased;
      }
    }
    erased += overlay_.erase_if([&](const std::string& g, PartitionId pid, const CursorRow& row) {
      if (g != group || !pred(pid, row)) return false;
      if (committed_.find(group, pid)) erased_.insert(CursorKey{g, pid});
      return true;
    });
    return erased;
  }

  // Forgets every row and erase on the partitions for which gone(pid) holds, which the store
  // no longer holds (so it has no committed row there either).
  template <class Pred>
  void drop_partitions_if(Pred gone) {
    overlay_.erase_if(
        [&](const std::string&, PartitionId pid, const CursorRow&) { return gone(pid); });
    std::erase_if(erased_, [&](const CursorKey& key) { return gone(key.pid); });
  }

  // Erases every group's row on `pid`, which the store no longer holds.
  void erase_partition(PartitionId pid) {
    overlay_.erase_partition(pid);
    std::erase_if(erased_, [&](const CursorKey& key) { return key.pid == pid; });
  }

  // Calls f(group, pid, row) for every row once: the committed ones in (group, partition)
  // order, then those only in the overlay, in the same order.
  template <class F>
  void for_each(F f) const {
    committed_.for_each([&](const std::string& group, PartitionId pid, const CursorRow& row) {
      if (const CursorRow* changed = overlay_.find(group, pid)) {
        f(group, pid, *changed);
      } else if (!is_erased(group, pid)) {
        f(group, pid, row);
      }
    });
    overlay_.for_each([&](const std::string& group, PartitionId pid, const CursorRow& row) {
      if (!committed_.find(group, pid)) f(group, pid, row);
    });
  }

  // After the store applied a cursor row or its erase.
  void settle(std::string_view group, PartitionId pid) {
    const CursorRow* committed = committed_.find(group, pid);
    if (!committed && !erased_.empty()) erased_.erase(CursorKey{std::string(group), pid});
    const CursorRow* changed = overlay_.find(group, pid);
    if (committed && changed && *committed == *changed) overlay_.erase(group, pid);
  }

  // Reads one group's rows alongside a walk over partitions in id order.
  class Walk {
   public:
    Walk(const EngineRows& rows, std::string_view group, PartitionId from = PartitionId{})
        : rows_(rows),
          group_(group),
          committed_(rows.committed_, group, from),
          overlay_(rows.overlay_, group, from) {}
    // The group's row on `pid`; `pid` must not be below the one asked before.
    const CursorRow* at(PartitionId pid) {
      const CursorRow* committed = committed_.at(pid);
      if (const CursorRow* changed = overlay_.at(pid)) return changed;
      return committed && !rows_.is_erased(group_, pid) ? committed : nullptr;
    }

   private:
    const EngineRows& rows_;
    std::string_view group_;
    CursorTable::Walk committed_;
    CursorTable::Walk overlay_;
  };

 private:
  bool is_erased(std::string_view group, PartitionId pid) const {
    return !erased_.empty() && erased_.contains(CursorKey{std::string(group), pid});
  }

  const CursorTable& committed_;
  CursorTable overlay_;
  std::set<CursorKey> erased_;  // committed rows erased here, until the store erases them
};

}  // namespace queen
