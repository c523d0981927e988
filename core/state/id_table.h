// IdTable<T>: values with a unique, ordered `id` field, held in id order in chunks of at most
// kChunkSlots values each, rather than one std::map node per value (48 bytes more each: the
// store's partition table, 10M entries on a large node). A value is only ever added with an
// id above every id held (ids are allocated in order), and erased by id.
//
// Each chunk keeps a floor (no value of it has a lower id, none of the next chunk's is below
// it), so lookups are two binary searches even while chunks are empty. Erasing moves at most
// a chunk's values; a chunk that empties gives its memory back at once, and the headers are
// tidied (empty chunks dropped, small neighbours merged) once small chunks pass a fraction
// of all, so a long run of erases costs O(1) amortized each. References stay valid until the
// next add or erase. Iteration is in id order, const only.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <utility>
#include <vector>

#include "core/common/assert.h"

namespace queen {

template <class T>
class IdTable {
  using Id = decltype(T::id);
  struct Chunk {
    Id floor;  // no value of this chunk is below it; every value of the chunk before is
    std::vector<T> values;
  };

 public:
  static constexpr size_t kChunkSlots = 64;

  class const_iterator {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = T;
    using difference_type = std::ptrdiff_t;
    using pointer = const T*;
    using reference = const T&;

    const_iterator() = default;
    const T& operator*() const { return (*chunks_)[c_].values[i_]; }
    const T* operator->() const { return &**this; }
    const_iterator& operator++() {
      ++i_;
      settle();
      return *this;
    }
    const_iterator operator++(int) {
      const_iterator old = *this;
      ++*this;
      return old;
    }
    bool operator==(const const_iterator& o) const { return c_ == o.c_ && i_ == o.i_; }

   private:
    friend class IdTable;
    const_iterator(const std::vector<Chunk>* chunks, size_t c, size_t i)
        : chunks_(chunks), c_(c), i_(i) {
      settle();
    }
    // Moves past the end of a chunk, and past empty chunks, to the next value (or the end).
    void settle() {
      while (c_ < chunks_->size() && i_ >= (*chunks_)[c_].values.size()) {
        ++c_;
        i_ = 0;
      }
    }
    const std::vector<Chunk>* chunks_ = nullptr;
    size_t c_ = 0, i_ = 0;
  };

  size_t size() const { return size_; }
  size_t chunks() const { return chunks_.size(); }
  bool empty() const { return size_ == 0; }
  const_iterator begin() const { return const_iterator(&chunks_, 0, 0); }
  const_iterator end() const { return const_iterator(&chunks_, chunks_.size(), 0); }

  const T* find(Id id) const {
    size_t c = chunk_of(id);
    if (c == chunks_.size()) return nullptr;
    const std::vector<T>& v = chunks_[c].values;
    auto it = std::lower_bound(v.begin(), v.end(), id,
                               [](const T& t, const Id& key) { return t.id < key; });
    return it != v.end() && it->id == id ? &*it : nullptr;
  }
  T* find(Id id) { return const_cast<T*>(std::as_const(*this).find(id)); }
  bool contains(Id id) const { return find(id) != nullptr; }

  // The first value whose id is above `id`.
  const_iterator upper_bound(Id id) const {
    size_t c = chunk_of(id);
    if (c == chunks_.size()) return begin();
    const std::vector<T>& v = chunks_[c].values;
    auto it = std::upper_bound(v.begin(), v.end(), id,
                               [](const Id& key, const T& t) { return key < t.id; });
    return const_iterator(&chunks_, c, static_cast<size_t>(it - v.begin()));
  }

  // The highest id held, if any (`fallback` when empty).
  Id last_id(Id fallback) const { return empty() ? fallback : last_value().id; }

  // Adds `t`, whose id must be above every id held.
  T& push_back(T t) {
    QUEEN_ASSERT(empty() || last_value().id < t.id, "values are added in id order");
    if (chunks_.empty() || chunks_.back().values.size() == kChunkSlots) {
      chunks_.push_back(Chunk{t.id, {}});
      chunks_.back().values.reserve(kChunkSlots);
    }
    std::vector<T>& v = chunks_.back().values;
    if (v.capacity() == 0) v.reserve(kChunkSlots);  // emptied earlier
    v.push_back(std::move(t));
    ++size_;
    return v.back();
  }

  // Removes the value with `id`; false when there is none.
  bool erase(Id id) {
    size_t c = chunk_of(id);
    if (c == chunks_.size()) return false;
    std::vector<T>& v = chunks_[c].values;
    auto it = std::lower_bound(v.begin(), v.end(), id,
                               [](const T& t, const Id& key) { return t.id < key; });
    if (it == v.end() || !(it->id == id)) return false;
    v.erase(it);
    --size_;
    if (v.empty()) std::vector<T>().swap(v);
    if (v.size() == kChunkSlots / 4 - 1 || v.empty()) ++small_;
    if (small_ > kTidySmallMin && small_ * 4 > chunks_.size()) tidy();
    return true;
  }

  bool operator==(const IdTable& o) const {
    return size_ == o.size_ && std::equal(begin(), end(), o.begin());
  }

 private:
  static constexpr size_t kTidySmallMin = 16;

  const T& last_value() const {
    auto c = std::find_if(chunks_.rbegin(), chunks_.rend(),
                          [](const Chunk& ch) { return !ch.values.empty(); });
    return c->values.back();
  }

  // The chunk that would hold `id`: the last whose floor is not above it, or chunks_.size().
  size_t chunk_of(Id id) const {
    auto it = std::upper_bound(chunks_.begin(), chunks_.end(), id,
                               [](const Id& key, const Chunk& ch) { return key < ch.floor; });
    return it == chunks_.begin() ? chunks_.size() : static_cast<size_t>(it - chunks_.begin()) - 1;
  }

  // Drops empty chunks and moves each small chunk into the one before it where they fit, so
  // no two neighbours are both under a quarter full. Keeps the floors: a merged chunk keeps
  // the floor of the one before, which is below every id moved into it.
  void tidy() {
    std::vector<Chunk> kept;
    kept.reserve(chunks_.size());
    for (Chunk& ch : chunks_) {
      if (ch.values.empty()) continue;
      if (!kept.empty()) {
        std::vector<T>& before = kept.back().values;
        size_t small = std::min(before.size(), ch.values.size());
        if (small < kChunkSlots / 4 && before.size() + ch.values.size() <= kChunkSlots) {
          before.reserve(kChunkSlots);
          std::move(ch.values.begin(), ch.values.end(), std::back_inserter(before));
          continue;
        }
      }
      kept.push_back(std::move(ch));
    }
    chunks_ = std::move(kept);
    small_ = 0;
  }

  std::vector<Chunk> chunks_;
  size_t size_ = 0;
  size_t small_ = 0;  // chunks that became small or empty since the last tidy (an estimate)
};

}  // namespace queen
