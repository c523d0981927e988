#include "server/forwarder.h"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>

#include <chrono>
#include <memory>

#include "core/common/text.h"
#include "io/real/connect.h"

namespace queen::server {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace {

asio::awaitable<std::optional<ForwardResponse>> exchange(asio::any_io_executor executor,
                                                         HttpAddress to, ForwardRequest request,
                                                         int64_t timeout_ms) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  auto connected = co_await real::connect_within(executor, to.host, to.port, timeout_ms);
  if (!connected) co_return std::nullopt;
  beast::tcp_stream& stream = *connected;
  beast::error_code ec;
  stream.expires_at(deadline);  // one timeout for the whole exchange
  request.keep_alive(false);
  request.prepare_payload();
  co_await http::async_write(stream, request, asio::redirect_error(asio::use_awaitable, ec));
  if (ec) co_return std::nullopt;
  beast::flat_buffer buffer;
  ForwardResponse response;
  co_await http::async_read(stream, buffer, response,
                            asio::redirect_error(asio::use_awaitable, ec));
  if (ec) co_return std::nullopt;
  stream.socket().shutdown(tcp::socket::shutdown_both, ec);
  co_return response;
}

}  // namespace

std::optional<HttpAddress> HttpAddressBook::find(uint64_t id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = nodes_.find(id);
  if (it == nodes_.end()) return std::nullopt;
  return it->second;
}

void HttpAddressBook::update(const std::vector<Member>& members) {
  std::map<uint64_t, HttpAddress> next;
  std::lock_guard<std::mutex> lock(mu_);
  for (const Member& m : members) {
    HttpAddress address;
    if (split_host_port(m.http_addr, &address.host, &address.port)) {
      next[m.id.value] = std::move(address);
    } else if (auto it = nodes_.find(m.id.value); it != nodes_.end()) {
      next[m.id.value] = it->second;
    }
  }
  nodes_ = std::move(next);
}

void forward_request(asio::any_io_executor executor, const HttpAddress& to, ForwardRequest request,
                     int64_t timeout_ms, std::function<void(std::optional<ForwardResponse>)> done) {
  asio::co_spawn(
      executor, exchange(executor, to, std::move(request), timeout_ms),
      [done = std::move(done)](std::exception_ptr e, std::optional<ForwardResponse> response) {
        done(e ? std::nullopt : std::move(response));
      });
}

}  // namespace queen::server
