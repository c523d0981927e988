// Always-on assertions for programmer errors in core/. An expected error is a value
// (see result.h); a broken invariant stops the process with its context, in release too.
#pragma once

#include <cstdio>
#include <cstdlib>

namespace queen::detail {
[[noreturn]] inline void assert_fail(const char* cond, const char* file, int line,
                                     const char* msg) {
  std::fprintf(stderr, "QUEEN_ASSERT failed: %s at %s:%d: %s\n", cond, file, line, msg);
  std::fflush(stderr);
  std::abort();
}
}  // namespace queen::detail

#define QUEEN_ASSERT(cond, msg)                                                   \
  do {                                                                            \
    if (!(cond)) [[unlikely]] ::queen::detail::assert_fail(#cond, __FILE__, __LINE__, msg); \
  } while (0)
