// Always-on assertions for programmer errors in core/. An expected error is a value
// (see result.h); a broken invariant stops the process with its context, in release too.
//
// QUEEN_ASSERT(cond, fmt, ...) prints the condition, where it failed and the printf-style
// message with the values it names. QUEEN_DEBUG_ASSERT is the same for checks too costly to
// run in a release build (a scan, a second encoding): compiled out under NDEBUG, but its
// expression is still type-checked.
#pragma once

#include <cstdarg>
#include <cstdio>
#include <cstdlib>

namespace queen::detail {
[[noreturn]] inline void assert_fail(const char* cond, const char* file, int line, const char* fmt,
                                     ...) __attribute__((format(printf, 4, 5)));
[[noreturn]] inline void assert_fail(const char* cond, const char* file, int line, const char* fmt,
                                     ...) {
  std::fprintf(stderr, "QUEEN_ASSERT failed: %s at %s:%d: ", cond, file, line);
  va_list args;
  va_start(args, fmt);
  std::vfprintf(stderr, fmt, args);
  va_end(args);
  std::fputc('\n', stderr);
  std::fflush(stderr);
  std::abort();
}
}  // namespace queen::detail

#define QUEEN_ASSERT(cond, ...)                                             \
  do {                                                                      \
    if (!(cond)) [[unlikely]]                                               \
      ::queen::detail::assert_fail(#cond, __FILE__, __LINE__, __VA_ARGS__); \
  } while (0)

#ifdef NDEBUG
#define QUEEN_DEBUG_ASSERT(cond, ...) \
  do {                                \
    (void)sizeof(!(cond));            \
  } while (0)
#else
#define QUEEN_DEBUG_ASSERT(cond, ...) QUEEN_ASSERT(cond, __VA_ARGS__)
#endif
