// PartitionNames: the store's index from (queue, partition name) to partition id, an
// open-addressing table of (hash, id) slots, 16 bytes each at most 3/4 full, rather than a
// std::map node and a copy of the name for every partition (about 80 bytes). The names stay
// in the partitions; a lookup compares them through a callback. The table is never iterated,
// so nothing depends on its order, and it is derived state: rebuilt, never encoded.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "core/common/linear_probe.h"
#include "core/common/types.h"

namespace queen {

class PartitionNames {
 public:
  static uint64_t hash(QueueId queue, std::string_view name);

  // The id whose slot has hash `h` and for which `same(id)` holds.
  template <class Same>
  std::optional<PartitionId> find(uint64_t h, Same same) const {
    if (slots_.empty()) return std::nullopt;
    size_t i = probe::walk(slots_, h & (slots_.size() - 1), [&](const Slot& s) {
      return s.id == 0 || (s.hash == h && same(PartitionId(s.id)));
    });
    if (slots_[i].id == 0) return std::nullopt;
    return PartitionId(slots_[i].id);
  }
  // Adds `id` under `h` (the caller checked that its name is new to its queue).
  void insert(uint64_t h, PartitionId id);
  // Removes `id`, filed under `h`; nothing when it is not there.
  void erase(uint64_t h, PartitionId id);
  size_t size() const { return count_; }
  void reserve(size_t n);

 private:
  struct Slot {
    uint64_t hash = 0;
    uint64_t id = 0;  // 0: empty (partition ids start at 1)
  };
  void grow_to(size_t slots);
  size_t free_slot(uint64_t h) const;
  std::vector<Slot> slots_;
  size_t count_ = 0;
};

}  // namespace queen
