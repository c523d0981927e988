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
  size_t mask = slots - 1;
  for (const Slot& s : old) {
    if (s.id == 0) continue;
    size_t i = s.hash & mask;
    while (slots_[i].id != 0) i = (i + 1) & mask;
    slots_[i] = s;
  }
}

void PartitionNames::insert(uint64_t h, PartitionId id) {
  QUEEN_ASSERT(id.value != 0, "partition ids start at 1");
  reserve(count_ + 1);
  size_t mask = slots_.size() - 1;
  size_t i = h & mask;
  while (slots_[i].id != 0) i = (i + 1) & mask;
  slots_[i] = Slot{h, id.value};
  ++count_;
}

void PartitionNames::erase(uint64_t h, PartitionId id) {
  if (slots_.empty()) return;
  size_t mask = slots_.size() - 1;
  size_t i = h & mask;
  while (slots_[i].id != 0 && slots_[i].id != id.value) i = (i + 1) & mask;
  if (slots_[i].id == 0) return;
  // Backward shift: each later slot of the run that may move into the hole does, so every
  // remaining id stays reachable from its home slot without tombstones.
  for (size_t j = (i + 1) & mask; slots_[j].id != 0; j = (j + 1) & mask) {
    size_t k = slots_[j].hash & mask;
    bool stays = i <= j ? (i < k && k <= j) : (i < k || k <= j);
    if (stays) continue;
    slots_[i] = slots_[j];
    i = j;
  }
  slots_[i] = Slot{};
  if (--count_ == 0) slots_ = {};
}

}  // namespace queen
