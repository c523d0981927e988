#include <utility>  // before Asio (Boost 1.74)

#include "io/real/transport.h"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <algorithm>
#include <cstring>
#include <deque>
#include <map>
#include <optional>
#include <thread>

#include "io/real/connect.h"
#include "io/real/log.h"

namespace queen::real {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using asio::awaitable;
using asio::use_awaitable;

namespace {

constexpr const char* kPath = "/raft/messages";
constexpr const char* kTokenHeader = "x-queen-raft-token";
constexpr const char* kFromHeader = "x-queen-raft-from";

}  // namespace

bool tokens_equal(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i)
    diff |= static_cast<unsigned char>(a[i]) ^ static_cast<unsigned char>(b[i]);
  return diff == 0;
}

struct Transport::Impl {
  struct Peer {
    PeerAddress address;
    std::deque<Bytes> queue;
    uint64_t queued_bytes = 0;
    bool sending = false;
    std::optional<beast::tcp_stream> stream;
    int64_t backoff_ms = 0;
  };

  TransportOptions options;
  Deliver deliver;
  asio::io_context context;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work;
  tcp::acceptor acceptor{context};
  std::thread thread;
  std::map<uint64_t, Peer> peers;
  TransportStats stats;
  uint16_t bound_port = 0;

  Impl(TransportOptions o, Deliver d) : options(std::move(o)), deliver(std::move(d)) {
    for (const auto& p : options.peers) peers[p.id].address = p;
  }

  // ---- receiving ----

  awaitable<void> accept_loop() {
    for (;;) {
      beast::error_code ec;
      tcp::socket socket = co_await acceptor.async_accept(asio::redirect_error(use_awaitable, ec));
      if (ec) {
        if (ec == asio::error::operation_aborted) co_return;
        continue;
      }
      asio::co_spawn(context, serve(beast::tcp_stream(std::move(socket))), asio::detached);
    }
  }

  awaitable<void> serve(beast::tcp_stream stream) {
    beast::flat_buffer buffer;
    for (;;) {
      beast::error_code ec;
      http::request_parser<http::vector_body<uint8_t>> parser;
      parser.body_limit(options.body_bytes_max);
      stream.expires_never();  // an idle peer connection stays open
      co_await http::async_read_header(stream, buffer, parser,
                                       asio::redirect_error(use_awaitable, ec));
      if (ec) co_return;
      const auto& head = parser.get();
      auto token = head[kTokenHeader];
      if (!tokens_equal(std::string(token.data(), token.size()), options.token) ||
          head.target() != kPath) {
        ++stats.refused;
        http::response<http::string_body> res{http::status::unauthorized, head.version()};
        res.set(http::field::content_type, "application/json");
        res.body() = R"({"error":"bad raft token or path","code":"unauthorized"})";
        res.keep_alive(false);
        res.prepare_payload();
        stream.expires_after(std::chrono::milliseconds(options.io_timeout_ms));
        co_await http::async_write(stream, res, asio::redirect_error(use_awaitable, ec));
        co_return;
      }
      stream.expires_after(std::chrono::milliseconds(options.io_timeout_ms));
      co_await http::async_read(stream, buffer, parser, asio::redirect_error(use_awaitable, ec));
      if (ec) co_return;
      auto from_field = parser.get()[kFromHeader];
      uint64_t from =
          std::strtoull(std::string(from_field.data(), from_field.size()).c_str(), nullptr, 10);
      unpack(from, parser.get().body());
      http::response<http::empty_body> res{http::status::no_content, head.version()};
      res.keep_alive(parser.get().keep_alive());
      co_await http::async_write(stream, res, asio::redirect_error(use_awaitable, ec));
      if (ec || !res.keep_alive()) co_return;
    }
  }

  void unpack(uint64_t from, const std::vector<uint8_t>& body) {
    size_t pos = 0;
    while (pos + 4 <= body.size()) {
      uint32_t len = 0;
      std::memcpy(&len, body.data() + pos, 4);
      pos += 4;
      if (len > body.size() - pos) return;  // a damaged batch: the rest is dropped
      ++stats.received;
      deliver(from, Bytes(body.begin() + static_cast<long>(pos),
                          body.begin() + static_cast<long>(pos + len)));
      pos += len;
    }
  }

  // ---- sending ----

  void enqueue(uint64_t to, Bytes message) {
    auto it = peers.find(to);
    if (it == peers.end()) return;
    Peer& p = it->second;
    if (p.queued_bytes + message.size() > options.queued_bytes_max) {
      ++stats.dropped;
      return;
    }
    p.queued_bytes += message.size();
    p.queue.push_back(std::move(message));
    if (!p.sending) {
      p.sending = true;
      asio::co_spawn(context, send_loop(p), asio::detached);
    }
  }

