// Checks on JSON string bytes, shared by the writer (which escapes) and the scanner (which
// validates): how long a run of ordinary characters is, measured sixteen bytes at a time with
// SSE2 (every x86-64 has it), then eight at a time with the classic bit tricks, then byte by
// byte, so a long string is passed over without a branch per byte.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace queen::server {

// Whether none of the eight bytes of `word` is below 0x20, a quote or a backslash: the
// has-a-byte-below-n test for 0x20, and the has-a-zero-byte test after XOR with each quote.
inline bool json_word_unescaped(uint64_t word) {
  constexpr uint64_t kOnes = 0x0101010101010101ull, kHighs = 0x8080808080808080ull;
  uint64_t quote = word ^ (kOnes * '"'), backslash = word ^ (kOnes * '\\');
  uint64_t below = (word - kOnes * 0x20) & ~word;
  uint64_t is_quote = (quote - kOnes) & ~quote, is_backslash = (backslash - kOnes) & ~backslash;
  return ((below | is_quote | is_backslash) & kHighs) == 0;
}

// Whether the eight bytes are also all ASCII (below 0x80).
inline bool json_word_plain_ascii(uint64_t word) {
  return (word & 0x8080808080808080ull) == 0 && json_word_unescaped(word);
}

inline uint64_t load_word(const char* p) {
  uint64_t word;
  std::memcpy(&word, p, sizeof word);
  return word;
}

namespace json_bytes_detail {

inline bool plain_ascii_byte(unsigned char c) {
  return c >= 0x20 && c < 0x80 && c != '"' && c != '\\';
}

inline bool unescaped_byte(unsigned char c) {
  return c >= 0x20 && c != '"' && c != '\\';
}

#if defined(__SSE2__)
// The callers load a block only where sixteen bytes are left; GCC 12, inlining one into a
// caller that passes a shorter literal, warns of the loop it then removes as never run.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Warray-bounds"
inline __m128i load_block(const char* p) {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
}
#pragma GCC diagnostic pop

// Bit i set where byte i of `v` is a quote or a backslash.
inline unsigned quote_or_backslash_mask(__m128i v) {
  __m128i hits =
      _mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('"')), _mm_cmpeq_epi8(v, _mm_set1_epi8('\\')));
  return static_cast<unsigned>(_mm_movemask_epi8(hits));
}
#endif

}  // namespace json_bytes_detail

// How many of the `n` bytes at `p`, from the first, are ASCII characters a JSON string holds
// as they are (0x20-0x7F but the quote and the backslash).
inline size_t json_plain_ascii_run(const char* p, size_t n) {
  size_t i = 0;
#if defined(__SSE2__)
  for (; i + 16 <= n; i += 16) {
    __m128i v = json_bytes_detail::load_block(p + i);
    // As signed bytes, those of 0x80 and above are negative: below 0x20 catches them too.
    auto low = static_cast<unsigned>(_mm_movemask_epi8(_mm_cmplt_epi8(v, _mm_set1_epi8(0x20))));
    unsigned stop = low | json_bytes_detail::quote_or_backslash_mask(v);
    if (stop != 0) return i + static_cast<size_t>(__builtin_ctz(stop));
  }
#endif
  while (i + 8 <= n && json_word_plain_ascii(load_word(p + i))) i += 8;
  while (i < n && json_bytes_detail::plain_ascii_byte(static_cast<unsigned char>(p[i]))) ++i;
  return i;
}

// How many of the `n` bytes at `p`, from the first, a JSON string holds without an escape
// (any byte of 0x20 or above but the quote and the backslash).
inline size_t json_unescaped_run(const char* p, size_t n) {
  size_t i = 0;
#if defined(__SSE2__)
  for (; i + 16 <= n; i += 16) {
    __m128i v = json_bytes_detail::load_block(p + i);
    // Unsigned, v < 0x20 exactly where min(v, 0x1F) is v.
    __m128i below = _mm_cmpeq_epi8(_mm_min_epu8(v, _mm_set1_epi8(0x1F)), v);
    unsigned stop = static_cast<unsigned>(_mm_movemask_epi8(below)) |
                    json_bytes_detail::quote_or_backslash_mask(v);
    if (stop != 0) return i + static_cast<size_t>(__builtin_ctz(stop));
  }
#endif
  while (i + 8 <= n && json_word_unescaped(load_word(p + i))) i += 8;
  while (i < n && json_bytes_detail::unescaped_byte(static_cast<unsigned char>(p[i]))) ++i;
  return i;
}

}  // namespace queen::server
