#include "core/qlog/row_hashes.h"

#include <algorithm>
#include <string>
#include <utility>

#include "core/qlog/log.h"
#include "core/qlog/record.h"

namespace queen {

namespace {

// The indexes [lo, hi) of `row`'s `count` hashes whose offsets lie in [from, to).
std::pair<uint64_t, uint64_t> indexes_in(const AppendRow& row, size_t count, Offset from,
                                         Offset to) {
  uint64_t lo = from.value > row.base.value ? from.value - row.base.value : 0;
  uint64_t hi = std::min<uint64_t>(count, to.value - row.base.value);
  return {lo, hi};
}

}  // namespace

Status RowHashes::read(PartitionId pid, const AppendRow& row, std::vector<Hash128>* out) {
  if (row.record_len == 0)
    return make_error(Errc::not_found, "append row at offset " + std::to_string(row.base.value) +
                                           " has neither hashes nor a record");
  if (row.count > kRecordBodyBytesMax / sizeof(Hash128))
    return make_error(Errc::corrupt, "append row at offset " + std::to_string(row.base.value) +
                                         " counts more messages than a record holds");
  uint64_t len = kRecordHeaderBytes + uint64_t{row.count} * sizeof(Hash128);
  RecordLocation where = row.where();
  auto bytes = env_.read(log_file_name(where.log, where.file_no), where.pos, len);
  if (!bytes.ok()) return bytes.error();
  const Bytes& b = bytes.value();
  ++stats_.reads;
  stats_.read_bytes += b.size();
  ByteReader r(b.data(), b.size());
  r.u32();  // length
  r.u64();  // checksum: it covers the frames too, which are not read
  r.u64();  // seq
  uint64_t rec_pid = r.u64(), base = r.u64();
  uint32_t count = r.u32();
  r.i64();
  auto kind = static_cast<RecordKind>(r.u8());
  if (!r.ok() || kind != RecordKind::message || rec_pid != pid.value || base != row.base.value ||
      count != row.count)
    return make_error(Errc::corrupt,
                      "the message record of partition " + std::to_string(pid.value) + " offset " +
                          std::to_string(row.base.value) + " does not match its row");
  out->resize(count);
  for (Hash128& h : *out) h = r.hash();
  if (!r.ok()) return make_error(Errc::truncated, "a message record ends inside its hashes");
  return ok_status();
}

std::list<RowHashes::Cached>::iterator RowHashes::cached(const Key& key) {
  auto it = lru_.begin();
  for (int i = 0; i < kRecentRows && it != lru_.end(); ++i, ++it)
    if (it->key == key) return it;
  auto found = index_.find(key);
  return found == index_.end() ? lru_.end() : found->second;
}

Result<std::span<const Hash128>> RowHashes::of(PartitionId pid, const AppendRow& row) {
  if (row.hashes_inline()) return std::span<const Hash128>(row.hashes.begin(), row.hashes.size());
  Key key{pid, row.base};
  if (auto it = cached(key); it != lru_.end()) {
    ++stats_.cache_hits;
    lru_.splice(lru_.begin(), lru_, it);
    return std::span<const Hash128>(it->hashes);
  }
  if (auto st = read(pid, row, &scratch_); !st.ok()) return st.error();
  if (weight(scratch_.size()) > cache_bytes_max_) return std::span<const Hash128>(scratch_);
  remember(pid, row.base, scratch_);
  return std::span<const Hash128>(lru_.front().hashes);
}

void RowHashes::remember(PartitionId pid, Offset base, const std::vector<Hash128>& hashes) {
  uint64_t w = weight(hashes.size());
  if (w > cache_bytes_max_) return;
  Key key{pid, base};
  if (auto it = cached(key); it != lru_.end()) {
    lru_.splice(lru_.begin(), lru_, it);
    return;
  }
  evict_to(cache_bytes_max_ - w);
  lru_.push_front(Cached{key, hashes});
  index_[key] = lru_.begin();
  cache_bytes_ += w;
}

void RowHashes::evict_to(uint64_t bytes_max) {
  while (cache_bytes_ > bytes_max && !lru_.empty()) {
    cache_bytes_ -= weight(lru_.back().hashes.size());
    index_.erase(lru_.back().key);
    lru_.pop_back();
  }
}

Result<std::optional<Offset>> RowHashes::find(const PartitionState& p, const Hash128& h,
                                              Offset from, Offset to, uint64_t rows_max) {
  for (auto it = row_from(p, from); it != p.rows.end() && it->base < to && rows_max > 0; ++it) {
    if (it->end() <= from) continue;
    --rows_max;
    auto found = find_in(p.id, *it, h, from, to, false);
    if (!found.ok() || found.value()) return found;
  }
  return std::optional<Offset>();
}

Status RowHashes::collect(const PartitionState& p, Offset from, Offset to,
                          std::vector<std::pair<Hash128, Offset>>* out) {
  for (auto it = row_from(p, from); it != p.rows.end() && it->base < to; ++it) {
    if (it->end() <= from) continue;
    auto hs = of(p.id, *it);
    if (!hs.ok()) return hs.error();
    std::span<const Hash128> v = hs.value();
    auto [lo, hi] = indexes_in(*it, v.size(), from, to);
    for (uint64_t i = lo; i < hi; ++i) out->emplace_back(v[i], Offset(it->base.value + i));
  }
  return ok_status();
}

const AppendRow* RowHashes::row_from(const PartitionState& p, Offset from) {
  auto it = std::upper_bound(p.rows.begin(), p.rows.end(), from,
                             [](Offset v, const AppendRow& r) { return v < r.base; });
  return it == p.rows.begin() ? it : it - 1;
}

Result<std::optional<Offset>> RowHashes::find_last(const PartitionState& p, const Hash128& h,
                                                   Offset from, Offset to, uint64_t rows_max) {
  auto it = std::lower_bound(p.rows.begin(), p.rows.end(), to,
                             [](const AppendRow& r, Offset v) { return r.base < v; });
  while (it != p.rows.begin() && rows_max > 0) {
    --it;
    if (it->end() <= from) break;
    --rows_max;
    auto found = find_in(p.id, *it, h, from, to, true);
    if (!found.ok() || found.value()) return found;
  }
  return std::optional<Offset>();
}

Result<std::optional<Offset>> RowHashes::find_in(PartitionId pid, const AppendRow& row,
                                                 const Hash128& h, Offset from, Offset to,
                                                 bool last) {
  auto hs = of(pid, row);
  if (!hs.ok()) return hs.error();
  std::span<const Hash128> v = hs.value();
  auto [lo, hi] = indexes_in(row, v.size(), from, to);
  for (uint64_t n = lo; n < hi; ++n) {
    uint64_t i = last ? hi - 1 - (n - lo) : n;
    if (v[i] == h) return std::optional<Offset>(Offset(row.base.value + i));
  }
  return std::optional<Offset>();
}

Result<bool> RowHashes::holds(const PartitionState& p, Offset o, const Hash128& h) {
  const AppendRow* row = p.row_of(o);
  if (!row) return false;
  auto hs = of(p.id, *row);
  if (!hs.ok()) return hs.error();
  uint64_t i = o.value - row->base.value;
  return i < hs.value().size() && hs.value()[i] == h;
}

}  // namespace queen
