// A simulated node's wall clock: virtual time plus a fixed offset and a drift, their sum
// (the skew) clamped to ±max_skew_us so that any two nodes stay within twice the bound and a
// node's clock never runs backwards. The skew belongs to the machine, so it survives a
// crash and restart of the node.
#pragma once

#include <algorithm>
#include <cstdint>

namespace queen::sim {

struct ClockModel {
  int64_t offset_us = 0;  // skew at virtual time start_us
  int64_t drift_ppm = 0;  // |drift_ppm| < 1'000'000 keeps the clock monotonic
  int64_t max_skew_us = 500'000;
  int64_t start_us = 0;

  int64_t skew_us(int64_t virtual_us) const {
    int64_t s = offset_us + (virtual_us - start_us) * drift_ppm / 1'000'000;
    return std::clamp(s, -max_skew_us, max_skew_us);
  }
  int64_t local_us(int64_t virtual_us) const { return virtual_us + skew_us(virtual_us); }
};

}  // namespace queen::sim
