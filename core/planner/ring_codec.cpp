// The dedup rings' encoding: each generation's fields and its tables as they are in memory
// (little-endian words), checked on the way back in so that a decoded generation is one its
// lookups can walk (bucket starts in order and within its slots, an open table with an empty
// slot); a generation that does not check out fails the reader.
#include <bit>

#include "core/planner/dedup.h"

namespace queen {

namespace {

template <class T>
void put_table(ByteWriter& w, const std::vector<T>& v) {
  static_assert(std::is_trivially_copyable_v<T>, "a table is copied as it is");
  w.u32(static_cast<uint32_t>(v.size()));
  w.raw(v.data(), v.size() * sizeof(T));
}

template <class T>
bool get_table(ByteReader& r, std::vector<T>* v) {
  uint32_t n = r.count(sizeof(T));
  if (!r.ok()) return false;
  v->resize(n);
  r.raw_into(v->data(), n * sizeof(T));
  return r.ok();
}

// A reader that met a value out of range: fails it, so the caller's decode ends there.
template <class T>
std::optional<T> refuse(ByteReader& r) {
  r.invalidate();
  return std::nullopt;
}

}  // namespace

void HashGeneration::encode(ByteWriter& w) const {
  w.u32(count_);
  w.u64(base_);
  w.i64(first_us_);
  w.i64(newest_us_);
  put_table(w, slots_);
}

std::optional<HashGeneration> HashGeneration::decode(ByteReader& r) {
  HashGeneration g;
  g.count_ = r.u32();
  g.base_ = r.u64();
  g.first_us_ = r.i64();
  g.newest_us_ = r.i64();
  if (!get_table(r, &g.slots_)) return std::nullopt;
  size_t n = g.slots_.size();
  if (n < kSlotsMin || !std::has_single_bit(n) || uint64_t{g.count_} * 4 > n * 3)
    return refuse<HashGeneration>(r);
  size_t used = 0;
  for (const Slot& s : g.slots_) used += s.key != 0;
  if (used != g.count_) return refuse<HashGeneration>(r);
  g.shift_ = 32 - std::countr_zero(n);
  return g;
}

void SealedGeneration::encode(ByteWriter& w) const {
  w.u32(static_cast<uint32_t>(shift_));
  w.u32(static_cast<uint32_t>(delta_bits_));
  w.u32(static_cast<uint32_t>(tag_bits_));
  w.u64(base_);
  w.u64(top_);
  w.i64(first_us_);
  w.i64(newest_us_);
  put_table(w, slots_);
  put_table(w, buckets_);
}

std::optional<SealedGeneration> SealedGeneration::decode(ByteReader& r) {
  SealedGeneration g;
  uint32_t shift = r.u32(), delta_bits = r.u32(), tag_bits = r.u32();
  g.base_ = r.u64();
  g.top_ = r.u64();
  g.first_us_ = r.i64();
  g.newest_us_ = r.i64();
  if (!get_table(r, &g.slots_) || !get_table(r, &g.buckets_)) return std::nullopt;
  // The layout() of some generation: its buckets a power of two (4-8 hashes each, so fewer
  // than 2^29), its delta and tag within a 32-bit slot and the tag below the bucket's bits.
  if (shift < 3 || shift > 32 || delta_bits > 32 || tag_bits > 32 - delta_bits ||
      tag_bits > shift || g.base_ > g.top_ || g.top_ - g.base_ > UINT32_MAX ||
      std::bit_width(g.top_ - g.base_) > delta_bits || g.slots_.empty())
    return refuse<SealedGeneration>(r);
  g.shift_ = static_cast<int>(shift);
  g.delta_bits_ = static_cast<int>(delta_bits);
  g.tag_bits_ = static_cast<int>(tag_bits);
  if (g.buckets_.size() != (size_t{1} << (32 - shift)) + 1 || g.buckets_.front().start != 0 ||
      g.buckets_.back().start != g.slots_.size())
    return refuse<SealedGeneration>(r);
  for (size_t b = 0; b + 1 < g.buckets_.size(); ++b)
    if (g.buckets_[b].start > g.buckets_[b + 1].start) return refuse<SealedGeneration>(r);
  return g;
}

void HashRing::encode(ByteWriter& w) const {
  w.u64(covered_.value);
  w.u32(static_cast<uint32_t>(sealed_.size()));
  for (const SealedGeneration& g : sealed_) g.encode(w);
  w.u8(open_ ? 1 : 0);
  if (open_) open_->encode(w);
}

std::optional<HashRing> HashRing::decode(ByteReader& r) {
  HashRing ring;
  ring.covered_ = Offset(r.u64());
  // Each generation takes more than 64 bytes (its fields and table sizes).
  uint32_t sealed = r.count(64);
  for (uint32_t i = 0; i < sealed && r.ok(); ++i) {
    auto g = SealedGeneration::decode(r);
    if (!g) return std::nullopt;
    if (!ring.sealed_.empty() && ring.sealed_.back().newest_us() > g->newest_us())
      return refuse<HashRing>(r);  // oldest first, as drop_below expects
    ring.sealed_.push_back(std::move(*g));
  }
  uint8_t open = r.u8();
  if (open > 1) return refuse<HashRing>(r);
  if (open == 1) {
    auto g = HashGeneration::decode(r);
    if (!g) return std::nullopt;
    ring.open_ = std::move(*g);
  }
  if (!r.ok()) return std::nullopt;
  return ring;
}

void DedupIndex::encode_rings(ByteWriter& w) const {
  w.u32(static_cast<uint32_t>(rings_.size()));
  for (const auto& [pid, ring] : rings_) {  // in partition order: the same state, the same bytes
    w.u64(pid.value);
    w.u64(ring.last_use());
    ring.encode(w);
    w.boundary();
  }
}

bool DedupIndex::decode_rings(ByteReader& r) {
  drop_rings();
  // A partition id, its last use, a covered offset, a generation count and the open flag.
  uint32_t n = r.count(29);
  for (uint32_t i = 0; i < n && r.ok(); ++i) {
    PartitionId pid(r.u64());
    uint64_t last_use = r.u64();
    auto ring = HashRing::decode(r);
    if (!ring) break;
    load(pid, std::move(*ring), last_use);
  }
  if (r.ok()) return true;  // load() counted each ring's bytes as it took it
  drop_rings();
  return false;
}

// Keeps a ring read from a file under the bound as it is read, so a start never holds more
// than the bound (a file written under a higher one, or grown since its last tick): past it,
// the least recently used rings read so far go, this one included.
void DedupIndex::load(PartitionId pid, HashRing ring, uint64_t last_use) {
  if (auto it = rings_.find(pid); it != rings_.end()) forget(it);
  ring.set_last_use(last_use);
  uses_ = std::max(uses_, last_use);
  ring.set_counted_bytes(ring.bytes());
  held_bytes_ += ring.counted_bytes();
  rings_.emplace(pid, std::move(ring));
  evict_from(PartitionId());
}

}  // namespace queen
