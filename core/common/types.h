// Strong types shared by every core module: ids, offsets, Raft terms and indexes, hashes,
// UUIDs. A bare integer never stands for one of these across a module boundary.
#pragma once

#include <array>
#include <compare>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace queen {

template <class Tag, class Rep = uint64_t>
struct StrongId {
  Rep value{};
  constexpr StrongId() = default;
  constexpr explicit StrongId(Rep v) : value(v) {}
  constexpr auto operator<=>(const StrongId&) const = default;
  constexpr StrongId next() const { return StrongId(value + 1); }
};

using Term = StrongId<struct TermTag>;
using LogIndex = StrongId<struct LogIndexTag>;
using Offset = StrongId<struct OffsetTag>;
using NodeId = StrongId<struct NodeIdTag>;
using PartitionId = StrongId<struct PartitionIdTag>;
using QueueId = StrongId<struct QueueIdTag>;
using LogId = StrongId<struct LogIdTag>;  // a queue's or a shared log; 0 is the system log

// xxh3-128 of a transactionId (or of the message id when there is none).
struct Hash128 {
  uint64_t lo = 0;
  uint64_t hi = 0;
  auto operator<=>(const Hash128&) const = default;
};

// 16 raw bytes: message ids (UUIDv7), lease ids, request ids.
struct Uuid {
  std::array<uint8_t, 16> bytes{};
  auto operator<=>(const Uuid&) const = default;
  bool is_nil() const {
    for (auto b : bytes)
      if (b != 0) return false;
    return true;
  }
};

// Distinct ids that share the UUID form: a lease id never passes for a request id, nor a
// plain UUID for either without saying so (LeaseId{u}).
struct RequestId : Uuid {};
struct LeaseId : Uuid {};

constexpr size_t kUuidChars = 36;
std::string uuid_to_string(const Uuid& u);
// Writes the kUuidChars characters of uuid_to_string to `out`.
void uuid_to_chars(const Uuid& u, char* out);
bool uuid_from_string(std::string_view s, Uuid* out);
// A UUIDv7 from a unix time in ms and 74 random bits.
Uuid make_uuid_v7(int64_t unix_ms, uint64_t rand_a, uint64_t rand_b);
// `u` with one added to its last 62 bits (a UUIDv7's rand_b, RFC 9562's monotonic random);
// false when they are all ones. Version and variant bits are kept.
bool uuid_successor(const Uuid& u, Uuid* out);

}  // namespace queen

template <class Tag, class Rep>
struct std::hash<queen::StrongId<Tag, Rep>> {
  size_t operator()(const queen::StrongId<Tag, Rep>& id) const noexcept {
    return std::hash<Rep>{}(id.value);
  }
};
