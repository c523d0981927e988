// One binary walk for everything the broker encodes: forwarded commands and replies
// (core/api/command_codec.h), recorded answers (core/node/outcome.h), log entries' effects
// (core/state/entry.h) and the rows of store checkpoints (core/state/store_codec.cpp).
// BinaryPut writes every field a `walk(c, x)` names (core/api/walk.h, core/state/walk.h);
// BinaryGet reads them back in place. Walks and enum_last are found by argument-dependent
// lookup, so a walked type declares its walk in its own namespace (queen).
//
// Contract:
// - Integers take their own width (u32 for uint32_t, u64 for other unsigned, i64 for
//   signed), enums and bools a byte, strings and lists a u32 count first, an optional a
//   presence byte, a variant its index byte, strong ids and UUID-shaped ids their value.
// - BinaryGet never reads past its input: an enum past its enum_last, a bool that is not 0 or
//   1, a count the bytes left cannot hold, a variant index out of range or a signed value
//   out of its type's range fail the reader (ByteReader::ok() false).
// - A type with put_binary/get_binary of its own (found by argument-dependent lookup; they
//   take pointers, so no conversion picks them) is written by them instead: a stored layout
//   kept for older files (QueueOptions, Effect).
// - Put then Get gives back every walked field; encode(decode(b)) == b for what decodes.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "core/common/bytes.h"
#include "core/common/compact_vector.h"
#include "core/common/types.h"

namespace queen {

template <class T>
struct is_strong_id : std::false_type {};
template <class Tag, class Rep>
struct is_strong_id<StrongId<Tag, Rep>> : std::true_type {};

struct BinaryPut {
  ByteWriter& w;
  bool refused = false;  // a walk may refuse a value that must not travel (MetricsReply)

  template <class... F>
  void operator()(F&... fields) {
    (field(fields), ...);
  }
  void refuse() { refused = true; }

  void field(bool& v) { w.u8(v ? 1 : 0); }
  void field(std::string& v) { w.str(v); }
  void field(Uuid& v) { w.uuid(v); }
  void field(Hash128& v) { w.hash(v); }
  template <class T>
  void field(T& v) {
    if constexpr (requires(ByteWriter & out) { put_binary(out, &v); }) {
      put_binary(w, &v);  // a type with a binary form of its own (a stored layout)
    } else if constexpr (std::is_enum_v<T>) {
      w.u8(static_cast<uint8_t>(v));
    } else if constexpr (std::is_same_v<T, uint32_t>) {
      w.u32(v);
    } else if constexpr (std::is_unsigned_v<T>) {
      w.u64(v);
    } else if constexpr (std::is_integral_v<T>) {
      w.i64(v);
    } else if constexpr (is_strong_id<T>::value) {
      field(v.value);
    } else if constexpr (std::is_base_of_v<Uuid, T>) {  // LeaseId, RequestId
      field(static_cast<Uuid&>(v));
    } else {
      walk(*this, v);
    }
  }
  template <class T>
  void field(std::optional<T>& v) {
    w.u8(v ? 1 : 0);
    if (v) field(*v);
  }
  template <class T>
  void field(std::vector<T>& v) {
    w.u32(static_cast<uint32_t>(v.size()));
    for (T& x : v) field(x);
  }
  template <class T>
  void field(CompactVector<T>& v) {  // as a std::vector's
    w.u32(static_cast<uint32_t>(v.size()));
    for (T& x : v) field(x);
  }
  template <class A, class B>
  void field(std::pair<A, B>& v) {
    field(v.first);
    field(v.second);
  }
  template <class... T>
  void field(std::variant<T...>& v) {
    w.u8(static_cast<uint8_t>(v.index()));
    std::visit([this](auto& x) { field(x); }, v);
  }
};

struct BinaryGet {
  ByteReader& r;

  template <class... F>
  void operator()(F&... fields) {
    (field(fields), ...);
  }
  void refuse() { r.invalidate(); }

  void field(bool& v) {
    uint8_t b = r.u8();
    if (b > 1) r.invalidate();
    v = b == 1;
  }
  void field(std::string& v) { v = r.str(); }
  void field(Uuid& v) { v = r.uuid(); }
  void field(Hash128& v) { v = r.hash(); }
  template <class T>
  void field(T& v) {
    if constexpr (requires(ByteReader & in) { get_binary(in, &v); }) {
      get_binary(r, &v);
    } else if constexpr (std::is_enum_v<T>) {
      uint8_t b = r.u8();
      if (b > static_cast<uint8_t>(enum_last(T{}))) r.invalidate();
      v = r.ok() ? static_cast<T>(b) : T{};
    } else if constexpr (std::is_same_v<T, uint32_t>) {
      v = r.u32();
    } else if constexpr (std::is_unsigned_v<T>) {
      v = r.u64();
    } else if constexpr (std::is_integral_v<T>) {
      int64_t x = r.i64();
      if (x < std::numeric_limits<T>::min() || x > std::numeric_limits<T>::max()) r.invalidate();
      v = static_cast<T>(x);
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
    bool present = false;
    field(present);
    if (!present || !r.ok()) return v.reset();
    v.emplace();
    field(*v);
  }
  template <class T>
  void field(std::vector<T>& v) {
    uint32_t n = r.count(1);  // every element takes at least a byte
    v.clear();
    v.reserve(n);
    for (uint32_t i = 0; i < n && r.ok(); ++i) field(v.emplace_back());
  }
  template <class T>
  void field(CompactVector<T>& v) {  // as a std::vector's
    uint32_t n = r.count(1);
    v.clear();
    v.reserve(n);
    for (uint32_t i = 0; i < n && r.ok(); ++i) {
      v.push_back(T{});
      field(v.back());
    }
  }
  template <class A, class B>
  void field(std::pair<A, B>& v) {
    field(v.first);
    field(v.second);
  }
  template <class... T>
  void field(std::variant<T...>& v) {
    uint8_t index = r.u8();
    if (!r.ok() || index >= sizeof...(T)) return r.invalidate();
    emplace_alternative<0, T...>(v, index);
  }
  template <size_t I, class First, class... Rest, class V>
  void emplace_alternative(V& v, uint8_t index) {
    if (index == I) return field(v.template emplace<I>());
    if constexpr (sizeof...(Rest) > 0) emplace_alternative<I + 1, Rest...>(v, index);
  }
};

// Writes `value`'s walk into `w`. The walk takes fields by reference for BinaryGet's sake;
// BinaryPut only reads them, so nothing is copied.
template <class T>
bool put_walked(ByteWriter& w, const T& value) {
  BinaryPut p{w};
  p.field(const_cast<T&>(value));
  return !p.refused;
}

// Reads a value written by put_walked from `r`; false (and `r` not ok) when it does not.
template <class T>
bool get_walked(ByteReader& r, T* value) {
  BinaryGet g{r};
  g.field(*value);
  return r.ok();
}

}  // namespace queen
