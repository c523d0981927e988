#include "core/api/command_codec.h"

#include <limits>
#include <type_traits>
#include <variant>

#include "core/api/walk.h"

namespace queen {
namespace walks {
template <class C>
void walk(C& c, ForwardedCommand& x) {
  c(x.request_id, x.remaining_ms, x.command);
}
}  // namespace walks

namespace {

constexpr uint8_t kFormat = 1;

template <class T>
struct is_strong_id : std::false_type {};
template <class Tag, class Rep>
struct is_strong_id<StrongId<Tag, Rep>> : std::true_type {};

// Writes every field it is walked over. Integers take their own width, enums and bools a
// byte, strings and lists a u32 count first, an optional a presence byte.
struct Put {
  ByteWriter w;
  bool refused = false;

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
    if constexpr (std::is_enum_v<T>) {
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
      walks::walk(*this, v);
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

// Reads back what Put wrote; any byte out of range fails the reader.
struct Get {
  ByteReader r;

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
    if constexpr (std::is_enum_v<T>) {
      uint8_t b = r.u8();
      if (b > static_cast<uint8_t>(walks::enum_last(T{}))) r.invalidate();
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
    } else if constexpr (std::is_base_of_v<Uuid, T>) {  // LeaseId, RequestId
      field(static_cast<Uuid&>(v));
    } else {
      walks::walk(*this, v);
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

template <class T>
Bytes put(uint8_t tag, T& value, bool* refused) {
  Bytes out;
  Put p{ByteWriter(&out)};
  p.w.u8(kFormat);
  p.w.u8(tag);
  p.field(value);
  *refused = p.refused;
  return out;
}

template <class T>
bool get(const uint8_t* data, size_t size, uint8_t tag, T* value) {
  Get g{ByteReader(data, size)};
  if (g.r.u8() != kFormat || g.r.u8() != tag) return false;
  g.field(*value);
  return g.r.ok() && g.r.left() == 0;
}

constexpr uint8_t kCommandTag = 1;
constexpr uint8_t kReplyTag = 2;

}  // namespace

Bytes encode_command(const ForwardedCommand& command) {
  bool refused = false;
  // The walk takes fields by reference for Get's sake; Put only reads them.
  return put(kCommandTag, const_cast<ForwardedCommand&>(command), &refused);
}

std::optional<ForwardedCommand> decode_command(const uint8_t* data, size_t size) {
  ForwardedCommand command;
  if (!get(data, size, kCommandTag, &command)) return std::nullopt;
  return command;
}

Bytes encode_reply(const Reply& reply) {
  bool refused = false;
  Bytes out = put(kReplyTag, const_cast<Reply&>(reply).body, &refused);
  if (!refused) return out;
  Reply error{ErrorReply{api::Errc::internal, "this answer is not forwarded", 0, 0}};
  return put(kReplyTag, error.body, &refused);
}

std::optional<Reply> decode_reply(const uint8_t* data, size_t size) {
  Reply reply;
  if (!get(data, size, kReplyTag, &reply.body)) return std::nullopt;
  return reply;
}

}  // namespace queen
