#include "io/sim/disk.h"

#include <algorithm>
#include <cstddef>

#include "core/common/assert.h"

namespace queen::sim {

void SimDisk::append(const std::string& file, const Bytes& data) {
  auto [it, created] = files_.try_emplace(file);
  QUEEN_ASSERT(!created || files_.size() <= kFilesMax, "SimDisk: too many files");
  File& f = it->second;
  if (data.empty()) return;
  QUEEN_ASSERT(f.write_starts.size() < kVolatileWritesMax, "SimDisk: too many volatile writes");
  f.write_starts.push_back(f.data.size());
  f.data.insert(f.data.end(), data.begin(), data.end());
}

int64_t SimDisk::queue_write(uint64_t bytes, int64_t now_us) {
  uint64_t rate = rates_.writer_bytes_per_ms;
  if (rate == 0) return now_us;
  int64_t start = std::max(now_us, writer_free_at_us_);
  writer_free_at_us_ = start + static_cast<int64_t>(bytes * 1000 / rate) + kWriterOpUs;
  int64_t room_us = static_cast<int64_t>(rates_.writer_queue_bytes_max * 1000 / rate);
  return std::max(now_us, writer_free_at_us_ - room_us);
}

SyncPlan SimDisk::plan_sync(const std::string& file, int64_t now_us) {
  SyncPlan plan;
  int64_t latency_us = rng_.range(rates_.sync_latency_us_min, rates_.sync_latency_us_max);
  if (rates_.sync_slow_per_mille > 0 && rng_.per_mille(rates_.sync_slow_per_mille)) {
    latency_us = rng_.range(rates_.sync_latency_us_max, rates_.sync_slow_us_max);
  }
  plan.ok = !(rates_.sync_fail_per_mille > 0 && rng_.per_mille(rates_.sync_fail_per_mille));
  plan.done_at_us = std::max(now_us, writer_free_at_us_) + latency_us;  // after the FIFO
  auto it = files_.find(file);
  if (it == files_.end()) return plan;
  File& f = it->second;
  plan.done_at_us = std::max(plan.done_at_us, f.last_sync_done_us);  // syncs finish in order
  f.last_sync_done_us = plan.done_at_us;
  plan.upto_bytes = f.data.size();
  return plan;
}

void SimDisk::complete_sync(const std::string& file, uint64_t upto_bytes) {
  auto it = files_.find(file);
  if (it == files_.end()) return;
  File& f = it->second;
  uint64_t upto = std::min<uint64_t>(upto_bytes, f.data.size());
  if (upto <= f.durable_bytes) return;
  f.durable_bytes = upto;
  // Drop the writes now wholly durable; a write straddling `upto` stays (its tail is volatile).
  size_t keep_from = 0;
  size_t n = f.write_starts.size();
  while (keep_from < n) {
    uint64_t end = keep_from + 1 < n ? f.write_starts[keep_from + 1] : f.data.size();
    if (end > upto) break;
    ++keep_from;
  }
  f.write_starts.erase(f.write_starts.begin(),
                       f.write_starts.begin() + static_cast<ptrdiff_t>(keep_from));
}

Result<Bytes> SimDisk::read(const std::string& file, uint64_t pos, uint64_t len, bool* corrupted) {
  *corrupted = false;
  auto it = files_.find(file);
  if (it == files_.end()) return make_error(Errc::not_found, "sim disk: no file " + file);
  const File& f = it->second;
  if (pos > f.data.size()) return make_error(Errc::truncated, "sim disk: read past end");
  uint64_t end = pos + std::min<uint64_t>(len, f.data.size() - pos);
  Bytes out(f.data.begin() + static_cast<ptrdiff_t>(pos),
            f.data.begin() + static_cast<ptrdiff_t>(end));
  uint64_t volatile_from = std::max(pos, f.durable_bytes);
  if (end > volatile_from && rates_.read_corrupt_per_mille > 0 &&
      rng_.per_mille(rates_.read_corrupt_per_mille)) {
    uint64_t b = volatile_from + rng_.below(end - volatile_from);
    uint64_t sector = b / kSectorBytes * kSectorBytes;
    uint64_t from = std::max(sector, volatile_from);
    uint64_t to = std::min(sector + kSectorBytes, end);
    for (uint64_t i = from; i < to; ++i) out[i - pos] ^= static_cast<uint8_t>(1 + rng_.below(255));
    *corrupted = true;
  }
  return out;
}

Status SimDisk::truncate(const std::string& file, uint64_t size_bytes) {
  auto it = files_.find(file);
  if (it == files_.end()) return make_error(Errc::not_found, "sim disk: no file " + file);
  File& f = it->second;
  f.data.resize(size_bytes, 0);
  f.durable_bytes = std::min<uint64_t>(f.durable_bytes, size_bytes);
  while (!f.write_starts.empty() && f.write_starts.back() >= size_bytes) f.write_starts.pop_back();
  if (f.durable_bytes < size_bytes && f.write_starts.empty()) f.durable_bytes = size_bytes;
  return ok_status();
}

Status SimDisk::remove(const std::string& file) {
  if (files_.erase(file) == 0) return make_error(Errc::not_found, "sim disk: no file " + file);
  return ok_status();
}

Status SimDisk::rename(const std::string& from, const std::string& to) {
  auto it = files_.find(from);
  if (it == files_.end()) return make_error(Errc::not_found, "sim disk: no file " + from);
  QUEEN_ASSERT(it->second.durable_bytes == it->second.data.size(), "rename of a volatile file");
  File f = std::move(it->second);
  files_.erase(it);
  files_[to] = std::move(f);
  return ok_status();
}

std::vector<FileInfo> SimDisk::list() const {
  std::vector<FileInfo> out;
  out.reserve(files_.size());
  for (const auto& [name, f] : files_) out.push_back(FileInfo{name, f.data.size()});
  return out;
}

CrashReport SimDisk::crash() {
  CrashReport report;
  writer_free_at_us_ = 0;  // the FIFO was the process's: what it held is volatile, decided here
  for (auto& [name, f] : files_) crash_file(f, &report);
  return report;
}

void SimDisk::crash_file(File& f, CrashReport* report) {
  uint64_t size = f.data.size();
  if (size > f.durable_bytes && !f.write_starts.empty()) {
    ++report->files_with_volatile_bytes;
    uint64_t r = rng_.below(1000);
    uint64_t keep = rates_.crash_keep_per_mille;
    uint64_t torn = rates_.crash_torn_per_mille;
    uint64_t cut = size;
    if (r < keep) {
      ++report->files_kept;
    } else if (r < keep + torn) {
      cut = static_cast<uint64_t>(
          rng_.range(static_cast<int64_t>(f.durable_bytes) + 1, static_cast<int64_t>(size)));
      ++report->torn_writes;
    } else {
      size_t i = rng_.below(f.write_starts.size());
      cut = std::max(f.write_starts[i], f.durable_bytes);
      report->writes_dropped += f.write_starts.size() - i;
    }
    report->bytes_lost += size - cut;
    f.data.resize(cut);
    if (r >= keep && r < keep + torn) tear(f, cut);
  }
  f.durable_bytes = f.data.size();
  f.write_starts.clear();
  f.last_sync_done_us = 0;
}

// Garbles the last sector of f.data (up to `cut_bytes`), never below the durable prefix:
// zeroes (the sector never reached the platter) or random bytes (a half-written sector).
void SimDisk::tear(File& f, uint64_t cut_bytes) {
  uint64_t sector = (cut_bytes - 1) / kSectorBytes * kSectorBytes;
  uint64_t from = std::max(sector, f.durable_bytes);
  bool zeroes = rng_.per_mille(500);
  for (uint64_t i = from; i < cut_bytes; ++i) {
    f.data[i] = zeroes ? 0 : static_cast<uint8_t>(rng_.next());
  }
}

size_t SimDisk::volatile_files() const {
  size_t n = 0;
  for (const auto& [name, f] : files_) n += f.data.size() > f.durable_bytes ? 1 : 0;
  return n;
}

uint64_t SimDisk::size(const std::string& file) const {
  auto it = files_.find(file);
  return it == files_.end() ? 0 : it->second.data.size();
}

uint64_t SimDisk::durable_size(const std::string& file) const {
  auto it = files_.find(file);
  return it == files_.end() ? 0 : it->second.durable_bytes;
}

const Bytes* SimDisk::contents(const std::string& file) const {
  auto it = files_.find(file);
  return it == files_.end() ? nullptr : &it->second.data;
}

}  // namespace queen::sim
