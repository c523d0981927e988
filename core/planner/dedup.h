// Dedup by transactionId hash, per partition, inside the queue's dedup window.
//
// The authority is the committed append rows (their xxh3-128 hashes, creation time and
// offsets) plus the hashes of entries still in flight. In front of the rows sits a ring of
// generational bloom filters per busy partition: it answers "certainly new" or "maybe" and
// names the offset bands a maybe must scan; it never decides a duplicate. The ring is
// node-local derived state: a partition without one scans its window exactly and warms up.
//
// Filter shape: 16 bits per hash, 64-byte blocks, 7 probe bits inside one block chosen by
// multiply-shift on the low 64 bits; seven 9-bit fields of the high 64 bits pick the bits.
// A generation holds 4096 hashes at first, each next one 8x more up to 1<<20; it also
// closes once it spans a quarter of the window (250 ms at least) and is dropped once its
// newest stamp falls below the window's floor.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "core/common/types.h"
#include "core/state/store.h"

namespace queen {

class BloomGeneration {
 public:
  BloomGeneration(uint32_t capacity, Offset first, int64_t first_us);
  void insert(const Hash128& h, Offset o, int64_t us);
  bool maybe(const Hash128& h) const;
  bool full() const { return count_ >= capacity_; }
  uint32_t capacity() const { return capacity_; }
  Offset min_offset() const { return min_; }
  Offset max_offset() const { return max_; }
  int64_t first_us() const { return first_us_; }
  int64_t newest_us() const { return newest_us_; }
  size_t bytes() const { return words_.size() * 8; }

 private:
  std::vector<uint64_t> words_;
  uint32_t capacity_;
  uint32_t count_ = 0;
  Offset min_, max_;
  int64_t first_us_, newest_us_;
};

class BloomRing {
 public:
  static constexpr uint32_t kCapacityMin = 4096;
  static constexpr uint32_t kCapacityMax = 1u << 20;
  static constexpr int64_t kSpanUsMin = 250'000;

  void insert(const Hash128& h, Offset o, int64_t us, int64_t window_us);
  // Offset bands [lo, hi] that may hold `h`, oldest first.
  std::vector<std::pair<Offset, Offset>> bands(const Hash128& h) const;
  void drop_below(int64_t floor_us);
  size_t bytes() const;

 private:
  std::deque<BloomGeneration> gens_;
};

// The hashes planned and not yet applied, of every partition: one open-addressing table
// (linear probing, deletion by backward shift), so planning and applying a message allocate
// nothing. Holds at most one offset per (partition, hash). Grows by doubling to keep at most
// half its slots used, and gives its memory back once empty at kSlotsKeptMax slots or more.
class InFlightHashes {
 public:
  static constexpr size_t kSlotsMin = 64;
  static constexpr size_t kSlotsKeptMax = size_t{1} << 16;

  struct Slot {
    PartitionId pid;
    Hash128 hash;
    Offset offset;
    Uuid message_id;
    bool used = false;
  };

  const Slot* find(PartitionId pid, const Hash128& h) const;
  // Records `h` at `o` unless the partition already has `h` in flight.
  void insert(PartitionId pid, const Hash128& h, Offset o, const Uuid& message_id);
  // Forgets `h` if it is in flight at exactly `o`.
  void erase(PartitionId pid, const Hash128& h, Offset o);
  void clear();
  size_t size() const { return count_; }
  size_t slots() const { return slots_.size(); }
  // Calls f(slot) for each hash of `pid` in flight, in slot order.
  template <class F>
  void for_each_of(PartitionId pid, F f) const {
    if (count_ == 0) return;
    for (const Slot& s : slots_)
      if (s.used && s.pid == pid) f(s);
  }

 private:
  size_t home(PartitionId pid, const Hash128& h) const;
  size_t slot_of(PartitionId pid, const Hash128& h) const;  // its slot, or the free one
  void grow();

  std::vector<Slot> slots_;  // empty, or a power of two
  size_t count_ = 0;
};

struct DedupHit {
  Offset offset;
  std::optional<Uuid> message_id;  // known when the original is still in flight
};

struct DedupStats {
  uint64_t checks = 0;
  uint64_t filter_says_new = 0;
  uint64_t exact_scans = 0;
  uint64_t duplicates = 0;
  uint64_t warmups = 0;
};

class DedupIndex {
 public:
  // Partitions with at most this many hashes in their window are scanned without a filter.
  static constexpr size_t kColdScanHashesMax = 256;

  explicit DedupIndex(const Store& store) : store_(store) {}

  // The original of `h` in partition `pid` within the window, if any.
  std::optional<DedupHit> find(PartitionId pid, const Hash128& h, int64_t now_us,
                               int64_t window_us);
  // Records a hash planned at offset `o` (in flight until applied).
  void planned(PartitionId pid, const Hash128& h, Offset o, const Uuid& message_id, int64_t now_us,
               int64_t window_us);
  // The store now holds `append`: its hashes are no longer in flight.
  void applied(const EffAppend& append);
  void reset_in_flight() { in_flight_.clear(); }
  const DedupStats& stats() const { return stats_; }
  size_t filter_bytes() const;

 private:
  std::optional<Offset> scan(const PartitionState& p, const Hash128& h, Offset lo, Offset hi,
                             int64_t floor_us) const;
  BloomRing* warm(const PartitionState& p, int64_t floor_us, int64_t window_us);

  const Store& store_;
  InFlightHashes in_flight_;
  std::map<PartitionId, BloomRing> rings_;
  DedupStats stats_;
};

}  // namespace queen
