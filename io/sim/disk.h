// SimDisk: one simulated node's disk, a set of named files that outlives the node's crashes.
//
// Model: each file is its bytes (the view a read sees) plus a durable prefix. append() extends
// the volatile suffix; a sync covers the bytes present when it was called and, when it
// succeeds, makes them durable. truncate() and remove() are durable at once. Syncs of one
// file complete in call order.
//
// Fault model (all draws from the disk's own seeded stream):
// - a sync fails with fault_rates.sync_fail_per_mille; the file's state is then unknown to the
//   node (the bytes stay volatile), and the node must stop;
// - a read that covers volatile bytes returns, with read_corrupt_per_mille, one garbled
//   512-byte sector of them (the stored bytes stay intact);
// - at a crash, each file's volatile suffix is kept whole (crash_keep_per_mille), cut mid-write
//   with its last sector torn (crash_torn_per_mille: garbled or zeroed, never below the durable
//   prefix), or else cut at a write boundary (whole writes dropped). Write order within a file
//   is preserved: what is lost is always a suffix. Durable bytes are never changed.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/common/bytes.h"
#include "core/common/result.h"
#include "io/env.h"
#include "io/sim/rng.h"

namespace queen::sim {

struct DiskFaultRates {
  int64_t sync_latency_us_min = 50;
  int64_t sync_latency_us_max = 2000;
  uint32_t sync_slow_per_mille = 0;  // a slow sync takes up to sync_slow_us_max
  int64_t sync_slow_us_max = 50'000;
  uint32_t sync_fail_per_mille = 0;
  uint32_t read_corrupt_per_mille = 0;
  uint32_t crash_keep_per_mille = 334;
  uint32_t crash_torn_per_mille = 333;
  // The disk writer (io/real/disk.h): appends wait in a FIFO the writer drains at this rate;
  // a sync completes only once what was queued before it is written. An append that leaves
  // more than writer_queue_bytes_max queued blocks the node until there is room again
  // (backpressure). 0: the writer keeps up with anything.
  uint64_t writer_bytes_per_ms = 0;
  uint64_t writer_queue_bytes_max = 0;
};

struct SyncPlan {
  int64_t done_at_us = 0;   // virtual time of the completion
  uint64_t upto_bytes = 0;  // the file's size when sync was called
  bool ok = true;
};

// What a crash did to the disk.
struct CrashReport {
  uint64_t files_with_volatile_bytes = 0;
  uint64_t files_kept = 0;
  uint64_t writes_dropped = 0;
  uint64_t torn_writes = 0;
  uint64_t bytes_lost = 0;
};

class SimDisk {
 public:
  static constexpr uint64_t kSectorBytes = 512;
  static constexpr size_t kFilesMax = 1 << 16;
  static constexpr size_t kVolatileWritesMax = 1 << 20;  // per file, between syncs
  static constexpr int64_t kWriterOpUs = 5;              // the writer's cost of one append

  SimDisk(Rng rng, DiskFaultRates rates) : rng_(rng), rates_(rates) {}

  void set_rates(const DiskFaultRates& rates) { rates_ = rates; }
  const DiskFaultRates& rates() const { return rates_; }

  void append(const std::string& file, const Bytes& data);
  // Queues `bytes` of appends for the writer at now_us; returns when the node may go on: now
  // or later, once the FIFO has room again (DiskFaultRates::writer_*).
  int64_t queue_write(uint64_t bytes, int64_t now_us);
  // Decides the latency and the outcome of a sync called at virtual time now_us.
  SyncPlan plan_sync(const std::string& file, int64_t now_us);
  // A successful sync completed: bytes below min(upto_bytes, size) become durable.
  void complete_sync(const std::string& file, uint64_t upto_bytes);
  // Reads [pos, pos+len) clipped to the file's size. *corrupted tells whether a volatile
  // sector of the copy was garbled.
  Result<Bytes> read(const std::string& file, uint64_t pos, uint64_t len, bool* corrupted);
  Status truncate(const std::string& file, uint64_t size_bytes);
  Status remove(const std::string& file);
  // Moves a fully durable file to `to` (replacing it); durable at once.
  Status rename(const std::string& from, const std::string& to);
  std::vector<FileInfo> list() const;

  // The machine lost power (or the process died): decides the fate of every volatile suffix.
  // Afterwards every byte left is durable.
  CrashReport crash();

  // The disk is replaced by an empty one (the node must be down).
  void wipe() {
    files_.clear();
    writer_free_at_us_ = 0;
  }

  // Files holding bytes not yet durable (a crash now decides their fate one by one).
  size_t volatile_files() const;

  // Inspection for tests and the checker.
  bool exists(const std::string& file) const { return files_.count(file) != 0; }
  uint64_t size(const std::string& file) const;
  uint64_t durable_size(const std::string& file) const;
  const Bytes* contents(const std::string& file) const;

 private:
  struct File {
    Bytes data;
    uint64_t durable_bytes = 0;
    std::vector<uint64_t> write_starts;  // starts of volatile appends, increasing
    int64_t last_sync_done_us = 0;
  };
  void crash_file(File& f, CrashReport* report);
  void tear(File& f, uint64_t cut_bytes);

  std::map<std::string, File> files_;
  int64_t writer_free_at_us_ = 0;  // the writer has written everything queued by then
  Rng rng_;
  DiskFaultRates rates_;
};

}  // namespace queen::sim
