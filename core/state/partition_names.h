// PartitionNames: the store's index from (queue, partition name) to partition id, an
// open-addressing table of 8-byte slots (the id and 16 more bits of the name's hash), at most
// 3/4 full counting erased slots, rather than a std::map node and a copy of the name for
// every partition (about 80 bytes). The names stay in the partitions; a lookup compares them
// through a callback. A slot does not keep the whole hash, so erasing leaves a tombstone and
// the table is rebuilt from the partitions (the caller's list) once it has no room: the
// rebuild sizes it to its live ids, so it also shrinks after mass deletions. The table is
// never iterated, so nothing depends on its order, and it is derived state: never encoded.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "core/common/linear_probe.h"
#include "core/common/types.h"

namespace queen {

class PartitionNames {
 public:
  // Ids must stay below 2^48 (a slot keeps 48 bits of id).
  static constexpr uint64_t kIdsMax = uint64_t{1} << 48;

  static uint64_t hash(QueueId queue, std::string_view name);

  // The id whose slot matches `h` and for which `same(id)` holds.
  template <class Same>
  std::optional<PartitionId> find(uint64_t h, Same same) const {
    if (slots_.empty()) return std::nullopt;
    uint64_t tag = tag_of(h);
    size_t i = probe::walk(slots_, home(h), [&](uint64_t s) {
      return s == kEmpty || (s > kErased && (s & kTagMask) == tag && same(id_of(s)));
    });
    if (slots_[i] == kEmpty) return std::nullopt;
    return id_of(slots_[i]);
  }
  // Whether insert() may be called now; if not, rebuild() first.
  bool has_room() const { return (count_ + erased_ + 1) * 4 <= slots_.size() * 3; }
  // Adds `id` under `h` (the caller checked that its name is new to its queue).
  void insert(uint64_t h, PartitionId id);
  // Removes `id`, filed under `h`; nothing when it is not there.
  void erase(uint64_t h, PartitionId id);
  // How full a rebuilt table may be: `grow` (a full table's rebuild) at most 3/8, so that it
  // doubles, in effect, before the next one; `start` (the rebuild of a store just decoded,
  // whose ids are those it held before it stopped) at most 2/3.
  enum class Fill : uint8_t { grow, start };
  // Empties the table and sizes it for `live` ids, then takes them one add at a time: a
  // start adds each partition as it decodes it, while the partition is in the cache. In a
  // table far larger than the cache, each insert in the callers' order is a cache and TLB
  // miss of its own, so the adds are gathered kBatchAdds at a time and inserted in the order
  // of their home slots (insert_batch): each batch walks the table front to back.
  class Refill;
  // Empties the table and sizes it for `live` ids, then calls each(add) once, which calls
  // add(h, id) for every id the table is to hold.
  template <class Each>
  void rebuild(size_t live, Each each, Fill fill);
  size_t size() const { return count_; }
  size_t slots() const { return slots_.size(); }

 private:
  static constexpr uint64_t kEmpty = 0;
  static constexpr uint64_t kErased = 1;  // ids start at 1: an id's slot is at least 2^16
  static constexpr uint64_t kTagMask = 0xffff;
  // A rebuild inserts this many adds at a time, ordered by the top kOrderBits of their home
  // slots (a counting pass): 16 MiB of adds, and slots ordered to within 1/65536 of the table.
  // A batch this large puts neighbouring adds of a 16M-slot table (10M ids) within a few
  // cache lines of each other, so a batch streams through the table; at 64K adds they were
  // 2 KiB apart and each insert was a cache miss of its own (the start at 10M partitions:
  // docs/BENCHMARKS.md "Restart at 10M partitions under 3 s").
  static constexpr size_t kBatchAdds = size_t{1} << 20;
  static constexpr int kOrderBits = 16;
  struct Add {
    uint64_t h;
    PartitionId id;
  };
  // What insert_batch reuses from one batch to the next: the adds in slot order and the
  // counting pass's starts.
  struct BatchScratch {
    std::vector<Add> ordered;
    std::vector<uint32_t> starts;
  };
  void insert_batch(const std::vector<Add>& adds, BatchScratch& scratch);
  static uint64_t tag_of(uint64_t h) { return h >> 48; }
  size_t home(uint64_t h) const { return h & (slots_.size() - 1); }
  static PartitionId id_of(uint64_t slot) { return PartitionId(slot >> 16); }
  static size_t slots_for(size_t live, Fill fill);
  void reset(size_t live, Fill fill);

  std::vector<uint64_t> slots_;  // a power of two, or none
  size_t count_ = 0;
  size_t erased_ = 0;
};

class PartitionNames::Refill {
 public:
  Refill(PartitionNames& table, size_t live, Fill fill);
  // At most `live` adds in all (the caller checked that each name is new to its queue).
  void add(uint64_t h, PartitionId id) {
    batch_.push_back({h, id});
    if (batch_.size() == kBatchAdds) flush();
  }
  // Inserts the adds still gathered; the table is complete.
  void finish() { flush(); }

 private:
  void flush();
  PartitionNames& table_;
  std::vector<Add> batch_;
  BatchScratch scratch_;
};

template <class Each>
void PartitionNames::rebuild(size_t live, Each each, Fill fill) {
  Refill refill(*this, live, fill);
  each([&](uint64_t h, PartitionId id) { refill.add(h, id); });
  refill.finish();
}

}  // namespace queen
