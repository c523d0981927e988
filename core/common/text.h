// Small text forms shared by the node and the edges: a 64-bit id as 16 hex digits (JSON
// numbers lose precision past 2^53) and "host:port" split at its last colon.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace queen {

// `v` as 16 lowercase hex digits, zero-padded.
std::string hex_u64(uint64_t v);

// Splits "host:port" at its last colon. False, leaving the outputs alone, when there is no
// colon, the host is empty, or the port is not a number in 1-65535.
bool split_host_port(std::string_view text, std::string* host, uint16_t* port);

}  // namespace queen
