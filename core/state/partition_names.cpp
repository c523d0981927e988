#include "core/state/partition_names.h"

#include <xxhash.h>

#include "core/common/assert.h"

namespace queen {

namespace {

constexpr size_t kSlotsMin = 16;

}  // namespace

uint64_t PartitionNames::hash(QueueId queue, std::string_view name) {
  return XXH3_64bits_withSeed(name.data(), name.size(), queue.value);
}

void PartitionNames::reserve(size_t n) {
  size_t want = kSlotsMin;
  while (want * 3 < n * 4) want *= 2;
  if (want > slots_.size()) grow_to(want);
}

void PartitionNames::grow_to(size_t slots) {
  std::vector<Slot> old = std::move(slots_);
  slots_.assign(slots, Slot{});
  for (const Slot& s : old)
    if (s.id != 0) slots_[free_slot(s.hash)] = s;
}

size_t PartitionNames::free_slot(uint64_t h) const {
  return probe::walk(slots_, h & (slots_.size() - 1), [](const Slot& s) { return s.id == 0; });
}

void PartitionNames::insert(uint64_t h, PartitionId id) {
  QUEEN_ASSERT(id.value != 0, "partition ids start at 1");
  reserve(count_ + 1);
  slots_[free_slot(h)] = Slot{h, id.value};
  ++count_;
}

void PartitionNames::erase(uint64_t h, PartitionId id) {
  if (slots_.empty()) return;
  size_t mask = slots_.size() - 1;
  size_t i =
      probe::walk(slots_, h & mask, [&](const Slot& s) { return s.id == 0 || s.id == id.value; });
  if (slots_[i].id == 0) return;
  probe::erase_at(
      slots_, i, [](const Slot& s) { return s.id != 0; },
      [&](const Slot& s) { return s.hash & mask; });
  if (--count_ == 0) slots_ = {};
}

}  // namespace queen
