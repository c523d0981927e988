#include "server/forwarder.h"

#include <charconv>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>

#include <chrono>
#include <memory>

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
    size_t colon = m.http_addr.rfind(':');
    unsigned port = 0;
    if (colon != std::string::npos) {
      const char* first = m.http_addr.data() + colon + 1;
      const char* last = m.http_addr.data() + m.http_addr.size();
      auto [end, ec] = std::from_chars(first, last, port);
      if (ec != std::errc() || end != last || port > 65535) port = 0;
    }
    if (port != 0) {
      next[m.id.value] = HttpAddress{m.http_addr.substr(0, colon), static_cast<uint16_t>(port)};
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
