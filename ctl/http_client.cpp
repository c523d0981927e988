#include "ctl/http_client.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <chrono>

namespace queen::ctl {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

constexpr uint64_t kBodyBytesMax = 256ull << 20;

std::optional<Url> parse_url(const std::string& text, std::string* error) {
  const std::string scheme = "http://";
  if (text.rfind("https://", 0) == 0) {
    *error = "https is not supported: use http:// (a TLS proxy in front of the node is fine)";
    return std::nullopt;
  }
  if (text.rfind(scheme, 0) != 0) {
    *error = "the URL must start with http:// (got '" + text + "')";
    return std::nullopt;
  }
  std::string rest = text.substr(scheme.size());
  rest = rest.substr(0, rest.find('/'));
  Url url;
  size_t colon = rest.rfind(':');
  bool bracketed = !rest.empty() && rest.front() == '[';
  if (colon != std::string::npos && (!bracketed || rest[colon - 1] == ']')) {
    url.host = rest.substr(0, colon);
    url.port = rest.substr(colon + 1);
  } else {
    url.host = rest;
    url.port = "6632";
  }
  if (bracketed && url.host.size() >= 2) url.host = url.host.substr(1, url.host.size() - 2);
  if (url.host.empty() || url.port.empty() ||
      url.port.find_first_not_of("0123456789") != std::string::npos) {
    *error = "the URL needs a host and a numeric port (got '" + text + "')";
    return std::nullopt;
  }
  return url;
}

struct HttpClient::Impl {
  Url url;
  std::string token;
  int64_t timeout_ms;
  asio::io_context io;
  std::optional<beast::tcp_stream> stream;
  beast::flat_buffer buffer;

  bool connect(std::string* error) {
    beast::error_code ec;
    tcp::resolver resolver(io);
    auto found = resolver.resolve(url.host, url.port, ec);
    if (ec) return *error = "cannot resolve " + url.host + ": " + ec.message(), false;
    stream.emplace(io);
    stream->expires_after(std::chrono::milliseconds(timeout_ms));
    stream->connect(found, ec);
    if (ec) {
      stream.reset();
      *error = "cannot connect to " + url.host + ":" + url.port + ": " + ec.message();
      return false;
    }
    return true;
  }

  // One exchange on the open connection; false when it failed before an answer.
  bool exchange(const http::request<http::string_body>& req, Response* out, int64_t timeout_ms_) {
    beast::error_code ec;
    stream->expires_after(std::chrono::milliseconds(timeout_ms_));
    http::write(*stream, req, ec);
    if (ec) return out->error = ec.message(), false;
    http::response_parser<http::string_body> parser;
    parser.body_limit(kBodyBytesMax);
    http::read(*stream, buffer, parser, ec);
    if (ec) return out->error = ec.message(), false;
    out->status = static_cast<int>(parser.get().result_int());
    out->body = std::move(parser.get().body());
    if (!parser.get().keep_alive()) stream.reset();
    return true;
  }
};

HttpClient::HttpClient(Url url, std::string token, int64_t timeout_ms)
    : impl_(std::make_unique<Impl>()) {
  impl_->url = std::move(url);
  impl_->token = std::move(token);
  impl_->timeout_ms = timeout_ms;
}

HttpClient::~HttpClient() = default;

Response HttpClient::request(const std::string& method, const std::string& target,
                             const std::string& body) {
  return request_within(method, target, body, impl_->timeout_ms);
}

Response HttpClient::request_within(const std::string& method, const std::string& target,
                                    const std::string& body, int64_t timeout_ms) {
  http::request<http::string_body> req(http::string_to_verb(method), target, 11);
  req.set(http::field::host, impl_->url.host);
  req.set(http::field::user_agent, "queenctl");
  if (!impl_->token.empty()) req.set(http::field::authorization, "Bearer " + impl_->token);
  if (!body.empty()) req.set(http::field::content_type, "application/json");
  req.body() = body;
  req.prepare_payload();
  Response out;
  // A kept-alive connection the node closed meanwhile fails at once: open it again, once.
  for (int attempt = 0; attempt < 2; ++attempt) {
    bool fresh = !impl_->stream;
    if (fresh && !impl_->connect(&out.error)) return out;
    out = Response{};
    if (impl_->exchange(req, &out, timeout_ms)) return out;
    impl_->stream.reset();
    impl_->buffer.clear();
    if (fresh) break;
  }
  return out;
}

std::string encode(const std::string& text) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

}  // namespace queen::ctl
