// Memory for a large start-up load, faulted in on a second thread while the node thread
// decodes into it. On this kind of machine a page's first touch costs 10-14 us (a
// paravirtualised page table, docs/BENCHMARKS.md "The first touch of memory"), so a start
// that places 1.75 GiB spent more than half its time in page faults on the node thread.
//
// Contract:
// - Only for a checkpoint of at least checkpoint_bytes_min: an arena of
//   bytes_per_checkpoint_byte times the largest checkpoint file's size (address space, not
//   memory), aligned to 64 MiB, is handed to the allocator by `adopt` (the broker's mimalloc:
//   mi_manage_os_memory) as committed and zeroed. Without an adopter, or when it refuses,
//   nothing else happens. The arena is advised for transparent huge pages (MADV_HUGEPAGE),
//   which the system may refuse.
// - A helper thread faults the arena in from its start, a step at a time, never further than
//   target_bytes(): lead_bytes past bytes_per_checkpoint_byte times the checkpoint bytes
//   read so far (`progress`). Each step is populated (MADV_POPULATE_WRITE, which maps only
//   missing pages) and then read a byte a page, so the decoder's writes find every level of
//   the page table ready. What it makes resident beyond what the load uses is bounded by the
//   arena's size; the allocator takes the arena first for later allocations.
// - finish() (the load is over) stops the helper; the arena stays the allocator's.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>

namespace queen::real {

struct StartArenaOptions {
  uint64_t checkpoint_bytes_min = 256ull << 20;
  // 10M partitions: about 1.7 GiB used for a checkpoint of 1.13 GB, the name table's 128 MiB
  // among it (a start takes the table first: PartitionNames::reserve).
  double bytes_per_checkpoint_byte = 1.6;
  uint64_t lead_bytes = 256ull << 20;
  uint64_t step_bytes = 8ull << 20;
  int64_t poll_ms = 1;  // how often the helper looks at the progress once it is ahead
};

class StartArena {
 public:
  using Adopt = std::function<bool(void* start, uint64_t bytes)>;
  using Progress = std::function<uint64_t()>;  // checkpoint bytes read so far

  StartArena(StartArenaOptions options, uint64_t checkpoint_bytes, const Adopt& adopt,
             Progress progress);
  ~StartArena();
  StartArena(const StartArena&) = delete;
  StartArena& operator=(const StartArena&) = delete;

  void finish();
  bool active() const { return base_ != nullptr; }
  uint64_t bytes() const { return bytes_; }
  uint64_t populated_bytes() const { return populated_.load(std::memory_order_acquire); }

  // How far the helper may fault in once `read` checkpoint bytes were read: a multiple of
  // step_bytes, at most `arena_bytes`.
  static uint64_t target_bytes(const StartArenaOptions& o, uint64_t read, uint64_t arena_bytes);

 private:
  void run();

  StartArenaOptions options_;
  Progress progress_;
  char* base_ = nullptr;
  uint64_t bytes_ = 0;
  std::atomic<uint64_t> populated_{0};
  std::mutex mutex_;
  std::condition_variable cv_;
  bool finished_ = false;
  std::thread helper_;
};

}  // namespace queen::real
