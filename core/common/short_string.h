// ShortString: an immutable string held in 16 bytes where std::string takes 32: up to 15
// bytes inline, a longer one in one allocation of its own (pointer and size inline). For a
// name that nearly every object of a large population holds (a partition's name: 10M of them
// on a large node, nearly all short). Reads go through std::string_view; copies are deep;
// comparisons are by bytes, as std::string's.
#pragma once

#include <compare>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>

#include "core/common/assert.h"

namespace queen {

class ShortString {
 public:
  static constexpr size_t kInlineMax = 15;

  ShortString() { set_inline_size(0); }
  ShortString(std::string_view s) { assign(s); }  // NOLINT: implicit, as std::string's
  ShortString(const std::string& s) : ShortString(std::string_view(s)) {}  // NOLINT
  ShortString(const char* s) : ShortString(std::string_view(s)) {}         // NOLINT
  ShortString(const ShortString& o) { assign(o.view()); }
  ShortString(ShortString&& o) noexcept {
    std::memcpy(bytes_, o.bytes_, sizeof(bytes_));
    o.set_inline_size(0);
  }
  ShortString& operator=(const ShortString& o) {
    if (this != &o) {
      ShortString copy(o);
      *this = std::move(copy);
    }
    return *this;
  }
  ShortString& operator=(ShortString&& o) noexcept {
    if (this != &o) {
      free_heap();
      std::memcpy(bytes_, o.bytes_, sizeof(bytes_));
      o.set_inline_size(0);
    }
    return *this;
  }
  ShortString& operator=(std::string_view s) { return *this = ShortString(s); }
  ShortString& operator=(const std::string& s) { return *this = ShortString(s); }
  ShortString& operator=(const char* s) { return *this = ShortString(s); }
  ~ShortString() { free_heap(); }

  std::string_view view() const {
    if (on_heap()) return {heap_ptr(), heap_size()};
    return {bytes_, inline_size()};
  }
  operator std::string_view() const { return view(); }  // NOLINT: reads as a string_view
  std::string str() const { return std::string(view()); }
  const char* data() const { return view().data(); }
  size_t size() const { return view().size(); }
  bool empty() const { return size() == 0; }

  friend bool operator==(const ShortString& a, const ShortString& b) {
    return a.view() == b.view();
  }
  friend bool operator==(const ShortString& a, std::string_view b) { return a.view() == b; }
  friend bool operator==(const ShortString& a, const std::string& b) { return a.view() == b; }
  friend bool operator==(const ShortString& a, const char* b) { return a.view() == b; }
  friend std::strong_ordering operator<=>(const ShortString& a, const ShortString& b) {
    return a.view() <=> b.view();
  }
  friend std::strong_ordering operator<=>(const ShortString& a, std::string_view b) {
    return a.view() <=> b;
  }
  friend std::string operator+(const std::string& a, const ShortString& b) {
    return a + std::string(b.view());
  }
  friend std::string operator+(const char* a, const ShortString& b) {
    return a + std::string(b.view());
  }

 private:
  // The last byte: kInlineMax - size for an inline string (0 for one of 15 bytes), kHeap for
  // one in its own allocation, whose pointer is the first 8 bytes and size the next 4.
  static constexpr uint8_t kHeap = 0xff;

  bool on_heap() const { return static_cast<uint8_t>(bytes_[kInlineMax]) == kHeap; }
  size_t inline_size() const { return kInlineMax - static_cast<uint8_t>(bytes_[kInlineMax]); }
  void set_inline_size(size_t n) { bytes_[kInlineMax] = static_cast<char>(kInlineMax - n); }
  const char* heap_ptr() const {
    char* p;
    std::memcpy(&p, bytes_, sizeof(p));
    return p;
  }
  size_t heap_size() const {
    uint32_t n;
    std::memcpy(&n, bytes_ + sizeof(char*), sizeof(n));
    return n;
  }
  void assign(std::string_view s) {
    if (s.size() <= kInlineMax) {
      if (!s.empty()) std::memcpy(bytes_, s.data(), s.size());
      set_inline_size(s.size());
      return;
    }
    QUEEN_ASSERT(s.size() <= UINT32_MAX, "a short string holds fewer than 2^32 bytes");
    char* p = new char[s.size()];
    std::memcpy(p, s.data(), s.size());
    uint32_t n = static_cast<uint32_t>(s.size());
    std::memcpy(bytes_, &p, sizeof(p));
    std::memcpy(bytes_ + sizeof(p), &n, sizeof(n));
    bytes_[kInlineMax] = static_cast<char>(kHeap);
  }
  void free_heap() {
    if (on_heap()) delete[] heap_ptr();
  }

  alignas(8) char bytes_[kInlineMax + 1];
};

static_assert(sizeof(ShortString) == 16);

}  // namespace queen
