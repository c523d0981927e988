#include "io/real/connect.h"

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>

namespace queen::real {

namespace asio = boost::asio;
namespace beast = boost::beast;
using tcp = asio::ip::tcp;

asio::awaitable<std::optional<beast::tcp_stream>> connect_within(asio::any_io_executor executor,
                                                                 std::string host, uint16_t port,
                                                                 int64_t timeout_ms) {
  beast::error_code ec;
  tcp::resolver resolver(executor);
  auto where = co_await resolver.async_resolve(host, std::to_string(port),
                                               asio::redirect_error(asio::use_awaitable, ec));
  if (ec) co_return std::nullopt;
  beast::tcp_stream stream(executor);
  stream.expires_after(std::chrono::milliseconds(timeout_ms));
  co_await stream.async_connect(where, asio::redirect_error(asio::use_awaitable, ec));
  if (ec) co_return std::nullopt;
  stream.expires_never();
  stream.socket().set_option(tcp::no_delay(true), ec);
  co_return std::optional<beast::tcp_stream>(std::move(stream));
}

}  // namespace queen::real
