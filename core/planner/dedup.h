// Dedup by transactionId hash, per partition, inside the queue's dedup window.
//
// The authority is the committed append rows (their xxh3-128 hashes, read through RowHashes,
// creation time and offsets) plus the hashes of entries still in flight. In front of the rows sits
// a ring of hash generations per busy partition: tables of (key, offset) that name the few offsets
// a hash may sit at; each candidate is checked against its row, so the ring never decides a
// duplicate, and a lookup costs one table probe per generation (no scan of the window). The
// ring is node-local derived state: a partition without one scans its window exactly and
// warms up.
//
// A generation is an open-addressing table (linear probing, at most 3/4 full, doubling) of
// 8-byte slots: a key of 32 bits of the hash's high half (its top bits pick the home slot;
// the lowest is set, so 0 marks an empty slot) and the offset's distance from the
// generation's base. It closes once it holds
// kGenerationHashesMax hashes or spans a quarter of the window (250 ms at least), and is
// dropped once its newest stamp falls below the window's floor.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "core/common/result.h"
#include "core/common/types.h"
#include "core/qlog/row_hashes.h"
#include "core/state/store.h"

namespace queen {

class HashGeneration {
 public:
  HashGeneration(Offset first, int64_t first_us);
  // Whether `o` is near enough to the generation's base to be stored in it.
  bool fits(Offset o) const;
  void insert(const Hash128& h, Offset o, int64_t us);
  // The lowest offset stored under h's key for which `is_original` holds, if any.
  template <class Pred>
  std::optional<Offset> find(const Hash128& h, Pred is_original) const;
  // Starts loading the slot where a lookup of `h` begins.
  void prefetch(const Hash128& h) const { __builtin_prefetch(&slots_[home(key_of(h))]); }
  uint32_t count() const { return count_; }
  int64_t first_us() const { return first_us_; }
  int64_t newest_us() const { return newest_us_; }
  size_t bytes() const { return slots_.size() * sizeof(Slot); }

 private:
  struct Slot {
    uint32_t key = 0;  // 0: empty
    uint32_t delta = 0;
  };
  static constexpr size_t kSlotsMin = 64;
  static constexpr uint64_t kBaseSlack = uint64_t{1} << 30;  // room for offsets planned again

  static uint32_t key_of(const Hash128& h) { return static_cast<uint32_t>(h.hi >> 32) | 1; }
  size_t home(uint32_t key) const { return key >> shift_; }
  void place(Slot s);
  void grow();

  std::vector<Slot> slots_;  // a power of two
  int shift_;                // 32 - log2(slots_.size())
  uint32_t count_ = 0;
  uint64_t base_;
  int64_t first_us_, newest_us_;
};

class HashRing {
 public:
  // A full generation fills its table to 3/4 exactly (2^21 slots).
  static constexpr uint32_t kGenerationHashesMax = 3u << 19;
  static constexpr int64_t kSpanUsMin = 250'000;

  void insert(const Hash128& h, Offset o, int64_t us, int64_t window_us);
  // The lowest offset that may hold `h` and for which `is_original` holds, oldest generation
  // first.
  template <class Pred>
  std::optional<Offset> find(const Hash128& h, Pred is_original) const {
    // Each generation's probe is a cache miss of its own: ask for all of them at once.
    for (const auto& g : gens_) g.prefetch(h);
    for (const auto& g : gens_)
      if (auto o = g.find(h, is_original)) return o;
    return std::nullopt;
  }
  void prefetch(const Hash128& h) const {
    for (const auto& g : gens_) g.prefetch(h);
  }
  void drop_below(int64_t floor_us);
  size_t generations() const { return gens_.size(); }
  size_t bytes() const;

 private:
  std::deque<HashGeneration> gens_;
};

template <class Pred>
std::optional<Offset> HashGeneration::find(const Hash128& h, Pred is_original) const {
  uint32_t key = key_of(h);
  size_t mask = slots_.size() - 1;
  std::optional<Offset> best;
  for (size_t i = home(key); slots_[i].key != 0; i = (i + 1) & mask) {
    if (slots_[i].key != key) continue;
    Offset o(base_ + slots_[i].delta);
    if ((!best || o < *best) && is_original(o)) best = o;
  }
  return best;
}

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
  // Starts loading the slot where a find of `h` begins.
  void prefetch(PartitionId pid, const Hash128& h) const {
    if (!slots_.empty()) __builtin_prefetch(&slots_[home(pid, h)]);
  }
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
  uint64_t candidates = 0;  // offsets the ring named, each checked against its row
  uint64_t exact_scans = 0;
  uint64_t duplicates = 0;
};

class DedupIndex {
 public:
  // Partitions with at most this many rows and hashes in their window are scanned without a
  // ring: each row scanned may cost a read of its record.
  static constexpr size_t kColdScanRowsMax = 4;
  static constexpr size_t kColdScanHashesMax = 256;

  DedupIndex(const Store& store, RowHashes& hashes) : store_(store), hashes_(hashes) {}

  // The original of `h` in partition `pid` within the window, if any; an error when a row's
  // hashes cannot be read.
  Result<std::optional<DedupHit>> find(PartitionId pid, const Hash128& h, int64_t now_us,
                                       int64_t window_us);
  // Starts loading what finds of hash_of(*it) for it in [first, last) in `pid` probe, so a
  // push's lookups (each a cache miss per generation) overlap instead of queueing.
  template <class It, class HashOf>
  void prefetch(PartitionId pid, It first, It last, HashOf hash_of) const {
    auto rit = rings_.find(pid);
    for (It it = first; it != last; ++it) {
      const Hash128& h = hash_of(*it);
      if (rit != rings_.end()) rit->second.prefetch(h);
      in_flight_.prefetch(pid, h);
    }
  }
  // Records a hash planned at offset `o` (in flight until applied).
  void planned(PartitionId pid, const Hash128& h, Offset o, const Uuid& message_id, int64_t now_us,
               int64_t window_us);
  // The store now holds `append`: its hashes are no longer in flight.
  void applied(const EffAppend& append);
  void reset_in_flight() { in_flight_.clear(); }
  const DedupStats& stats() const { return stats_; }
  size_t ring_bytes() const;

 private:
  using Rows = CompactVector<AppendRow>;
  static Rows::const_iterator first_in_window(const PartitionState& p, int64_t floor_us);
  Result<std::optional<Offset>> scan(const PartitionState& p, const Hash128& h, int64_t floor_us);
  // Whether p's row holding `o` is inside the window and holds `h` there.
  Result<bool> holds(const PartitionState& p, const Hash128& h, Offset o, int64_t floor_us);
  // The ring of `p` (null: p is small enough to scan), built from its rows on first use.
  Result<HashRing*> warm(const PartitionState& p, int64_t floor_us, int64_t window_us);
  Result<std::optional<Offset>> find_committed(const PartitionState& p, const Hash128& h,
                                               int64_t floor_us, int64_t window_us);

  const Store& store_;
  RowHashes& hashes_;
  InFlightHashes in_flight_;
  std::map<PartitionId, HashRing> rings_;
  DedupStats stats_;
};

}  // namespace queen
