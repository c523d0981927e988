// Outgoing connections of the node's HTTP clients (the Raft transport, the forwarding edge of
// a follower): resolve a host and connect to it within a timeout, with Nagle off (both send
// small requests that wait for their answer).
//
// Contract: nullopt when the name does not resolve or no address accepts within timeout_ms;
// the stream returned has no deadline set.
#pragma once

#include <utility>  // before Asio (Boost 1.74)

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/beast/core/tcp_stream.hpp>

#include <cstdint>
#include <optional>
#include <string>

namespace queen::real {

boost::asio::awaitable<std::optional<boost::beast::tcp_stream>> connect_within(
    boost::asio::any_io_executor executor, std::string host, uint16_t port, int64_t timeout_ms);

}  // namespace queen::real
