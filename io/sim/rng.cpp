#include "io/sim/rng.h"

#include "core/common/assert.h"

namespace queen::sim {

uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

uint64_t stream_seed(uint64_t run_seed, std::string_view name) {
  uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a over the name
  for (char c : name) {
    h ^= static_cast<uint8_t>(c);
    h *= 0x100000001b3ULL;
  }
  return mix64(mix64(run_seed) ^ h);
}

uint64_t Rng::next() {
  state_ += 0x9e3779b97f4a7c15ULL;
  uint64_t z = state_;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

uint64_t Rng::below(uint64_t n) {
  QUEEN_ASSERT(n > 0, "Rng::below(0)");
  return static_cast<uint64_t>((static_cast<unsigned __int128>(next()) * n) >> 64);
}

int64_t Rng::range(int64_t lo, int64_t hi) {
  QUEEN_ASSERT(lo <= hi, "Rng::range with lo > hi");
  return lo + static_cast<int64_t>(below(static_cast<uint64_t>(hi - lo) + 1));
}

}  // namespace queen::sim
