// A hint to start loading a cache line: no effect on what the program computes.
//
// GCC treats __builtin_prefetch as free of side effects, so a loop whose only effect is
// prefetching (over a ring's generations, say) is deleted whole under C++'s forward-progress
// rule; the asm statement below is kept wherever it is reached.
#pragma once

namespace queen {

inline void prefetch(const void* p) {
#if defined(__x86_64__)
  asm volatile("prefetcht0 %0" : : "m"(*static_cast<const char*>(p)));
#else
  __builtin_prefetch(p);
#endif
}

}  // namespace queen
