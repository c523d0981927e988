// What this machine charges for memory a process touches for the first time: the floor under
// any start that must place a large store in fresh memory (a restart at 10M partitions holds
// about 1.75 GiB). Maps MIB of anonymous memory and writes one byte a 4 KiB page, in four
// ways: one thread; the same mapping pre-faulted by the kernel (MAP_POPULATE); transparent
// huge pages asked for (MADV_HUGEPAGE); two threads each faulting half.
// Usage: queen-fault-floor [MIB] (default 1000). Prints figures; it is not a test.
#include <sys/mman.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

namespace {

constexpr size_t kPageBytes = 4096;

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void touch(char* p, size_t bytes) {
  for (size_t i = 0; i < bytes; i += kPageBytes) p[i] = 1;
}

char* map_fresh(size_t bytes, int extra_flags) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | extra_flags,
                 -1, 0);
  if (p == MAP_FAILED) {
    std::perror("mmap");
    std::exit(1);
  }
  return static_cast<char*>(p);
}

void report(const char* how, size_t bytes, double s) {
  std::printf("%-28s %6.2f s for %zu MiB: %5.2f us a 4 KiB page, %6.0f MiB/s\n", how, s,
              bytes >> 20, s / static_cast<double>(bytes / kPageBytes) * 1e6,
              static_cast<double>(bytes >> 20) / s);
}

}  // namespace

int main(int argc, char** argv) {
  size_t bytes = static_cast<size_t>(argc > 1 ? std::atol(argv[1]) : 1000) << 20;
  {
    auto t0 = std::chrono::steady_clock::now();
    char* p = map_fresh(bytes, 0);
    touch(p, bytes);
    report("one thread", bytes, seconds_since(t0));
    munmap(p, bytes);
  }
  {
    auto t0 = std::chrono::steady_clock::now();
    char* p = map_fresh(bytes, MAP_POPULATE);
    touch(p, bytes);
    report("MAP_POPULATE", bytes, seconds_since(t0));
    munmap(p, bytes);
  }
  {
    auto t0 = std::chrono::steady_clock::now();
    char* p = map_fresh(bytes, 0);
    madvise(p, bytes, MADV_HUGEPAGE);
    touch(p, bytes);
    report("MADV_HUGEPAGE", bytes, seconds_since(t0));
    munmap(p, bytes);
  }
  {
    auto t0 = std::chrono::steady_clock::now();
    char* p = map_fresh(bytes, 0);
    size_t half = bytes / 2 / kPageBytes * kPageBytes;
    std::vector<std::thread> threads;
    threads.emplace_back([p, half] { touch(p, half); });
    threads.emplace_back([p, half, bytes] { touch(p + half, bytes - half); });
    for (auto& t : threads) t.join();
    report("two threads, half each", bytes, seconds_since(t0));
    munmap(p, bytes);
  }
  return 0;
}
