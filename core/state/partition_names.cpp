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

void PartitionNames::reset(size_t live, Fill fill) {
  size_t want = kSlotsMin;
  if (fill == Fill::start) {
    while (want * 2 < (live + 1) * 3) want *= 2;
  } else {
    while (want * 3 < (live + 1) * 8) want *= 2;
  }
  slots_.assign(want, kEmpty);
  count_ = 0;
  erased_ = 0;
}

void PartitionNames::insert(uint64_t h, PartitionId id) {
  QUEEN_ASSERT(id.value != 0 && id.value < kIdsMax, "partition ids are in [1, 2^48)");
  QUEEN_ASSERT(has_room(), "the caller rebuilds a full table first");
  size_t i = probe::walk(slots_, h & (slots_.size() - 1), [](uint64_t s) { return s <= kErased; });
  if (slots_[i] == kErased) --erased_;
  slots_[i] = (id.value << 16) | tag_of(h);
  ++count_;
}

void PartitionNames::erase(uint64_t h, PartitionId id) {
  if (count_ == 0) return;
  size_t i = probe::walk(slots_, h & (slots_.size() - 1), [&](uint64_t s) {
    return s == kEmpty || (s > kErased && id_of(s) == id);
  });
  if (slots_[i] == kEmpty) return;
  slots_[i] = kErased;
  ++erased_;
  if (--count_ == 0) {
    slots_ = {};
    erased_ = 0;
  }
}

}  // namespace queen
