// Seeded randomness for the simulator. A run has one seed; every consumer of randomness (a
// node's random_u64, a disk's fault decisions, the client network, each simulated client)
// draws from its own named stream whose seed is derived from (run seed, stream name). Adding
// a stream or a fault kind therefore never reshuffles the draws of the others.
//
// Contract: the same (seed, name) gives the same sequence on every platform; nothing here
// reads the wall clock or the OS.
#pragma once

#include <cstdint>
#include <string_view>

namespace queen::sim {

// One splitmix64 step used as a 64-bit mixing function.
uint64_t mix64(uint64_t x);
// The seed of the stream `name` of the run `run_seed`.
uint64_t stream_seed(uint64_t run_seed, std::string_view name);

class Rng {
 public:
  explicit Rng(uint64_t seed = 0) : state_(seed) {}
  static Rng stream(uint64_t run_seed, std::string_view name) {
    return Rng(stream_seed(run_seed, name));
  }

  uint64_t next();
  // Uniform in [0, n); n must be positive.
  uint64_t below(uint64_t n);
  // Uniform in [lo, hi], inclusive.
  int64_t range(int64_t lo, int64_t hi);
  // True with probability rate_per_mille / 1000.
  bool per_mille(uint32_t rate_per_mille) { return below(1000) < rate_per_mille; }
  // True with probability rate / 100000.
  bool per_100k(uint32_t rate) { return below(100000) < rate; }

 private:
  uint64_t state_;
};

}  // namespace queen::sim
