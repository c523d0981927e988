#include "io/real/start_arena.h"

#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cmath>

#include "io/real/log.h"
#include "io/real/thread_name.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14
#endif

namespace queen::real {

namespace {

constexpr uint64_t kAlignBytes = 64ull << 20;
constexpr uint64_t kPageBytes = 4096;

// Reads a byte of each page. The populate maps the pages, but under a paravirtualised page
// table the hypervisor's entry for a page is made at its first access from user space:
// without this read, the decoder's first write to each populated page still cost about half
// of a whole fault. An atomic load: the decoder may be writing to the page already.
void touch(char* start, uint64_t bytes) {
  unsigned sum = 0;
  for (uint64_t at = 0; at < bytes; at += kPageBytes)
    sum += static_cast<unsigned char>(__atomic_load_n(start + at, __ATOMIC_RELAXED));
  asm volatile("" : : "r"(sum));
}

}  // namespace

uint64_t StartArena::target_bytes(const StartArenaOptions& o, uint64_t read, uint64_t arena_bytes) {
  double want =
      static_cast<double>(read) * o.bytes_per_checkpoint_byte + static_cast<double>(o.lead_bytes);
  uint64_t steps = static_cast<uint64_t>(std::ceil(want / static_cast<double>(o.step_bytes)));
  return std::min(arena_bytes, steps * o.step_bytes);
}

StartArena::StartArena(StartArenaOptions options, uint64_t checkpoint_bytes, const Adopt& adopt,
                       Progress progress)
    : options_(options), progress_(std::move(progress)) {
  if (!adopt || checkpoint_bytes < options_.checkpoint_bytes_min) return;
  // The allocator takes whole aligned blocks (mimalloc: 32 MiB segments).
  double want = static_cast<double>(checkpoint_bytes) * options_.bytes_per_checkpoint_byte;
  uint64_t bytes = static_cast<uint64_t>(std::ceil(want / kAlignBytes)) * kAlignBytes;
  void* p = ::mmap(nullptr, bytes + kAlignBytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return;
  auto at = reinterpret_cast<uintptr_t>(p);
  uintptr_t aligned = (at + kAlignBytes - 1) / kAlignBytes * kAlignBytes;
  if (aligned > at) ::munmap(p, aligned - at);
  uintptr_t end = aligned + bytes;  // below at + bytes + kAlignBytes: the tail goes too
  ::munmap(reinterpret_cast<void*>(end), at + bytes + kAlignBytes - end);
  if (!adopt(reinterpret_cast<void*>(aligned), bytes)) {
    ::munmap(reinterpret_cast<void*>(aligned), bytes);
    return;
  }
  base_ = reinterpret_cast<char*>(aligned);
  bytes_ = bytes;
  // Huge pages where the system allows them (transparent_hugepage "madvise" or "always"):
  // one fault maps 2 MiB, and the decoder's writes miss the TLB far less. Refused (THP off),
  // the arena stays in 4 KiB pages.
  ::madvise(base_, bytes_, MADV_HUGEPAGE);
  log_line(LogLevel::info, "start",
           "faulting in " + std::to_string(bytes >> 20) + " MiB for the load on a helper thread");
  helper_ = std::thread([this] {
    name_this_thread("queen-start");
    run();
  });
}

StartArena::~StartArena() {
  finish();
}

void StartArena::finish() {
  {
    std::lock_guard lock(mutex_);
    finished_ = true;
  }
  cv_.notify_all();
  if (helper_.joinable()) helper_.join();
}

void StartArena::run() {
  uint64_t done = 0;
  std::unique_lock lock(mutex_);
  while (!finished_ && done < bytes_) {
    uint64_t target = target_bytes(options_, progress_(), bytes_);
    if (target <= done) {
      cv_.wait_for(lock, std::chrono::milliseconds(options_.poll_ms));
      continue;
    }
    lock.unlock();
    uint64_t step = std::min(options_.step_bytes, target - done);
    // A failure (an old kernel) only means the decoder faults the pages in itself.
    if (::madvise(base_ + done, step, MADV_POPULATE_WRITE) != 0) {
      lock.lock();
      break;
    }
    touch(base_ + done, step);
    done += step;
    populated_.store(done, std::memory_order_release);
    lock.lock();
  }
}

}  // namespace queen::real
