// Room in a Beast read buffer before an HTTP body is read, for the client edge and the raft
// port alike. Beast reads at most the buffer's free space and grows the buffer 512 bytes at a
// time while the parser drains it into the body: without room made first, a 30 KB body takes
// some sixty reads and a 1 MiB message some two thousand.
#pragma once

#include <utility>  // first: Boost 1.74's Asio needs it

#include <boost/beast/core/flat_buffer.hpp>
#include <boost/optional.hpp>

#include <algorithm>
#include <cstdint>

namespace queen::real {

// The most room made: a larger body takes reads of this size.
constexpr uint64_t kBodyReadBytesMax = 64 * 1024;

// Gives `buffer` room for a body of `content_length` bytes (a parser's content_length(); none
// when chunked), up to kBodyReadBytesMax, past what it already holds.
inline void make_room_for_body(boost::beast::flat_buffer& buffer,
                               const boost::optional<uint64_t>& content_length) {
  uint64_t body_bytes = content_length.value_or(kBodyReadBytesMax);
  buffer.reserve(buffer.size() + std::min(body_bytes, kBodyReadBytesMax));
}

}  // namespace queen::real