  awaitable<void> send_loop(Peer& p) {
    while (!p.queue.empty()) {
      if (!p.stream && !co_await connect(p)) {
        drop_queue(p);
        asio::steady_timer wait(context, std::chrono::milliseconds(p.backoff_ms));
        beast::error_code ec;
        co_await wait.async_wait(asio::redirect_error(use_awaitable, ec));
        p.backoff_ms = std::min(options.reconnect_ms_max,
                                std::max(options.reconnect_ms_min, p.backoff_ms * 2));
        continue;
      }
      http::request<http::vector_body<uint8_t>> req{http::verb::post, kPath, 11};
      req.set(http::field::host, p.address.host);
      req.set(kTokenHeader, options.token);
      req.set(kFromHeader, std::to_string(options.self_id));
      req.set(http::field::content_type, "application/octet-stream");
      req.keep_alive(true);
      size_t count = take_batch(p, &req.body());
      req.prepare_payload();
      beast::error_code ec;
      p.stream->expires_after(std::chrono::milliseconds(options.io_timeout_ms));
      co_await http::async_write(*p.stream, req, asio::redirect_error(use_awaitable, ec));
      if (!ec) {
        beast::flat_buffer buffer;
        http::response<http::string_body> res;
        co_await http::async_read(*p.stream, buffer, res, asio::redirect_error(use_awaitable, ec));
        if (!ec && res.result() != http::status::no_content) ec = asio::error::access_denied;
      }
      if (ec) {
        stats.dropped += count;
        p.stream.reset();
        continue;
      }
      stats.sent += count;
      p.backoff_ms = 0;
    }
    p.sending = false;
  }

  size_t take_batch(Peer& p, std::vector<uint8_t>* body) {
    size_t count = 0;
    while (!p.queue.empty() &&
           (count == 0 || body->size() + p.queue.front().size() + 4 <= options.batch_bytes_max)) {
      Bytes& m = p.queue.front();
      uint32_t len = static_cast<uint32_t>(m.size());
      const auto* l = reinterpret_cast<const uint8_t*>(&len);
      body->insert(body->end(), l, l + 4);
      body->insert(body->end(), m.begin(), m.end());
      p.queued_bytes -= m.size();
      p.queue.pop_front();
      ++count;
    }
    return count;
  }

  void drop_queue(Peer& p) {
    stats.dropped += p.queue.size();
    p.queue.clear();
    p.queued_bytes = 0;
  }

  awaitable<bool> connect(Peer& p) {
    auto stream = co_await connect_within(context.get_executor(), p.address.host, p.address.port,
                                          options.io_timeout_ms);
    if (!stream) co_return false;
    p.stream.emplace(std::move(*stream));
    co_return true;
  }
};

Transport::Transport(TransportOptions options, Deliver deliver)
    : impl_(std::make_unique<Impl>(std::move(options), std::move(deliver))) {}

Transport::~Transport() {
  stop();
}

Status Transport::start() {
  Impl& t = *impl_;
  beast::error_code ec;
  auto address = asio::ip::make_address(t.options.listen_host, ec);
  if (ec)
    return make_error(Errc::bad_request, "QUEEN_RAFT_LISTEN: bad address " + t.options.listen_host);
  tcp::endpoint endpoint(address, t.options.listen_port);
  t.acceptor.open(endpoint.protocol(), ec);
  if (!ec) t.acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) t.acceptor.bind(endpoint, ec);
  if (!ec) t.acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return make_error(Errc::io, "cannot listen for peers on " + t.options.listen_host + ":" +
                                    std::to_string(t.options.listen_port) + ": " + ec.message());
  }
  t.bound_port = t.acceptor.local_endpoint().port();
  t.work.emplace(asio::make_work_guard(t.context));
  asio::co_spawn(t.context, t.accept_loop(), asio::detached);
  t.thread = std::thread([&t] { t.context.run(); });
  return ok_status();
}

void Transport::send(uint64_t to, Bytes message) {
  Impl& t = *impl_;
  asio::post(t.context,
             [&t, to, m = std::move(message)]() mutable { t.enqueue(to, std::move(m)); });
}

void Transport::stop() {
  Impl& t = *impl_;
  if (!t.thread.joinable()) return;
  t.work.reset();
  t.context.stop();
  t.thread.join();
}

uint16_t Transport::bound_port() const {
  return impl_->bound_port;
}

const TransportStats& Transport::stats() const {
  return impl_->stats;
}

}  // namespace queen::real
