// Dedup by transactionId hash, per partition, inside the queue's dedup window.
//
// The authority is the committed append rows (their xxh3-128 hashes, read through RowHashes,
// creation time and offsets) plus the hashes of entries still in flight. In front of the rows sits
// a ring of hash generations per busy partition: tables of (key, offset) that name the few offsets
// a hash may sit at; each candidate is checked against its row, so the ring never decides a
// duplicate, and a lookup costs a probe or two per generation (no scan of the window). The
// ring is node-local derived state: a partition without one scans its window exactly and
// warms up.
//
// A key is 32 bits of the hash's high half (its top bits pick the slot or bucket; the lowest
// is set, so 0 marks an empty slot), stored with the offset's distance from the generation's
// base. The newest generation is open: an open-addressing table (linear probing, at most 3/4
// full, doubling) of 8-byte slots, 11-21 bytes a hash. It is sealed once it holds
// kOpenHashesMax hashes, spans a quarter of the window (250 ms at least) or meets an offset
// too far from its base: its hashes are then kept in key order as 32-bit slots of tag and
// offset (SealedGeneration), about 5.3 bytes a hash. Neighbouring sealed generations of like
// size merge while the merged one spans at most a quarter of the window and holds at most
// kSealedHashesMax, so a partition keeps a few generations per quarter of the window, not one
// per kOpenHashesMax.
// A generation is dropped once its newest stamp falls below the window's floor.
//
// A ring also knows the offset below which it holds every applied hash of its partition (its
// covered offset): a ring read back from a rings file, or left behind while a start replays
// appends it did not plan, catches up from the rows above that offset at its next use, rather
// than being built again from the whole window.
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "core/common/bytes.h"
#include "core/common/prefetch.h"
#include "core/common/result.h"
#include "core/common/types.h"
#include "core/qlog/row_hashes.h"
#include "core/state/store.h"

namespace queen {

// One hash of a generation: its key (0: an empty slot) and its offset's distance from the
// generation's base.
struct RingSlot {
  uint32_t key = 0;
  uint32_t delta = 0;
};

inline uint32_t ring_key(const Hash128& h) {
  return static_cast<uint32_t>(h.hi >> 32) | 1;
}

class HashGeneration {
 public:
  // `slots_hint`: the table's size to start with (rounded to a power of two, kSlotsMin at
  // least), so a busy partition's generation does not grow from the smallest again each time.
  HashGeneration(Offset first, int64_t first_us, size_t slots_hint = 0);
  // Whether `o` is near enough to the generation's base to be stored in it.
  bool fits(Offset o) const;
  void insert(const Hash128& h, Offset o, int64_t us);
  // The lowest offset stored under h's key for which `is_original` holds, if any.
  template <class Pred>
  std::optional<Offset> find(const Hash128& h, Pred is_original) const;
  // Starts loading the slot where a lookup of `h` begins.
  void prefetch(const Hash128& h) const { queen::prefetch(&slots_[home(ring_key(h))]); }
  uint32_t count() const { return count_; }
  int64_t first_us() const { return first_us_; }
  int64_t newest_us() const { return newest_us_; }
  size_t bytes() const { return slots_.size() * sizeof(Slot); }
  uint64_t base() const { return base_; }
  const std::vector<RingSlot>& slots() const { return slots_; }
  void encode(ByteWriter& w) const;
  // A generation as encode() wrote it; nullopt (the reader failed) when the bytes do not
  // describe one.
  static std::optional<HashGeneration> decode(ByteReader& r);

 private:
  using Slot = RingSlot;
  HashGeneration() = default;
  static constexpr size_t kSlotsMin = 64;
  static constexpr uint64_t kBaseSlack = uint64_t{1} << 30;  // room for offsets planned again

  size_t home(uint32_t key) const { return key >> shift_; }
  void place(Slot s);
  void grow();

