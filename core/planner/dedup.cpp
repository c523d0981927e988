#include "core/planner/dedup.h"

#include <algorithm>
#include <bit>
#include <tuple>

#include "core/common/assert.h"
#include "core/common/linear_probe.h"

namespace queen {

HashGeneration::HashGeneration(Offset first, int64_t first_us, size_t slots_hint)
    : slots_(std::bit_ceil(std::max(kSlotsMin, slots_hint))),
      shift_(32 - std::countr_zero(slots_.size())),
      base_(first.value > kBaseSlack ? first.value - kBaseSlack : 0),
      first_us_(first_us),
      newest_us_(first_us) {}

bool HashGeneration::fits(Offset o) const {
  return o.value >= base_ && o.value - base_ <= UINT32_MAX;
}

void HashGeneration::place(Slot s) {
  slots_[probe::walk(slots_, home(s.key), [](const Slot& t) { return t.key == 0; })] = s;
}

void HashGeneration::grow() {
  std::vector<Slot> old = std::move(slots_);
  slots_.assign(old.size() * 2, Slot{});
  --shift_;
  for (const Slot& s : old)
    if (s.key != 0) place(s);
}

void HashGeneration::insert(const Hash128& h, Offset o, int64_t us) {
  QUEEN_ASSERT(fits(o), "offset out of the generation's range");
  if ((count_ + 1) * 4 > slots_.size() * 3) grow();
  place(Slot{ring_key(h), static_cast<uint32_t>(o.value - base_)});
  ++count_;
  newest_us_ = std::max(newest_us_, us);
}

SealedGeneration::Layout SealedGeneration::layout(size_t hashes, uint64_t base, uint64_t top,
                                                  int known_bits) {
  QUEEN_ASSERT(top >= base && top - base <= UINT32_MAX, "a generation's range fits 32 bits");
  size_t buckets = std::bit_ceil(std::max<size_t>(1, hashes / kHashesPerBucket));
  Layout l;
  l.shift = 32 - std::countr_zero(buckets);
  l.delta_bits = std::bit_width(top - base);
  l.tag_bits = std::min(32 - l.delta_bits, known_bits - (32 - l.shift));
  return l;
}

void SealedGeneration::begin(size_t hashes, const Layout& l) {
  QUEEN_ASSERT(l.tag_bits >= 0, "the known key bits pick the bucket");
  shift_ = l.shift;
  delta_bits_ = l.delta_bits;
  tag_bits_ = l.tag_bits;
  slots_.clear();
  slots_.reserve(hashes);
  buckets_.assign((size_t{1} << (32 - shift_)) + 1, Bucket{});
}

void SealedGeneration::emit(uint32_t key, uint64_t offset) {
  size_t b = bucket(key);
  uint32_t tag = tag_of(key);
  slots_.push_back(static_cast<uint32_t>((uint64_t{tag} << delta_bits_) | (offset - base_)));
  buckets_[b].filter |= filter_bits(tag);
  ++buckets_[b + 1].start;  // counted one up: index() makes it b + 1's start
}

void SealedGeneration::index() {
  for (size_t b = 0; b + 1 < buckets_.size(); ++b) buckets_[b + 1].start += buckets_[b].start;
}

void SealedGeneration::build(std::span<const RingSlot> in, uint64_t in_base) {
  size_t hashes = 0;
  base_ = UINT64_MAX;
  top_ = 0;
  for (const RingSlot& s : in) {
    if (s.key == 0) continue;
    ++hashes;
    base_ = std::min(base_, in_base + s.delta);
    top_ = std::max(top_, in_base + s.delta);
  }
  QUEEN_ASSERT(hashes > 0, "a sealed generation holds a hash");
  begin(hashes, layout(hashes, base_, top_, 32));
  for (const RingSlot& s : in) {
    if (s.key == 0) continue;
    size_t b = bucket(s.key);
    buckets_[b].filter |= filter_bits(tag_of(s.key));
    ++buckets_[b + 1].start;
  }
  index();
  slots_.resize(hashes);
  std::vector<uint32_t> next(buckets_.size() - 1);
  for (size_t b = 0; b < next.size(); ++b) next[b] = buckets_[b].start;
  for (const RingSlot& s : in) {
    if (s.key == 0) continue;
    uint64_t delta = in_base + s.delta - base_;
    slots_[next[bucket(s.key)]++] =
        static_cast<uint32_t>((uint64_t{tag_of(s.key)} << delta_bits_) | delta);
  }
  for (size_t b = 0; b < next.size(); ++b)
    std::sort(slots_.begin() + buckets_[b].start, slots_.begin() + buckets_[b + 1].start);
}

SealedGeneration::SealedGeneration(const HashGeneration& g)
    : first_us_(g.first_us()), newest_us_(g.newest_us()) {
  build(g.slots(), g.base());
}

SealedGeneration::SealedGeneration(std::span<const RingSlot> slots, uint64_t base, int64_t first_us,
                                   int64_t newest_us)
    : first_us_(first_us), newest_us_(newest_us) {
  build(slots, base);
}

SealedGeneration::SealedGeneration(const SealedGeneration& older, const SealedGeneration& newer)
    : base_(std::min(older.base_, newer.base_)),
      top_(std::max(older.top_, newer.top_)),
      first_us_(std::min(older.first_us_, newer.first_us_)),
      newest_us_(std::max(older.newest_us_, newer.newest_us_)) {
  QUEEN_ASSERT(older.can_merge(newer), "merged generations fit one range");
  int known = std::min(older.known_bits(), newer.known_bits());
  size_t hashes = older.slots_.size() + newer.slots_.size();
  begin(hashes, layout(hashes, base_, top_, known));
  // Both are in key order (as far as both know it): one sequential merge, without a branch on
  // the comparison of two random keys.
  uint32_t known_mask = static_cast<uint32_t>(~uint64_t{0} << (32 - known));
  std::vector<uint64_t> a = older.packed(known_mask, base_), c = newer.packed(known_mask, base_);
  size_t i = 0, j = 0;
  while (i < a.size() && j < c.size()) {
    uint64_t x = a[i], y = c[j];
    bool take_a = x <= y;
    emit_packed(take_a ? x : y);
    i += take_a;
    j += !take_a;
  }
  for (; i < a.size(); ++i) emit_packed(a[i]);
  for (; j < c.size(); ++j) emit_packed(c[j]);
  index();
}

std::vector<uint64_t> SealedGeneration::packed(uint32_t known_mask, uint64_t base) const {
  std::vector<uint64_t> out;
  out.reserve(slots_.size());
  for (size_t b = 0; b + 1 < buckets_.size(); ++b) {
    for (uint32_t i = buckets_[b].start; i < buckets_[b + 1].start; ++i) {
      uint32_t slot = slots_[i];
      uint64_t delta = base_ + (slot & delta_mask()) - base;
      out.push_back((uint64_t{key_of(b, slot) & known_mask} << 32) | delta);
    }
  }
  return out;
}

bool SealedGeneration::can_merge(const SealedGeneration& newer) const {
  uint64_t base = std::min(base_, newer.base_), top = std::max(top_, newer.top_);
  if (top - base > UINT32_MAX) return false;
  int known = std::min(known_bits(), newer.known_bits());
  return layout(slots_.size() + newer.slots_.size(), base, top, known).tag_bits >= kTagBitsMin;
}

void HashRing::insert(const Hash128& h, Offset o, int64_t us, int64_t window_us) {
  if (open_ && (open_->count() >= kOpenHashesMax || !open_->fits(o) ||
                us - open_->first_us() > span_us_max(window_us)))
    seal(window_us);
  if (!open_) open_.emplace(o, us, open_slots_);
  open_->insert(h, o, us);
}

void HashRing::seal(int64_t window_us) {
  open_slots_ = open_->slots().size();
  sealed_.emplace_back(*open_);
  open_.reset();
  while (sealed_.size() >= 2) {
    const SealedGeneration& older = sealed_[sealed_.size() - 2];
    const SealedGeneration& newer = sealed_.back();
    bool alike = older.count() <= kMergeRatio * uint64_t{newer.count()};
    bool small = older.count() + uint64_t{newer.count()} <= kSealedHashesMax;
    bool short_span = newer.newest_us() - older.first_us() <= span_us_max(window_us);
    if (!alike || !small || !short_span || !older.can_merge(newer)) return;
    SealedGeneration merged(older, newer);
    sealed_.pop_back();
    sealed_.back() = std::move(merged);
  }
}

void HashRing::drop_below(int64_t floor_us) {
  while (!sealed_.empty() && sealed_.front().newest_us() < floor_us) sealed_.pop_front();
  if (sealed_.empty() && open_ && open_->newest_us() < floor_us) open_.reset();
}

void HashRing::add_sealed(SealedGeneration g) {
  QUEEN_ASSERT(!open_, "sealed generations are added before any insert");
  QUEEN_ASSERT(sealed_.empty() || sealed_.back().newest_us() <= g.newest_us(), "oldest first");
  sealed_.push_back(std::move(g));
}

void RingLoader::add(const Hash128& h, Offset o, int64_t us) {
  if (!pending_.empty() &&
      (pending_.size() >= HashRing::kSealedHashesMax || o.value < base_ ||
       o.value - base_ >= kRangeMax || us - first_us_ > HashRing::span_us_max(window_us_)))
    finish();
  if (pending_.empty()) {
    base_ = o.value;
    first_us_ = newest_us_ = us;
  }
  pending_.push_back(RingSlot{ring_key(h), static_cast<uint32_t>(o.value - base_)});
  newest_us_ = std::max(newest_us_, us);
}

void RingLoader::finish() {
  if (pending_.empty()) return;
  ring_.add_sealed(SealedGeneration(pending_, base_, first_us_, newest_us_));
  pending_.clear();
}

size_t HashRing::bytes() const {
  size_t n = open_ ? open_->bytes() : 0;
  for (const auto& g : sealed_) n += g.bytes();
  return n;
}

size_t InFlightHashes::home(PartitionId pid, const Hash128& h) const {
  // The hashes are xxh3-128: their low bits are already uniform.
  return static_cast<size_t>((h.lo ^ (pid.value * 0x9E3779B97F4A7C15ull)) & (slots_.size() - 1));
}

size_t InFlightHashes::slot_of(PartitionId pid, const Hash128& h) const {
  return probe::walk(slots_, home(pid, h),
                     [&](const Slot& s) { return !s.used || (s.pid == pid && s.hash == h); });
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

bool InFlightHashes::erase(PartitionId pid, const Hash128& h, Offset o) {
  if (count_ == 0) return false;
  size_t i = slot_of(pid, h);
  if (!slots_[i].used || slots_[i].offset != o) return false;
  probe::erase_at(
      slots_, i, [](const Slot& s) { return s.used; },
      [&](const Slot& s) { return home(s.pid, s.hash); });
  if (--count_ == 0 && slots_.size() >= kSlotsKeptMax) slots_ = {};
  return true;
}

void InFlightHashes::clear() {
  slots_ = {};
  count_ = 0;
}

DedupIndex::Rows::const_iterator DedupIndex::first_in_window(const PartitionState& p,
                                                             int64_t floor_us) {
  // Rows are in creation order as well as offset order.
  return std::lower_bound(p.rows.begin(), p.rows.end(), floor_us,
                          [](const AppendRow& r, int64_t v) { return r.created_us < v; });
}

Result<std::optional<Offset>> DedupIndex::scan(const PartitionState& p, const Hash128& h,
                                               int64_t floor_us) {
  auto it = first_in_window(p, floor_us);
  if (it == p.rows.end()) return std::optional<Offset>();
  return hashes_.find(p, h, it->base, p.next_offset);
}

Result<bool> DedupIndex::holds(const PartitionState& p, const Hash128& h, Offset o,
                               int64_t floor_us) {
  const AppendRow* row = p.row_of(o);
  if (!row || row->created_us < floor_us) return false;
  return hashes_.holds(p, o, h);
}

Result<HashRing*> DedupIndex::warm(const PartitionState& p, int64_t floor_us, int64_t window_us) {
  auto rit = rings_.find(p.id);
  if (rit != rings_.end()) {
    HashRing& ring = rit->second;
    ring.drop_below(floor_us);
    if (ring.covered() == p.next_offset) return &ring;
    auto caught_up = ring.generations() == 0 ? false : catch_up(p, ring, floor_us, window_us);
    if (!caught_up.ok()) return caught_up.error();
    if (caught_up.value()) return &ring;
    forget(rit);
  }
  auto first = first_in_window(p, floor_us);
  size_t hashes = 0;
  for (auto j = first; j != p.rows.end(); ++j) hashes += j->count;
  if (hashes <= kColdScanHashesMax && static_cast<size_t>(p.rows.end() - first) <= kColdScanRowsMax)
    return nullptr;
  HashRing ring;
  RingLoader loader(ring, window_us);
  auto st = hashes_.for_each(
      p, first, p.rows.cend(),
      [&](const Hash128& h, Offset o, const AppendRow& row) { loader.add(h, o, row.created_us); });
  if (!st.ok()) return st.error();
  loader.finish();
  ring.set_covered(p.next_offset);
  // Hashes still in flight land in the rows later: the filter must know them already.
  int64_t newest_us = p.rows.empty() ? floor_us : p.rows.back().created_us;
  in_flight_.for_each_of(p.id, [&](const InFlightHashes::Slot& s) {
    ring.insert(s.hash, s.offset, newest_us, window_us);
  });
  ring.set_last_use(++uses_);
  HashRing& built = rings_[p.id] = std::move(ring);
  built.set_counted_bytes(built.bytes());
  held_bytes_ += built.counted_bytes();
  evict_from(p.id);
  return &built;
}

Result<bool> DedupIndex::catch_up(const PartitionState& p, HashRing& ring, int64_t floor_us,
                                  int64_t window_us) {
  Offset from = ring.covered();
  if (p.next_offset < from) return false;
  auto first = std::lower_bound(p.rows.begin(), p.rows.end(), from,
                                [](const AppendRow& r, Offset o) { return r.base < o; });
  if (first != p.rows.begin() && from < std::prev(first)->end()) return false;
  first = std::max(first, first_in_window(p, floor_us));
  auto st = hashes_.for_each(p, first, p.rows.cend(),
                             [&](const Hash128& h, Offset o, const AppendRow& row) {
                               ring.insert(h, o, row.created_us, window_us);
                             });
  if (!st.ok()) return st.error();
  ring.set_covered(p.next_offset);
  ++stats_.catch_ups;
  return true;
}

Result<std::optional<Offset>> DedupIndex::find_committed(const PartitionState& p, HashRing* ring,
                                                         const Hash128& h, int64_t floor_us) {
  if (!ring) {
    ++stats_.exact_scans;
    return scan(p, h, floor_us);
  }
  ring->set_last_use(++uses_);
  std::optional<Error> failed;
  auto o = ring->find(h, [&](Offset c) {
    ++stats_.candidates;
    auto held = holds(p, h, c, floor_us);
    if (!held.ok()) failed = held.error();
    return held.ok() && held.value();
  });
  if (failed) return *failed;
  return o;
}

HashRing* DedupIndex::Run::held() const {
  auto rit = index_.rings_.find(pid_);
  return rit == index_.rings_.end() ? nullptr : &rit->second;
}

void DedupIndex::Run::warm() {
  if (warmed_) return;
  warmed_ = true;
  p_ = index_.store_.partition(pid_);
  if (!p_) return;
  auto ring = index_.warm(*p_, now_us_ - window_us_, window_us_);
  if (ring.ok()) {
    ring_ = ring.value();
  } else {
    failed_ = ring.error();
    ring_ = held();  // what a failed build left, for the plans
  }
}

Result<std::optional<DedupHit>> DedupIndex::Run::find(const Hash128& h) {
  ++index_.stats_.checks;
  warm();
  if (failed_) return *failed_;
  std::optional<DedupHit> hit;
  if (p_) {
    auto o = index_.find_committed(*p_, ring_, h, now_us_ - window_us_);
    if (!o.ok()) return o.error();
    if (o.value()) hit = DedupHit{*o.value(), {}};
  }
  if (!hit) {
    if (const InFlightHashes::Slot* s = index_.in_flight_.find(pid_, h))
      hit = DedupHit{s->offset, s->message_id};
  }
  if (hit) ++index_.stats_.duplicates;
  return hit;
}

void DedupIndex::Run::planned(const Hash128& h, Offset o, const Uuid& message_id) {
  index_.in_flight_.insert(pid_, h, o, message_id);
  if (ring_) ring_->insert(h, o, now_us_, window_us_);
}

void DedupIndex::applied(const EffAppend& a) {
  bool planned_here = a.hashes.size() == a.count;  // a follower's entry may carry them packed
  for (uint32_t i = 0; i < a.hashes.size(); ++i)
    planned_here = in_flight_.erase(a.pid, a.hashes[i], Offset(a.base.value + i)) && planned_here;
  auto rit = rings_.find(a.pid);
  if (rit == rings_.end()) return;
  HashRing& ring = rit->second;
  // An append this node did not plan (another leader's, or its own planned before a leader
  // change) is not in its ring: the ring goes, and warms again from the rows when next used,
  // unless it is kept to catch up from them (a ring behind the rows stays behind).
  if (!planned_here && !keep_stale_)
    forget(rit);
  else if (planned_here && ring.covered() == a.base)
    ring.set_covered(Offset(a.base.value + a.count));
}

int64_t DedupIndex::window_us_of(PartitionId pid) const {
  const PartitionState* p = store_.partition(pid);
  const QueueState* q = p ? store_.queue(p->queue) : nullptr;
  return q ? q->options.dedup_window_s * 1'000'000 : 0;
}

void DedupIndex::sweep(int64_t now_us, size_t rings_max) {
  auto it = rings_.lower_bound(sweep_from_);
  for (size_t looked = 0, n = std::min(rings_max, rings_.size()); looked < n; ++looked) {
    if (rings_.empty()) break;
    if (it == rings_.end()) it = rings_.begin();
    int64_t window_us = window_us_of(it->first);
    if (window_us > 0) it->second.drop_below(now_us - window_us);
    bool empty = window_us <= 0 || it->second.generations() == 0;
    it = empty ? forget(it) : std::next(it);
  }
  sweep_from_ = it == rings_.end() ? PartitionId() : it->first;
}

void DedupIndex::evict() {
  if (rings_bytes_max_ == 0) return;
  recount();
  evict_from(PartitionId());
}

void DedupIndex::evict_from(PartitionId keep) {
  if (rings_bytes_max_ == 0 || held_bytes_ <= rings_bytes_max_) return;
  struct Use {
    uint64_t last_use;
    PartitionId pid;
    bool operator<(const Use& o) const {
      return std::tie(last_use, pid) < std::tie(o.last_use, o.pid);
    }
  };
  std::vector<Use> uses;
  uses.reserve(rings_.size());
  for (const auto& [pid, ring] : rings_)
    if (pid != keep) uses.push_back({ring.last_use(), pid});
  std::sort(uses.begin(), uses.end());  // least recently used first (read back: never)
  size_t keep_max = rings_bytes_max_ - rings_bytes_max_ / 8;
  for (const Use& u : uses) {
    if (held_bytes_ <= keep_max) break;
    forget(rings_.find(u.pid));
    ++stats_.evictions;
  }
}

DedupIndex::Rings::iterator DedupIndex::forget(Rings::iterator it) {
  held_bytes_ -= std::min(held_bytes_, it->second.counted_bytes());
  return rings_.erase(it);
}

void DedupIndex::recount() {
  held_bytes_ = 0;
  for (auto& [pid, ring] : rings_) {
    ring.set_counted_bytes(ring.bytes());
    held_bytes_ += ring.counted_bytes();
  }
}

size_t DedupIndex::ring_bytes() const {
  size_t n = 0;
  for (const auto& [pid, ring] : rings_) n += ring.bytes();
  return n;
}

}  // namespace queen
