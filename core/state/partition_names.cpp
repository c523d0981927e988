#include "core/state/partition_names.h"

#include <xxhash.h>

#include <algorithm>
#include <bit>

#include "core/common/assert.h"

namespace queen {

namespace {

constexpr size_t kSlotsMin = 16;

}  // namespace

uint64_t PartitionNames::hash(QueueId queue, std::string_view name) {
  return XXH3_64bits_withSeed(name.data(), name.size(), queue.value);
}

size_t PartitionNames::slots_for(size_t live, Fill fill) {
  // At most num/den full: 2/3 (start) or 3/8 (grow).
  size_t num = fill == Fill::start ? 2 : 3;
  size_t den = fill == Fill::start ? 3 : 8;
  size_t want = kSlotsMin;
  while (want * num < (live + 1) * den) want *= 2;
  return want;
}

void PartitionNames::reset(size_t live, Fill fill) {
  slots_.assign(slots_for(live, fill), kEmpty);
  count_ = 0;
  erased_ = 0;
}

void PartitionNames::insert(uint64_t h, PartitionId id) {
  QUEEN_ASSERT(id.value != 0 && id.value < kIdsMax, "partition ids are in [1, 2^48)");
  QUEEN_ASSERT(has_room(), "the caller rebuilds a full table first");
  size_t i = probe::walk(slots_, home(h), [](uint64_t s) { return s <= kErased; });
  if (slots_[i] == kErased) --erased_;
  slots_[i] = (id.value << 16) | tag_of(h);
  ++count_;
}

void PartitionNames::insert_batch(const std::vector<Add>& adds, BatchScratch& scratch) {
  if (adds.empty()) return;
  int slot_bits = std::countr_zero(slots_.size());
  int shift = std::max(0, slot_bits - kOrderBits);
  std::vector<uint32_t>& starts = scratch.starts;
  starts.assign((size_t{1} << (slot_bits - shift)) + 1, 0);
  for (const Add& a : adds) ++starts[(home(a.h) >> shift) + 1];
  for (size_t b = 1; b < starts.size(); ++b) starts[b] += starts[b - 1];
  scratch.ordered.resize(adds.size());
  for (const Add& a : adds) scratch.ordered[starts[home(a.h) >> shift]++] = a;
  for (const Add& a : scratch.ordered) insert(a.h, a.id);
}

PartitionNames::Refill::Refill(PartitionNames& table, size_t live, Fill fill) : table_(table) {
  table_.reset(live, fill);
  batch_.reserve(std::min(live, kBatchAdds));
}

void PartitionNames::Refill::flush() {
  table_.insert_batch(batch_, scratch_);
  batch_.clear();
}

void PartitionNames::erase(uint64_t h, PartitionId id) {
  if (count_ == 0) return;
  size_t i = probe::walk(
      slots_, home(h), [&](uint64_t s) { return s == kEmpty || (s > kErased && id_of(s) == id); });
  if (slots_[i] == kEmpty) return;
  slots_[i] = kErased;
  ++erased_;
  if (--count_ == 0) {
    slots_ = {};
    erased_ = 0;
  }
}

}  // namespace queen
