// CompactVector<T>: a vector held as one pointer (8 bytes where std::vector takes 24); its
// size and capacity sit in front of the values, in the same allocation. For a vector that
// nearly every object of a large population holds, short or empty (a partition's append rows:
// one in a partition holding one message, and 10M such partitions on a large node; its
// deleted offsets and a row's in-memory hashes, empty in nearly all). An empty vector that
// never held a value allocates nothing. Iterators are plain pointers and stay valid as
// std::vector's do; copies are deep. Sizes are 32-bit.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <new>
#include <utility>

#include "core/common/assert.h"

namespace queen {

template <class T>
class CompactVector {
 public:
  using value_type = T;
  using iterator = T*;
  using const_iterator = const T*;
  using reverse_iterator = std::reverse_iterator<T*>;
  using const_reverse_iterator = std::reverse_iterator<const T*>;

  CompactVector() = default;
  CompactVector(const CompactVector& o) { assign(o.begin(), o.end()); }
  CompactVector(std::initializer_list<T> l) { assign(l.begin(), l.end()); }
  CompactVector(CompactVector&& o) noexcept : h_(std::exchange(o.h_, nullptr)) {}
  CompactVector& operator=(const CompactVector& o) {
    if (this != &o) assign(o.begin(), o.end());
    return *this;
  }
  CompactVector& operator=(CompactVector&& o) noexcept {
    if (this != &o) {
      free_all();
      h_ = std::exchange(o.h_, nullptr);
    }
    return *this;
  }
  CompactVector& operator=(std::initializer_list<T> l) {
    assign(l.begin(), l.end());
    return *this;
  }
  ~CompactVector() { free_all(); }

  size_t size() const { return h_ ? h_->size : 0; }
  size_t capacity() const { return h_ ? h_->cap : 0; }
  bool empty() const { return size() == 0; }
  T* begin() { return data(); }
  T* end() { return data() + size(); }
  const T* begin() const { return data(); }
  const T* end() const { return data() + size(); }
  const T* cbegin() const { return begin(); }
  const T* cend() const { return end(); }
  reverse_iterator rbegin() { return reverse_iterator(end()); }
  reverse_iterator rend() { return reverse_iterator(begin()); }
  const_reverse_iterator rbegin() const { return const_reverse_iterator(end()); }
  const_reverse_iterator rend() const { return const_reverse_iterator(begin()); }
  T& operator[](size_t i) { return data()[i]; }
  const T& operator[](size_t i) const { return data()[i]; }
  T& front() { return *begin(); }
  const T& front() const { return *begin(); }
  T& back() { return end()[-1]; }
  const T& back() const { return end()[-1]; }

  void reserve(size_t n) {
    if (n > capacity()) move_to(n);
  }
  void push_back(T v) {
    if (size() == capacity()) move_to(std::max<size_t>(1, capacity() * 2));
    new (end()) T(std::move(v));
    ++h_->size;
  }
  // Puts `v` before `pos`, moving the later values up; returns where it went.
  T* insert(const T* pos, T v) {
    size_t at = static_cast<size_t>(pos - begin());
    push_back(std::move(v));
    std::rotate(begin() + at, end() - 1, end());
    return begin() + at;
  }
  // Removes [first, last), moving the later values down.
  T* erase(const T* first, const T* last) {
    T* at = begin() + (first - begin());
    if (first == last) return at;
    T* moved_end = std::move(at + (last - first), end(), at);
    std::destroy(moved_end, end());
    h_->size = static_cast<uint32_t>(moved_end - begin());
    return at;
  }
  template <class It>
  void assign(It first, It last) {
    clear();
    reserve(static_cast<size_t>(std::distance(first, last)));
    for (; first != last; ++first) push_back(T(*first));
  }
  // Empties the vector and gives its memory back.
  void release() { free_all(); }
  void clear() {
    if (!h_) return;
    std::destroy(begin(), end());
    h_->size = 0;
  }

  bool operator==(const CompactVector& o) const {
    return std::equal(begin(), end(), o.begin(), o.end());
  }

 private:
  struct Header {
    uint32_t size = 0;
    uint32_t cap = 0;
  };
  static constexpr size_t kValuesAt = (sizeof(Header) + alignof(T) - 1) / alignof(T) * alignof(T);

  T* data() { return h_ ? values(h_) : nullptr; }
  const T* data() const { return h_ ? values(h_) : nullptr; }
  static T* values(Header* h) {
    return std::launder(reinterpret_cast<T*>(reinterpret_cast<char*>(h) + kValuesAt));
  }
  static_assert(alignof(T) <= __STDCPP_DEFAULT_NEW_ALIGNMENT__, "plain new aligns the values");

  // Moves the values into a new allocation of `cap` values.
  void move_to(size_t cap) {
    QUEEN_ASSERT(cap <= UINT32_MAX, "a compact vector holds fewer than 2^32 values");
    void* raw = ::operator new(kValuesAt + cap * sizeof(T));
    Header* h = new (raw) Header{static_cast<uint32_t>(size()), static_cast<uint32_t>(cap)};
    if (h_) {
      std::uninitialized_move(begin(), end(), values(h));
      free_all();
    }
    h_ = h;
  }
  void free_all() {
    if (!h_) return;
    std::destroy(begin(), end());
    ::operator delete(h_);
    h_ = nullptr;
  }

  Header* h_ = nullptr;
};

// Removes the values for which pred(value) holds, keeping the others' order (as
// std::erase_if does for a std::vector); returns how many.
template <class T, class Pred>
size_t erase_if(CompactVector<T>& v, Pred pred) {
  T* kept_end = std::remove_if(v.begin(), v.end(), pred);
  size_t erased = static_cast<size_t>(v.end() - kept_end);
  v.erase(kept_end, v.end());
  return erased;
}

}  // namespace queen