  std::vector<Slot> slots_;  // a power of two
  int shift_ = 32;           // 32 - log2(slots_.size())
  uint32_t count_ = 0;
  uint64_t base_ = 0;
  int64_t first_us_ = 0, newest_us_ = 0;
};

// A generation no longer written: one 32-bit slot a hash, in key order, and per bucket (the
// key's top bits, 4-8 hashes a bucket) where it starts and a 32-bit filter of its hashes'
// tags (two bits a tag), so most lookups of an absent hash read the bucket's entry only (one
// cache miss, as in an open table). A slot holds the offset's distance from the generation's
// lowest offset in delta_bits_ (as many as the generation's range needs) and, above it, the
// key's tag: the bits just below the bucket's, as many as are left and known. About 5.3
// bytes a hash. A tag names a candidate, not a hash: each is checked against its row, and tags
// of t bits name a false one in about 6 of 2^t probes (t is 11 or more at 1.5M hashes and
// dense offsets, 20 or more at kOpenHashesMax). Two generations merge in one sequential pass;
// the merged tag keeps the bits both still know, below its buckets.
class SealedGeneration {
 public:
  // Merges stop before a generation's tags would be shorter than this.
  static constexpr int kTagBitsMin = 10;

  explicit SealedGeneration(const HashGeneration& g);
  // The hashes of `slots` (key 0: none), each at `base` plus its delta, stamped between
  // first_us and newest_us.
  SealedGeneration(std::span<const RingSlot> slots, uint64_t base, int64_t first_us,
                   int64_t newest_us);
  // `older` and `newer` as one generation (both fit: can_merge).
  SealedGeneration(const SealedGeneration& older, const SealedGeneration& newer);

  // Whether `newer` and this one fit one generation with tags of kTagBitsMin bits or more.
  bool can_merge(const SealedGeneration& newer) const;
  template <class Pred>
  std::optional<Offset> find(const Hash128& h, Pred is_original) const;
  void prefetch(const Hash128& h) const { queen::prefetch(&buckets_[bucket(ring_key(h))]); }
  uint32_t count() const { return static_cast<uint32_t>(slots_.size()); }
  int64_t first_us() const { return first_us_; }
  int64_t newest_us() const { return newest_us_; }
  size_t bytes() const {
    return slots_.size() * sizeof(uint32_t) + buckets_.size() * sizeof(Bucket);
  }
  void encode(ByteWriter& w) const;
  static std::optional<SealedGeneration> decode(ByteReader& r);

 private:
  SealedGeneration() = default;
  static constexpr uint32_t kHashesPerBucket = 8;
  struct Bucket {
    uint32_t start = 0;   // bucket b's slots: [buckets_[b].start, buckets_[b + 1].start)
    uint32_t filter = 0;  // filter_bits of each of its tags
  };
  // Where a generation's slots put the bucket, tag and delta of `hashes` hashes whose
  // offsets lie in [base, top] and whose keys' top `known_bits` bits are known.
  struct Layout {
    int shift = 32;  // 32 - log2(buckets)
    int delta_bits = 0;
    int tag_bits = 0;  // negative: the known bits do not even pick the bucket
  };
  static Layout layout(size_t hashes, uint64_t base, uint64_t top, int known_bits);

  // Starts an empty generation of `hashes` slots laid out as `l`, then emit() fills it in key
  // order and index() sums where each bucket starts.
  void begin(size_t hashes, const Layout& l);
  void emit(uint32_t key, uint64_t offset);
  void emit_packed(uint64_t h) { emit(static_cast<uint32_t>(h >> 32), base_ + (h & UINT32_MAX)); }
  void index();
  // Its hashes in key order, each as its key's bits under known_mask above its offset's
  // distance from `base` (at most its own base_): key order is then the packed values' order,
  // up to the order of equal keys.
  std::vector<uint64_t> packed(uint32_t known_mask, uint64_t base) const;
  // Fills the generation from hashes in any order: counted into their buckets, placed, and
  // each bucket's few slots sorted (a slot's value orders it by tag, as the key does).
  void build(std::span<const RingSlot> slots, uint64_t base);

  size_t bucket(uint32_t key) const { return static_cast<size_t>(uint64_t{key} >> shift_); }
  // The tag_bits_ bits of `key` below its bucket's.
  uint32_t tag_of(uint32_t key) const {
    uint64_t below = (uint64_t{key} << (32 - shift_)) & UINT32_MAX;
    return static_cast<uint32_t>(below >> (32 - tag_bits_));
  }
  // The key bits a slot of bucket b knows (its top known_bits()), the others 0.
  uint32_t key_of(size_t b, uint32_t slot) const {
    uint64_t tag = uint64_t{slot} >> delta_bits_;
    return static_cast<uint32_t>((uint64_t{b} << shift_) | (tag << (shift_ - tag_bits_)));
  }
  int known_bits() const { return 32 - shift_ + tag_bits_; }
  uint64_t delta_mask() const { return (uint64_t{1} << delta_bits_) - 1; }
  // Two of 32 bits, from the tag's bits mixed.
  static uint32_t filter_bits(uint32_t tag) {
    uint32_t m = tag * 0x9E3779B1u;
    return (uint32_t{1} << (m >> 27)) | (uint32_t{1} << ((m >> 22) & 31));
  }

