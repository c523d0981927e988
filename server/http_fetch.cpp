#include <utility>  // before Asio (Boost 1.74)

#include "server/http_fetch.h"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <chrono>
#include <optional>

namespace queen::server {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;

namespace {

constexpr uint64_t kFetchBytesMax = 1u << 20;

struct Url {
  bool tls = false;
  std::string host;
  uint16_t port = 0;
  std::string target;
};

std::optional<Url> parse_url(std::string_view url) {
  Url u;
  if (url.starts_with("https://")) {
    u.tls = true;
    u.port = 443;
    url.remove_prefix(8);
  } else if (url.starts_with("http://")) {
    u.port = 80;
    url.remove_prefix(7);
  } else {
    return std::nullopt;
  }
  size_t slash = url.find('/');
  std::string_view authority = url.substr(0, slash);
  u.target = slash == std::string_view::npos ? "/" : std::string(url.substr(slash));
  size_t colon = authority.rfind(':');
  if (colon != std::string_view::npos) {
    std::string_view port = authority.substr(colon + 1);
    unsigned value = 0;
    for (char c : port) {
      if (c < '0' || c > '9' || value > 65535) return std::nullopt;
      value = value * 10 + static_cast<unsigned>(c - '0');
    }
    if (port.empty() || value == 0 || value > 65535) return std::nullopt;
    u.port = static_cast<uint16_t>(value);
    authority = authority.substr(0, colon);
  }
  if (authority.empty()) return std::nullopt;
  u.host = std::string(authority);
  return u;
}

// Starts one asynchronous operation with a completion handler and runs the context until it
// completes; the tcp_stream's deadline makes every operation complete by then.
template <class Start>
beast::error_code await(asio::io_context& io, Start start) {
  beast::error_code result = asio::error::timed_out;
  start([&result](beast::error_code ec, auto&&...) { result = ec; });
  io.restart();
  io.run();
  return result;
}

template <class Stream>
Result<std::string> exchange(asio::io_context& io, Stream& stream, const Url& u) {
  http::request<http::empty_body> req{http::verb::get, u.target, 11};
  req.set(http::field::host, u.host);
  req.set(http::field::accept, "application/json");
  req.set(http::field::user_agent, "queen");
  req.keep_alive(false);
  auto ec = await(io, [&](auto done) { http::async_write(stream, req, done); });
  if (ec) return make_error(Errc::io, "sending the request failed: " + ec.message());
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(kFetchBytesMax);
  ec = await(io, [&](auto done) { http::async_read(stream, buffer, parser, done); });
  if (ec) return make_error(Errc::io, "reading the answer failed: " + ec.message());
  if (parser.get().result() != http::status::ok)
    return make_error(Errc::io, "answered HTTP " + std::to_string(parser.get().result_int()));
  return std::move(parser.get().body());
}

Result<std::string> get(const Url& u, int64_t timeout_ms) {
  asio::io_context io;
  beast::tcp_stream plain(io);
  plain.expires_after(std::chrono::milliseconds(timeout_ms));  // the whole exchange
  tcp::resolver resolver(io);
  tcp::resolver::results_type where;
  auto ec = await(io, [&](auto done) {
    resolver.async_resolve(u.host, std::to_string(u.port),
                           [&where, done](beast::error_code e, tcp::resolver::results_type r) {
                             where = std::move(r);
                             done(e);
                           });
  });
  if (ec) return make_error(Errc::io, "cannot resolve " + u.host + ": " + ec.message());
  ec = await(io, [&](auto done) { plain.async_connect(where, done); });
  if (ec) {
    return make_error(Errc::io, "cannot connect to " + u.host + ":" + std::to_string(u.port) +
                                    ": " + ec.message());
  }
  plain.socket().set_option(tcp::no_delay(true), ec);
  if (!u.tls) return exchange(io, plain, u);
  ssl::context context(ssl::context::tls_client);
  context.set_default_verify_paths();
  context.set_verify_mode(ssl::verify_peer);
  beast::ssl_stream<beast::tcp_stream> stream(std::move(plain), context);
  SSL_set_tlsext_host_name(stream.native_handle(), u.host.c_str());
  stream.set_verify_callback(ssl::host_name_verification(u.host));
  ec = await(io, [&](auto done) { stream.async_handshake(ssl::stream_base::client, done); });
  if (ec) return make_error(Errc::io, "TLS handshake failed: " + ec.message());
  return exchange(io, stream, u);
}

}  // namespace

Result<std::string> fetch_url(const std::string& url, int64_t timeout_ms) {
  auto u = parse_url(url);
  if (!u) return make_error(Errc::bad_request, "not an http:// or https:// URL");
  return get(*u, timeout_ms);
}

}  // namespace queen::server
