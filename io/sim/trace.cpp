#include "io/sim/trace.h"

#include <xxhash.h>

#include <cstdarg>

#include "io/sim/rng.h"

namespace queen::sim {

std::string strf(const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  int n = std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (n < 0) return {};
  if (static_cast<size_t>(n) < sizeof buf) return std::string(buf, n);
  std::string out(static_cast<size_t>(n) + 1, '\0');
  va_start(ap, fmt);
  std::vsnprintf(out.data(), out.size(), fmt, ap);
  va_end(ap);
  out.resize(n);
  return out;
}

void Trace::add(std::string line) {
  hash_ = mix64(hash_ ^ XXH3_64bits(line.data(), line.size()));
  ++lines_;
  if (echo_ != nullptr) {
    std::fprintf(echo_, "%s\n", line.c_str());
    std::fflush(echo_);  // the last lines matter most when the process aborts
  }
  tail_.push_back(std::move(line));
  if (tail_.size() > kTailLinesMax) tail_.pop_front();
}

std::vector<std::string> Trace::tail(size_t n) const {
  size_t k = n < tail_.size() ? n : tail_.size();
  return std::vector<std::string>(tail_.end() - static_cast<ptrdiff_t>(k), tail_.end());
}

}  // namespace queen::sim
