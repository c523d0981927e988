// Helpers for the tests of the binary walk (core/api/binary.h): counting a struct's members
// against the fields its walk names, and filling every walked field with random values.
#pragma once

#include <cstddef>
#include <random>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include <gtest/gtest.h>

#include "core/api/binary.h"

namespace queen {

// ---- the members of an aggregate, counted by brace initialization ----

struct AnyValue {
  template <class T>
  operator T() const;  // only named in unevaluated contexts
};

template <class T, class... A>
constexpr size_t member_count() {
  if constexpr (requires { T{A{}..., AnyValue{}}; })
    return member_count<T, A..., AnyValue>();
  else
    return sizeof...(A);
}

struct CountFields {
  size_t fields = 0;
  bool refused = false;  // a kind that never travels (MetricsReply) walks nothing
  template <class... F>
  void operator()(F&...) {
    fields = sizeof...(F);
  }
  void refuse() { refused = true; }
};

template <class T>
void expect_walk_names_every_member(const char* name) {
  T value{};
  CountFields count;
  walk(count, value);
  if (count.refused) return;
  EXPECT_EQ(count.fields, member_count<T>()) << name << ": a member is missing from its walk";
}

#define QUEEN_EXPECT_WALKED(T) expect_walk_names_every_member<T>(#T)

template <class V, size_t I = 0>
void expect_every_alternative_walked() {
  if constexpr (I < std::variant_size_v<V>) {
    using T = std::variant_alternative_t<I, V>;
    expect_walk_names_every_member<T>(typeid(T).name());
    expect_every_alternative_walked<V, I + 1>();
  }
}

// ---- random values in every field ----

// Fills every field the walk names with a random value; lists get 0-2 elements, so a nested
// list is exercised without the value growing without bound.
struct Fill {
  std::mt19937_64& rng;

  template <class... F>
  void operator()(F&... fields) {
    (field(fields), ...);
  }
  void refuse() {}
  uint64_t below(uint64_t n) { return rng() % n; }

  void field(bool& v) { v = below(2) == 1; }
  void field(std::string& v) {
    v.assign(below(6), 'a');
    for (char& ch : v) ch = static_cast<char>('a' + below(26));
  }
  void field(Uuid& v) {
    for (auto& b : v.bytes) b = static_cast<uint8_t>(rng());
  }
  void field(Hash128& v) { v = Hash128{rng(), rng()}; }
  template <class T>
  void field(T& v) {
    if constexpr (std::is_enum_v<T>) {
      v = static_cast<T>(below(static_cast<uint8_t>(enum_last(T{})) + 1));
    } else if constexpr (std::is_integral_v<T>) {
      v = static_cast<T>(rng());
    } else if constexpr (is_strong_id<T>::value) {
      field(v.value);
    } else if constexpr (std::is_base_of_v<Uuid, T>) {
      field(static_cast<Uuid&>(v));
    } else {
      walk(*this, v);
    }
  }
  template <class T>
  void field(std::optional<T>& v) {
    if (below(2) == 0) return v.reset();
    field(v.emplace());
  }
  template <class T>
  void field(std::vector<T>& v) {
    v.resize(below(3));
    for (T& x : v) field(x);
  }
  template <class T>
  void field(CompactVector<T>& v) {
    v.clear();
    for (size_t n = below(3); n > 0; --n) {
      v.push_back(T{});
      field(v.back());
    }
  }
  template <class A, class B>
  void field(std::pair<A, B>& v) {
    field(v.first);
    field(v.second);
  }
};

template <class V, size_t I = 0>
void fill_alternative(V& v, size_t index, Fill& fill) {
  if constexpr (I < std::variant_size_v<V>) {
    if (index == I) return fill.field(v.template emplace<I>());
    fill_alternative<V, I + 1>(v, index, fill);
  }
}

}  // namespace queen
