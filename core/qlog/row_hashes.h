// The transactionId hashes of append rows, for dedup and ack resolution. A row keeps its
// hashes in memory only while the store says so (Store::hashes_on_disk: a cluster below
// format 3, or a row without a record); otherwise they are read from the front of the row's
// message record (the record's body begins with them: core/state/entry.h), through a cache
// bounded in bytes that keeps the rows used last. Pops put the hashes of the records they
// read in the cache, so the rows an ack names are mostly there; a push reads a row only to
// check a dedup candidate or to scan a partition of a few rows.
//
// A read covers the record's header and hashes, not its frames, so it is not checked
// against the record's checksum: the header must name the row (kind, partition, base,
// count) or the read is an error. Reads are of durable bytes only (a row exists once its
// entry applied, after its syncs).
#pragma once

#include <cstdint>
#include <list>
#include <optional>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/common/result.h"
#include "core/common/types.h"
#include "core/state/entry.h"
#include "core/state/store.h"
#include "io/env.h"

namespace queen {

struct RowHashStats {
  uint64_t reads = 0;       // records read for their hashes
  uint64_t read_bytes = 0;  // bytes those reads returned
  uint64_t cache_hits = 0;
};

class RowHashes {
 public:
  RowHashes(Env& env, uint64_t cache_bytes_max) : env_(env), cache_bytes_max_(cache_bytes_max) {}

  // The hashes of `row` of partition `pid` (count of them). The view holds until the next
  // call on this object.
  Result<std::span<const Hash128>> of(PartitionId pid, const AppendRow& row);
  // The first offset in [from, to) of `p` whose hash is `h`, looking in at most `rows_max`
  // rows from `from` up.
  Result<std::optional<Offset>> find(const PartitionState& p, const Hash128& h, Offset from,
                                     Offset to, uint64_t rows_max = UINT64_MAX);
  // The last offset in [from, to) of `p` whose hash is `h`, looking in at most `rows_max` rows
  // from `to` down.
  Result<std::optional<Offset>> find_last(const PartitionState& p, const Hash128& h, Offset from,
                                          Offset to, uint64_t rows_max);
  // Appends (hash, offset) for every message of `p` in [from, to), reading each row once
  // through the cache as of() does.
  Status collect(const PartitionState& p, Offset from, Offset to,
                 std::vector<std::pair<Hash128, Offset>>* out);
  // Whether the message at `o` of `p` has hash `h` (false when no row holds `o`).
  Result<bool> holds(const PartitionState& p, Offset o, const Hash128& h);
  // Calls f(hash, offset, row) for every message of rows [first, last) of `p`, reading each row
  // once and caching none (a scan must not push out the rows in use).
  template <class F>
  Status for_each(const PartitionState& p, const AppendRow* first, const AppendRow* last, F f);

  // The hashes of an append read with its record (a pop: its acks follow).
  void remember(PartitionId pid, Offset base, const std::vector<Hash128>& hashes);
  const RowHashStats& stats() const { return stats_; }
  uint64_t cache_bytes() const { return cache_bytes_; }

 private:
  using Key = std::pair<PartitionId, Offset>;
  struct KeyHash {
    size_t operator()(const Key& k) const noexcept {
      uint64_t x = k.first.value * 0x9E3779B97F4A7C15ull ^ k.second.value;
      return static_cast<size_t>((x ^ (x >> 29)) * 0xBF58476D1CE4E5B9ull);
    }
  };
  struct Cached {
    Key key;
    std::vector<Hash128> hashes;
  };
  // The acks of one batch ask for the same few rows over and over: those used last are
  // looked for at the front of the list before the index.
  static constexpr int kRecentRows = 4;
  // What a cached row takes: its hashes, its list node and its index node (each with its
  // allocator's rounding).
  static constexpr uint64_t kRowBytes = 128;
  static uint64_t weight(size_t hashes) { return hashes * sizeof(Hash128) + kRowBytes; }
  std::list<Cached>::iterator cached(const Key& key);
  // The first row of `p` that may hold `from` or a later offset.
  static const AppendRow* row_from(const PartitionState& p, Offset from);
  Status read(PartitionId pid, const AppendRow& row, std::vector<Hash128>* out);
  // The first (or `last`) offset of `row` in [from, to) whose hash is `h`.
  Result<std::optional<Offset>> find_in(PartitionId pid, const AppendRow& row, const Hash128& h,
                                        Offset from, Offset to, bool last);
  void evict_to(uint64_t bytes_max);

  Env& env_;
  uint64_t cache_bytes_max_;
  uint64_t cache_bytes_ = 0;
  std::list<Cached> lru_;  // most recently used first
  // Looked up only (never walked), so its order leaks nowhere.
  std::unordered_map<Key, std::list<Cached>::iterator, KeyHash> index_;
  std::vector<Hash128> scratch_;
  RowHashStats stats_;
};

template <class F>
Status RowHashes::for_each(const PartitionState& p, const AppendRow* first, const AppendRow* last,
                           F f) {
  std::vector<Hash128> buf;
  for (auto it = first; it != last; ++it) {
    std::span<const Hash128> hs(it->hashes.begin(), it->hashes.size());
    if (!it->hashes_inline()) {
      if (auto cached = index_.find({p.id, it->base}); cached != index_.end()) {
        hs = cached->second->hashes;
      } else {
        if (auto st = read(p.id, *it, &buf); !st.ok()) return st;
        hs = buf;
      }
    }
    for (uint32_t i = 0; i < hs.size(); ++i) f(hs[i], Offset(it->base.value + i), *it);
  }
  return ok_status();
}

}  // namespace queen