  std::vector<uint32_t> slots_;  // in key order: tag << delta_bits_ | (offset - base_)
  std::vector<Bucket> buckets_;  // one more than there are buckets: the end
  int shift_ = 32;
  int delta_bits_ = 0;
  int tag_bits_ = 0;
  uint64_t base_ = 0, top_ = 0;  // the lowest and the highest stored offset
  int64_t first_us_ = 0, newest_us_ = 0;
};

class HashRing {
 public:
  // The open generation is sealed at 3/4 of a 2048-slot table.
  static constexpr uint32_t kOpenHashesMax = 3u << 9;
  // The newest sealed generation merges into the one before while that one holds at most this
  // many times as many hashes: a few generations per partition (a lookup probes each).
  static constexpr uint32_t kMergeRatio = 2;
  // Sealed generations stop merging at this size.
  static constexpr uint32_t kSealedHashesMax = 3u << 19;
  static constexpr int64_t kSpanUsMin = 250'000;

  void insert(const Hash128& h, Offset o, int64_t us, int64_t window_us);
  // The lowest offset that may hold `h` and for which `is_original` holds, oldest generation
  // first.
  template <class Pred>
  std::optional<Offset> find(const Hash128& h, Pred is_original) const {
    // Each generation's probe is a cache miss of its own: ask for all of them at once.
    prefetch(h);
    for (const auto& g : sealed_)
      if (auto o = g.find(h, is_original)) return o;
    return open_ ? open_->find(h, is_original) : std::nullopt;
  }
  void prefetch(const Hash128& h) const {
    for (const auto& g : sealed_) g.prefetch(h);
    if (open_) open_->prefetch(h);
  }
  void drop_below(int64_t floor_us);
  // Every applied hash of the partition below this offset, inside the window, is in the ring.
  Offset covered() const { return covered_; }
  void set_covered(Offset o) { covered_ = o; }
  // Adds a generation newer than every sealed one; the ring has no open one yet (RingLoader).
  void add_sealed(SealedGeneration g);
  static int64_t span_us_max(int64_t window_us) { return std::max(kSpanUsMin, window_us / 4); }
  size_t generations() const { return sealed_.size() + (open_ ? 1 : 0); }
  size_t bytes() const;
  // When the ring was last looked up in, by DedupIndex's count of lookups (node-local).
  uint64_t last_use() const { return last_use_; }
  void set_last_use(uint64_t use) { last_use_ = use; }
  // Its bytes as DedupIndex last counted them into its total.
  size_t counted_bytes() const { return counted_bytes_; }
  void set_counted_bytes(size_t bytes) { counted_bytes_ = bytes; }
  void encode(ByteWriter& w) const;
  static std::optional<HashRing> decode(ByteReader& r);

 private:
  // Seals the open generation, then merges the newest sealed ones while they are alike.
  void seal(int64_t window_us);

  std::deque<SealedGeneration> sealed_;  // oldest first
  std::optional<HashGeneration> open_;   // newer than every sealed one
  size_t open_slots_ = 0;                // the last sealed open generation's table size
  Offset covered_;
  uint64_t last_use_ = 0;
  size_t counted_bytes_ = 0;
};

// Fills a new ring from a partition's hashes in offset order (its rows after a restart) a
// sealed generation at a time, each bucket-sorted once, where inserting them one by one would
// sort each hash into a small generation and then merge it about ten times. A generation
// holds at most kSealedHashesMax hashes over at most a quarter of the window, as merges keep
// them, and offsets less than kRangeMax apart, so its tags keep kTagBitsMin bits or more.
class RingLoader {
 public:
  static constexpr uint64_t kRangeMax = uint64_t{1} << 22;

  RingLoader(HashRing& ring, int64_t window_us) : ring_(ring), window_us_(window_us) {}
  void add(const Hash128& h, Offset o, int64_t us);
  // Seals what is pending; the ring then takes inserts as usual.
  void finish();

