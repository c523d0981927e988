// Word-at-a-time checks on JSON string bytes, shared by the writer (which escapes) and the
// scanner (which validates): eight bytes are tested at once with the classic bit tricks, so
// runs of ordinary characters are passed over without a branch per byte.
#pragma once

#include <cstdint>
#include <cstring>

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

}  // namespace queen::server
