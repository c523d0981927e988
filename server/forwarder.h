// Forwarding at the edge of a follower: a request the node answers "503 retry, the leader is
// node N" is sent on, as it came, to N's HTTP address (the whole request: the reference's
// client-offload-off mode), and N's answer is the client's answer. A forwarded request carries
// x-queen-forwarded (it is never forwarded again) and x-queen-request-id, the id the
// follower's edge gave the command, which the leader keeps. When N cannot be reached or has
// lost its leadership, the follower asks its own node again after a pause and forwards to
// whoever leads then, under the same request id, until the request's deadline: a leader
// that already planned it answers from the recorded outcome. One connection per forwarded
// request, bounded by timeout_ms.
#pragma once

#include <utility>  // before Asio (Boost 1.74)

#include <boost/asio/any_io_executor.hpp>
#include <boost/beast/http.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/state/entry.h"

namespace queen::server {

constexpr const char* kForwardedHeader = "x-queen-forwarded";
// The request id the forwarding node gave the command; the leader keeps it.
constexpr const char* kRequestIdHeader = "x-queen-request-id";

struct HttpAddress {
  std::string host;
  uint16_t port = 0;
};

// Every member's HTTP address, by node id: the first boot's peers, then each member list the
// node takes into use (a member added later is reached too). Read by the HTTP threads, written
// by the node thread.
class HttpAddressBook {
 public:
  explicit HttpAddressBook(std::map<uint64_t, HttpAddress> nodes) : nodes_(std::move(nodes)) {}
  std::optional<HttpAddress> find(uint64_t id) const;
  // The members now (an address that is not host:port keeps the one known before).
  void update(const std::vector<Member>& members);

 private:
  mutable std::mutex mu_;
  std::map<uint64_t, HttpAddress> nodes_;
};

struct ForwardOptions {
  uint64_t self_id = 0;
  // QUEEN_RAFT_CLIENT_OFFLOAD: forward the prepared command over the raft port's forward
  // streams (server/command_forwarder.h); off: the whole HTTP request, as below.
  bool offload = true;
  std::shared_ptr<HttpAddressBook> nodes;
  int64_t timeout_ms = 30000;
};

using ForwardRequest = boost::beast::http::request<boost::beast::http::string_body>;
using ForwardResponse = boost::beast::http::response<boost::beast::http::string_body>;

// Sends `request` to `to` and calls `done` (on `executor`) with its answer, or nullopt when
// it could not be had.
void forward_request(boost::asio::any_io_executor executor, const HttpAddress& to,
                     ForwardRequest request, int64_t timeout_ms,
                     std::function<void(std::optional<ForwardResponse>)> done);

}  // namespace queen::server