 private:
  HashRing& ring_;
  int64_t window_us_;
  std::vector<RingSlot> pending_;  // deltas from base_
  uint64_t base_ = 0;
  int64_t first_us_ = 0, newest_us_ = 0;
};

template <class Pred>
std::optional<Offset> HashGeneration::find(const Hash128& h, Pred is_original) const {
  uint32_t key = ring_key(h);
  size_t mask = slots_.size() - 1;
  std::optional<Offset> best;
  for (size_t i = home(key); slots_[i].key != 0; i = (i + 1) & mask) {
    if (slots_[i].key != key) continue;
    Offset o(base_ + slots_[i].delta);
    if ((!best || o < *best) && is_original(o)) best = o;
  }
  return best;
}

template <class Pred>
std::optional<Offset> SealedGeneration::find(const Hash128& h, Pred is_original) const {
  uint32_t key = ring_key(h);
  size_t b = bucket(key);
  uint32_t tag = tag_of(key);
  uint32_t bits = filter_bits(tag);
  if ((buckets_[b].filter & bits) != bits) return std::nullopt;
  std::optional<Offset> best;
  for (uint32_t i = buckets_[b].start; i < buckets_[b + 1].start; ++i) {
    if (uint64_t{slots_[i]} >> delta_bits_ != tag) continue;
    Offset o(base_ + (slots_[i] & delta_mask()));
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
    if (!slots_.empty()) queen::prefetch(&slots_[home(pid, h)]);
  }
  // Records `h` at `o` unless the partition already has `h` in flight.
  void insert(PartitionId pid, const Hash128& h, Offset o, const Uuid& message_id);
  // Forgets `h` if it is in flight at exactly `o`.
  // Whether h was in flight at o (it is not any more).
  bool erase(PartitionId pid, const Hash128& h, Offset o);
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
  uint64_t catch_ups = 0;  // rings brought up to their partition's rows from their covered offset
  uint64_t evictions = 0;  // rings dropped to keep within rings_bytes_max (evict)
};

class DedupIndex {
 public:
  // Partitions with at most this many rows and hashes in their window are scanned without a
  // ring: each row scanned may cost a read of its record.
  static constexpr size_t kColdScanRowsMax = 4;
  static constexpr size_t kColdScanHashesMax = 256;

  DedupIndex(const Store& store, RowHashes& hashes) : store_(store), hashes_(hashes) {}

  // The lookups and plans of a run of items into one partition (a push's items for it), at
  // one instant: the partition and its ring are resolved once, not per item; the ring is
  // built or caught up when the run first needs it for a lookup (a run of plans alone builds
  // none). Use it before anything else changes the index (an apply, a sweep, an eviction,
  // another run).
  class Run {
   public:
    // The original of `h` in the partition within the window, if any; an error when a row's
    // hashes cannot be read (or the ring could not be built from them).
    Result<std::optional<DedupHit>> find(const Hash128& h);
    // Records a hash planned at offset `o` (in flight until applied).
    void planned(const Hash128& h, Offset o, const Uuid& message_id);
    // Starts loading what finds of *hash_of(*it) for it in [first, last) probe (none where
    // hash_of gives nullptr), so a push's lookups (each a cache miss per generation) overlap
    // instead of queueing. If any will be looked up, the ring is built or caught up first.
    template <class It, class HashOf>
    void prefetch(It first, It last, HashOf hash_of) {
      It it = first;
      while (it != last && hash_of(*it) == nullptr) ++it;
      if (it == last) return;
      warm();
      for (; it != last; ++it) {
        const Hash128* h = hash_of(*it);
        if (h == nullptr) continue;
        if (ring_) ring_->prefetch(*h);
        index_.in_flight_.prefetch(pid_, *h);
      }
    }

   private:
    friend class DedupIndex;
    Run(DedupIndex& index, PartitionId pid, int64_t now_us, int64_t window_us)
        : index_(index), pid_(pid), now_us_(now_us), window_us_(window_us), ring_(held()) {}
    // The partition's ring as the index holds it now (null: none).
    HashRing* held() const;
    // Resolves the partition and builds or catches up its ring, once.
    void warm();

