// Times a push's dedup lookups against the hash rings, as the planner makes them: runs of 100
// new hashes into one of 200 partitions' rings (about 2,500 a partition a second, a 3600 s
// window), each hash looked up and then inserted, with the loads prefetched in one of three
// ways. Between runs a buffer the size of a push body is written, as parsing one would. Each
// way runs on its own copy of the same rings; rounds alternate the ways. Prints nanoseconds a
// hash (the median of the rounds) and each way's ratio to the first; a benchmark, not a test.
//   queen-dedup-bench [rounds] [seconds_filled] [seconds_measured]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/planner/dedup.h"
#include "core/planner/planner.h"

namespace {

using queen::Hash128;
using queen::HashRing;
using queen::Offset;

constexpr int kRings = 200;
constexpr size_t kRunItems = 100;
constexpr size_t kAhead = queen::Planner::kPrefetchAhead;
constexpr int64_t kWindowUs = 3600'000'000;
constexpr int64_t kRunUs = 200;  // 100 hashes every 200 us: 500k a second in all
constexpr size_t kBodyBytes = 40 * 1024;

struct Rings {
  std::vector<HashRing> rings = std::vector<HashRing>(kRings);
  std::vector<uint64_t> next = std::vector<uint64_t>(kRings, 0);
  uint64_t rng = 0x9E3779B97F4A7C15ull;
  int64_t now_us = 0;
  uint64_t runs = 0;

  uint64_t rand() {  // splitmix64
    uint64_t z = (rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
};

enum class Way { none, upfront, ahead };
constexpr int kWays = 3;
const char* const kWayNames[] = {"no prefetch", "all at the run's start", "8 items ahead"};

// One push's run into a ring: returns the hashes found (none are: every hash is new).
size_t run(Rings& r, Way way, std::vector<char>& body) {
  std::memset(body.data(), static_cast<int>(r.runs++ & 0xff), body.size());
  int k = static_cast<int>(r.rand() % kRings);
  HashRing& ring = r.rings[static_cast<size_t>(k)];
  Hash128 hs[kRunItems];
  for (auto& h : hs) h = Hash128{r.rand(), r.rand()};
  if (way == Way::upfront)
    for (const auto& h : hs) ring.prefetch(h);
  if (way == Way::ahead)
    for (size_t i = 0; i < kAhead; ++i) ring.prefetch(hs[i]);
  size_t found = 0;
  for (size_t i = 0; i < kRunItems; ++i) {
    if (way == Way::ahead && i + kAhead < kRunItems) ring.prefetch(hs[i + kAhead]);
    if (ring.find(hs[i], [](Offset) { return false; })) ++found;
    ring.insert(hs[i], Offset(r.next[static_cast<size_t>(k)]++), r.now_us, kWindowUs);
  }
  r.now_us += kRunUs;
  return found;
}

double ns_per_hash(Rings r, Way way, uint64_t runs, std::vector<char>& body) {
  auto t0 = std::chrono::steady_clock::now();
  size_t found = 0;
  for (uint64_t i = 0; i < runs; ++i) found += run(r, way, body);
  auto t1 = std::chrono::steady_clock::now();
  if (found != 0) std::printf("unexpected: %zu new hashes found\n", found);
  return std::chrono::duration<double, std::nano>(t1 - t0).count() / double(runs * kRunItems);
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = argc > 1 ? std::atoi(argv[1]) : 5;
  double filled_s = argc > 2 ? std::atof(argv[2]) : 10;
  double measured_s = argc > 3 ? std::atof(argv[3]) : 1;
  std::vector<char> body(kBodyBytes);
  Rings base;
  auto runs_of = [](double s) { return static_cast<uint64_t>(s * 1e6 / kRunUs); };
  for (uint64_t i = 0, n = runs_of(filled_s); i < n; ++i) run(base, Way::none, body);
  size_t bytes = 0, gens = 0;
  for (const auto& ring : base.rings) bytes += ring.bytes(), gens += ring.generations();
  std::printf("rings=%d hashes=%llu ring_bytes=%zu generations_per_ring=%.1f\n", kRings,
              static_cast<unsigned long long>(base.runs * kRunItems), bytes, double(gens) / kRings);
  std::vector<std::vector<double>> ns(kWays);
  for (int round = 0; round < rounds; ++round)
    for (int w = 0; w < kWays; ++w)
      ns[static_cast<size_t>(w)].push_back(
          ns_per_hash(base, static_cast<Way>(w), runs_of(measured_s), body));
  double first = 0;
  for (int w = 0; w < kWays; ++w) {
    auto& v = ns[static_cast<size_t>(w)];
    std::sort(v.begin(), v.end());
    double median = v[v.size() / 2];
    if (w == 0) first = median;
    std::printf("%-28s %7.1f ns a hash  %.2fx\n", kWayNames[w], median, first / median);
  }
}
