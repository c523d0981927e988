// RareVector: a vector that is empty in nearly every object holding it (a partition's deleted
// offsets, the hashes an append row keeps in memory), stored as one pointer, so that the
// common empty case costs 8 bytes rather than std::vector's 24. Copies are deep; an empty
// vector and no vector are the same value.
#pragma once

#include <memory>
#include <vector>

namespace queen {

template <class T>
class RareVector {
 public:
  RareVector() = default;
  RareVector(std::vector<T> v) { *this = std::move(v); }  // NOLINT: a vector converts
  RareVector(const RareVector& o) { *this = o; }
  RareVector(RareVector&&) noexcept = default;
  RareVector& operator=(const RareVector& o) {
    if (this != &o) *this = std::vector<T>(o.get());
    return *this;
  }
  RareVector& operator=(RareVector&&) noexcept = default;
  RareVector& operator=(std::vector<T> v) {
    v_ = v.empty() ? nullptr : std::make_unique<std::vector<T>>(std::move(v));
    return *this;
  }

  const std::vector<T>& get() const { return v_ ? *v_ : empty_; }
  // For a change in place; release() gives the memory back once it is empty again.
  std::vector<T>& edit() {
    if (!v_) v_ = std::make_unique<std::vector<T>>();
    return *v_;
  }
  void release() {
    if (v_ && v_->empty()) v_.reset();
  }
  bool empty() const { return !v_ || v_->empty(); }
  size_t size() const { return v_ ? v_->size() : 0; }
  auto begin() const { return get().begin(); }
  auto end() const { return get().end(); }
  bool operator==(const RareVector& o) const { return get() == o.get(); }
  bool operator==(const std::vector<T>& o) const { return get() == o; }

 private:
  static inline const std::vector<T> empty_{};
  std::unique_ptr<std::vector<T>> v_;
};

}  // namespace queen