    DedupIndex& index_;
    PartitionId pid_;
    int64_t now_us_, window_us_;
    HashRing* ring_;  // as held, then as warmed (null: p_'s window is scanned, if p_)
    bool warmed_ = false;
    const PartitionState* p_ = nullptr;  // null: not in the store yet (planned in this entry)
    std::optional<Error> failed_;        // the ring's build failed
  };
  Run run(PartitionId pid, int64_t now_us, int64_t window_us) {
    return Run(*this, pid, now_us, window_us);
  }
  // The store now holds `append`: its hashes are no longer in flight. An append not planned
  // here (another leader's) drops the partition's ring, which lacks its hashes, unless
  // stale rings are kept.
  void applied(const EffAppend& append);
  // While a start replays its log, an append not planned here leaves its partition's ring
  // behind the rows instead (it catches up from them at its next use).
  void keep_stale_rings(bool keep) { keep_stale_ = keep; }
  void reset_in_flight() { in_flight_.clear(); }
  const DedupStats& stats() const { return stats_; }
  size_t ring_bytes() const;
  size_t rings() const { return rings_.size(); }
  // The rings, partition by partition (core/planner/ring_file.h keeps them across a graceful
  // restart).
  void encode_rings(ByteWriter& w) const;
  // Takes the rings `r` holds in place of any, at most the bound's worth (the most recently
  // used); false, and no ring, when they do not decode.
  bool decode_rings(ByteReader& r);
  void drop_rings() {
    rings_.clear();
    held_bytes_ = 0;
  }
  // Looks at up to `rings_max` rings, from where the last call ended (round the partitions in
  // order): drops those of partitions gone or of queues without a window now, and the
  // generations of the others below their window's floor at `now_us`, and with them a ring
  // left empty (an idle partition's). So the rings hold the hashes of the windows, not of
  // the backlog, whether or not their partitions are pushed to again.
  void sweep(int64_t now_us, size_t rings_max);
  static constexpr size_t kSweepRingsMax = 4096;  // a call's share: a few ms at most
  // The most the rings may hold (0: no bound; QUEEN_RAFT_DEDUP_FRONT_MB). Past it, the least
  // recently looked-up rings are dropped until they hold at most 7/8 of it: by evict(), and
  // when a ring is built or read from a rings file past it. Between evict() calls (each store
  // checkpoint tick) the total counts each ring as of the last call or its build, not the hashes
  // added since. A dropped ring's partition is scanned or warms from its rows at its next lookup,
  // so dedup stays exact; a bound below the busy partitions' rings makes them warm again and again.
  void set_rings_bytes_max(size_t bytes_max) { rings_bytes_max_ = bytes_max; }
  void evict();

 private:
  using Rows = CompactVector<AppendRow>;
  static Rows::const_iterator first_in_window(const PartitionState& p, int64_t floor_us);
  Result<std::optional<Offset>> scan(const PartitionState& p, const Hash128& h, int64_t floor_us);
  // Whether p's row holding `o` is inside the window and holds `h` there.
  Result<bool> holds(const PartitionState& p, const Hash128& h, Offset o, int64_t floor_us);
  // The ring of `p` (null: p is small enough to scan), built from its rows on first use.
  Result<HashRing*> warm(const PartitionState& p, int64_t floor_us, int64_t window_us);
  // Adds the hashes of p's rows from the ring's covered offset up: false when that offset
  // is not where a row of the window starts (the ring must be built again).
  Result<bool> catch_up(const PartitionState& p, HashRing& ring, int64_t floor_us,
                        int64_t window_us);
  // The original of `h` in p's rows through its ring (null: a scan of its window).
  Result<std::optional<Offset>> find_committed(const PartitionState& p, HashRing* ring,
                                               const Hash128& h, int64_t floor_us);

  using Rings = std::map<PartitionId, HashRing>;
  // Drops the least recently used rings but `keep` until they hold at most 7/8 of the bound.
  void evict_from(PartitionId keep);
  // Takes a ring read from a rings file, and keeps the rings under the bound as they are read.
  void load(PartitionId pid, HashRing ring, uint64_t last_use);
  // A ring's bytes are counted into held_bytes_ at its build; forget() takes them out as it
  // erases the ring; recount() counts every ring again.
  Rings::iterator forget(Rings::iterator it);
  void recount();
  // The dedup window of the queue `pid` is in; 0 when it has none (or is gone).
  int64_t window_us_of(PartitionId pid) const;

  const Store& store_;
  RowHashes& hashes_;
  InFlightHashes in_flight_;
  Rings rings_;
  DedupStats stats_;
  bool keep_stale_ = false;
  PartitionId sweep_from_;  // where the next sweep starts
  uint64_t uses_ = 0;       // lookups in rings so far: their last_use
  size_t rings_bytes_max_ = 0;
  size_t held_bytes_ = 0;  // the rings' bytes as last counted (at a build, recount)
};

}  // namespace queen
