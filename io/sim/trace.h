// The event trace of one simulated run: one line per dispatched event and per call a node
// makes on its environment. Every line feeds a running hash (the run's fingerprint that
// --check-determinism compares); the last lines are kept for violation reports, and the
// whole trace can be echoed to stdout (--trace).
//
// Contract: the hash depends only on the sequence of lines, so two runs of one seed that
// take the same decisions have equal hashes; lines never hold addresses or wall-clock times.
#pragma once

#include <cstdint>
#include <cstdio>
#include <deque>
#include <string>
#include <vector>

namespace queen::sim {

// printf-style formatting into a std::string.
std::string strf(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

class Trace {
 public:
  static constexpr size_t kTailLinesMax = 64;

  void set_echo(FILE* out) { echo_ = out; }
  void add(std::string line);
  uint64_t hash() const { return hash_; }
  uint64_t lines() const { return lines_; }
  // The last `n` lines (at most kTailLinesMax), oldest first.
  std::vector<std::string> tail(size_t n) const;

 private:
  FILE* echo_ = nullptr;
  uint64_t hash_ = 0x6a09e667f3bcc908ULL;
  uint64_t lines_ = 0;
  std::deque<std::string> tail_;
};

}  // namespace queen::sim
