#include "core/planner/dedup.h"

#include <algorithm>

namespace queen {
namespace {

constexpr uint32_t kBitsPerHash = 16;
constexpr uint32_t kWordsPerBlock = 8;  // 64-byte blocks
constexpr int kProbes = 7;

uint64_t block_of(const Hash128& h, uint64_t blocks) {
  return static_cast<uint64_t>((static_cast<unsigned __int128>(h.lo) * blocks) >> 64);
}

}  // namespace

BloomGeneration::BloomGeneration(uint32_t capacity, Offset first, int64_t first_us)
    : words_(std::max<uint64_t>(kWordsPerBlock,
                                (uint64_t{capacity} * kBitsPerHash / 64 + kWordsPerBlock - 1) /
                                    kWordsPerBlock * kWordsPerBlock)),
      capacity_(capacity),
      min_(first),
      max_(first),
      first_us_(first_us),
      newest_us_(first_us) {}

void BloomGeneration::insert(const Hash128& h, Offset o, int64_t us) {
  uint64_t blocks = words_.size() / kWordsPerBlock;
  uint64_t* block = &words_[block_of(h, blocks) * kWordsPerBlock];
  for (int i = 0; i < kProbes; ++i) {
    uint32_t bit = (h.hi >> (9 * i)) & 511;
    block[bit >> 6] |= uint64_t{1} << (bit & 63);
  }
  ++count_;
  min_ = std::min(min_, o);
  max_ = std::max(max_, o);
  newest_us_ = std::max(newest_us_, us);
}

bool BloomGeneration::maybe(const Hash128& h) const {
  uint64_t blocks = words_.size() / kWordsPerBlock;
  const uint64_t* block = &words_[block_of(h, blocks) * kWordsPerBlock];
  for (int i = 0; i < kProbes; ++i) {
    uint32_t bit = (h.hi >> (9 * i)) & 511;
    if (!(block[bit >> 6] & (uint64_t{1} << (bit & 63)))) return false;
  }
  return true;
}

void BloomRing::insert(const Hash128& h, Offset o, int64_t us, int64_t window_us) {
  int64_t span_us = std::max(kSpanUsMin, window_us / 4);
  if (gens_.empty() || gens_.back().full() || us - gens_.back().first_us() > span_us) {
    uint32_t cap = kCapacityMin;
    if (!gens_.empty() && gens_.back().full())
      cap = std::min<uint64_t>(kCapacityMax, uint64_t{gens_.back().capacity()} * 8);
    gens_.emplace_back(cap, o, us);
  }
  gens_.back().insert(h, o, us);
}

std::vector<std::pair<Offset, Offset>> BloomRing::bands(const Hash128& h) const {
  std::vector<std::pair<Offset, Offset>> out;
  for (const auto& g : gens_)
    if (g.maybe(h)) out.emplace_back(g.min_offset(), g.max_offset());
  return out;
}

void BloomRing::drop_below(int64_t floor_us) {
  while (!gens_.empty() && gens_.front().newest_us() < floor_us) gens_.pop_front();
}

size_t BloomRing::bytes() const {
  size_t n = 0;
  for (const auto& g : gens_) n += g.bytes();
  return n;
}

size_t InFlightHashes::home(PartitionId pid, const Hash128& h) const {
  // The hashes are xxh3-128: their low bits are already uniform.
  return static_cast<size_t>((h.lo ^ (pid.value * 0x9E3779B97F4A7C15ull)) & (slots_.size() - 1));
}

size_t InFlightHashes::slot_of(PartitionId pid, const Hash128& h) const {
  size_t mask = slots_.size() - 1;
  size_t i = home(pid, h);
  while (slots_[i].used && !(slots_[i].pid == pid && slots_[i].hash == h)) i = (i + 1) & mask;
  return i;
}

const InFlightHashes::Slot* InFlightHashes::find(PartitionId pid, const Hash128& h) const {
  if (count_ == 0) return nullptr;
  const Slot& s = slots_[slot_of(pid, h)];
  return s.used ? &s : nullptr;
}

void InFlightHashes::grow() {
  std::vector<Slot> old = std::move(slots_);
  slots_.assign(std::max(kSlotsMin, old.size() * 2), Slot{});
  for (const Slot& s : old)
    if (s.used) slots_[slot_of(s.pid, s.hash)] = s;
}

void InFlightHashes::insert(PartitionId pid, const Hash128& h, Offset o, const Uuid& message_id) {
  if ((count_ + 1) * 2 > slots_.size()) grow();
  Slot& s = slots_[slot_of(pid, h)];
  if (s.used) return;
  s = Slot{pid, h, o, message_id, true};
  ++count_;
}

void InFlightHashes::erase(PartitionId pid, const Hash128& h, Offset o) {
  if (count_ == 0) return;
  size_t i = slot_of(pid, h);
  if (!slots_[i].used || slots_[i].offset != o) return;
  // Backward shift: move each later slot of the probe run whose home is not in (i, j] into
  // the hole, so every remaining hash stays reachable from its home without tombstones.
  size_t mask = slots_.size() - 1;
  for (size_t j = (i + 1) & mask; slots_[j].used; j = (j + 1) & mask) {
    size_t k = home(slots_[j].pid, slots_[j].hash);
    bool stays = i <= j ? (i < k && k <= j) : (i < k || k <= j);
    if (stays) continue;
    slots_[i] = slots_[j];
    i = j;
  }
  slots_[i].used = false;
  if (--count_ == 0 && slots_.size() >= kSlotsKeptMax) slots_ = {};
}

void InFlightHashes::clear() {
  slots_ = {};
  count_ = 0;
}

std::optional<Offset> DedupIndex::scan(const PartitionState& p, const Hash128& h, Offset lo,
                                       Offset hi, int64_t floor_us) const {
  ++const_cast<DedupStats&>(stats_).exact_scans;
  // Rows are in creation order: start at the first row inside the window.
  auto it = std::lower_bound(p.rows.begin(), p.rows.end(), floor_us,
                             [](const AppendRow& r, int64_t v) { return r.created_us < v; });
  for (; it != p.rows.end(); ++it) {
    if (it->end() <= lo) continue;
    if (it->base > hi) break;
    for (uint32_t i = 0; i < it->hashes.size(); ++i) {
      Offset o(it->base.value + i);
      if (o >= lo && o <= hi && it->hashes[i] == h) return o;
    }
  }
  return std::nullopt;
}

BloomRing* DedupIndex::warm(const PartitionState& p, int64_t floor_us, int64_t window_us) {
  auto rit = rings_.find(p.id);
  if (rit != rings_.end()) {
    rit->second.drop_below(floor_us);
    return &rit->second;
  }
  auto it = std::lower_bound(p.rows.begin(), p.rows.end(), floor_us,
                             [](const AppendRow& r, int64_t v) { return r.created_us < v; });
  size_t hashes = 0;
  for (auto j = it; j != p.rows.end(); ++j) hashes += j->hashes.size();
  if (hashes <= kColdScanHashesMax) return nullptr;
  ++stats_.warmups;
  BloomRing& ring = rings_[p.id];
  for (; it != p.rows.end(); ++it)
    for (uint32_t i = 0; i < it->hashes.size(); ++i)
      ring.insert(it->hashes[i], Offset(it->base.value + i), it->created_us, window_us);
  // Hashes still in flight land in the rows later: the filter must know them already.
  int64_t newest_us = p.rows.empty() ? floor_us : p.rows.back().created_us;
  in_flight_.for_each_of(p.id, [&](const InFlightHashes::Slot& s) {
    ring.insert(s.hash, s.offset, newest_us, window_us);
  });
  return &ring;
}

std::optional<DedupHit> DedupIndex::find(PartitionId pid, const Hash128& h, int64_t now_us,
                                         int64_t window_us) {
  ++stats_.checks;
  std::optional<DedupHit> hit;
  const PartitionState* p = store_.partition(pid);
  if (p) {
    int64_t floor_us = now_us - window_us;
    BloomRing* ring = warm(*p, floor_us, window_us);
    if (!ring) {
      if (auto o = scan(*p, h, Offset(0), p->next_offset, floor_us)) hit = DedupHit{*o, {}};
    } else {
      auto bands = ring->bands(h);
      if (bands.empty()) ++stats_.filter_says_new;
      for (const auto& [lo, hi] : bands) {
        if (auto o = scan(*p, h, lo, hi, floor_us)) {
          hit = DedupHit{*o, {}};
          break;
        }
      }
    }
  }
  if (!hit) {
    if (const InFlightHashes::Slot* s = in_flight_.find(pid, h))
      hit = DedupHit{s->offset, s->message_id};
  }
  if (hit) ++stats_.duplicates;
  return hit;
}

void DedupIndex::planned(PartitionId pid, const Hash128& h, Offset o, const Uuid& message_id,
                         int64_t now_us, int64_t window_us) {
  in_flight_.insert(pid, h, o, message_id);
  auto rit = rings_.find(pid);
  if (rit != rings_.end()) rit->second.insert(h, o, now_us, window_us);
}

void DedupIndex::applied(const EffAppend& a) {
  for (uint32_t i = 0; i < a.hashes.size(); ++i)
    in_flight_.erase(a.pid, a.hashes[i], Offset(a.base.value + i));
}

size_t DedupIndex::filter_bytes() const {
  size_t n = 0;
  for (const auto& [pid, ring] : rings_) n += ring.bytes();
  return n;
}

}  // namespace queen
