#include <utility>  // before Asio (Boost 1.74)

#include "io/real/transport.h"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <deque>
#include <map>
#include <optional>
#include <thread>

#include "io/real/body_room.h"
#include "io/real/connect.h"
#include "io/real/log.h"
#include "io/real/thread_name.h"

namespace queen::real {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using asio::awaitable;
using asio::use_awaitable;

namespace {

constexpr const char* kPath = "/raft/messages";
constexpr const char* kForwardPath = "/raft/forward";
constexpr const char* kTokenHeader = "x-queen-raft-token";
constexpr const char* kFromHeader = "x-queen-raft-from";
constexpr const char* kClusterHeader = "x-queen-raft-cluster";

namespace ssl = asio::ssl;
using TlsStream = beast::ssl_stream<beast::tcp_stream>;
using PeerRequest = http::request<http::vector_body<uint8_t>>;

// A connection this node opened to a peer: plain TCP, or TLS over it.
struct PeerConn {
  virtual ~PeerConn() = default;
  virtual beast::tcp_stream& tcp() = 0;
  // Sends one request and reads its response.
  virtual awaitable<void> exchange(PeerRequest& req, http::response<http::string_body>& res,
                                   beast::error_code& ec) = 0;
};

template <class Stream>
struct PeerConnOf final : PeerConn {
  Stream stream;
  explicit PeerConnOf(Stream s) : stream(std::move(s)) {}
  beast::tcp_stream& tcp() override { return beast::get_lowest_layer(stream); }
  awaitable<void> exchange(PeerRequest& req, http::response<http::string_body>& res,
                           beast::error_code& ec) override {
    co_await http::async_write(stream, req, asio::redirect_error(use_awaitable, ec));
    if (ec) co_return;
    beast::flat_buffer buffer;
    co_await http::async_read(stream, buffer, res, asio::redirect_error(use_awaitable, ec));
  }
};

// QUEEN_RAFT_TLS_*: this node's certificate and key (presented as server and as client), and
// the CA every peer's must chain to; a peer without a certificate is refused.
Result<std::shared_ptr<ssl::context>> tls_context(const TransportOptions& o) {
  auto ctx = std::make_shared<ssl::context>(ssl::context::tls);
  beast::error_code ec;
  ctx->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                       ssl::context::no_sslv3 | ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1,
                   ec);
  auto fail = [](const std::string& var, const std::string& path, const beast::error_code& e) {
    return make_error(Errc::bad_request, var + "=" + path + ": " + e.message());
  };
  ctx->use_certificate_chain_file(o.tls_cert, ec);
  if (ec) return fail("QUEEN_RAFT_TLS_CERT", o.tls_cert, ec);
  ctx->use_private_key_file(o.tls_key, ssl::context::pem, ec);
  if (ec) return fail("QUEEN_RAFT_TLS_KEY", o.tls_key, ec);
  ctx->load_verify_file(o.tls_ca, ec);
  if (ec) return fail("QUEEN_RAFT_TLS_CA", o.tls_ca, ec);
  ctx->set_verify_mode(ssl::verify_peer | ssl::verify_fail_if_no_peer_cert);
  return ctx;
}

}  // namespace

bool tokens_equal(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i)
    diff |= static_cast<unsigned char>(a[i]) ^ static_cast<unsigned char>(b[i]);
  return diff == 0;
}

struct Transport::Impl {
  // One connection to a peer and what waits for it. Lane 0 carries Raft messages; lanes 1..N
  // carry forwarded commands and their replies.
  struct Lane {
    std::deque<Bytes> queue;
    uint64_t queued_bytes = 0;
    bool sending = false;
    bool watching = false;  // idle, waiting to see the peer close the connection
    std::unique_ptr<PeerConn> stream;
    int64_t backoff_ms = 0;
  };

  struct Peer {
    PeerAddress address;
    std::vector<Lane> lanes;
    bool retired = false;  // no longer a member (kept: a send loop may still hold it)
  };

  TransportOptions options;
  std::shared_ptr<ssl::context> tls;  // QUEEN_RAFT_TLS_*: every peer connection is TLS
  Deliver deliver;
  ForwardHandler forward;
  asio::io_context context;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work;
  tcp::acceptor acceptor{context};
  std::thread thread;
  std::map<uint64_t, Peer> peers;
  TransportStats stats;
  uint16_t bound_port = 0;
  uint32_t strangers = 0;  // connections not yet admitted (the transport thread's own)

  Impl(TransportOptions o, Deliver d) : options(std::move(o)), deliver(std::move(d)) {
    for (const auto& p : options.peers) {
      peers[p.id].address = p;
      peers[p.id].lanes.resize(1 + options.forward_streams);
    }
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
      if (strangers >= options.unauthenticated_max) {
        ++stats.strangers_dropped;  // closed as it comes: the strangers' budget is spent
        continue;
      }
      ++strangers;
      asio::co_spawn(context, serve(beast::tcp_stream(std::move(socket))), asio::detached);
    }
  }

  // The sender named by a request's header, if it is one of the peers.
  std::optional<uint64_t> peer_of(const http::request_header<>& head) const {
    auto field = head[kFromHeader];
    uint64_t id = 0;
    auto [end, ec] = std::from_chars(field.data(), field.data() + field.size(), id);
    if (ec != std::errc() || end != field.data() + field.size()) return std::nullopt;
    auto it = peers.find(id);
    if (it == peers.end() || it->second.retired) return std::nullopt;
    return id;
  }

  bool admitted(const http::request_header<>& head) const {
    auto token = head[kTokenHeader];
    auto cluster = head[kClusterHeader];
    bool token_ok = tokens_equal(std::string(token.data(), token.size()), options.token);
    bool cluster_ok = std::string_view(cluster.data(), cluster.size()) == options.cluster_id;
    bool path_ok = head.target() == kPath || head.target() == kForwardPath;
    return token_ok && cluster_ok && path_ok && peer_of(head).has_value();
  }

  // A connection from a peer (or a stranger): over TLS when configured, the handshake (which
  // requires a certificate of the cluster's CA) within the header timeout.
  awaitable<void> serve(beast::tcp_stream plain) {
    if (!tls) {
      co_await serve_on(plain);
      co_return;
    }
    TlsStream stream(std::move(plain), *tls);
    beast::get_lowest_layer(stream).expires_after(
        std::chrono::milliseconds(options.header_timeout_ms));
    beast::error_code ec;
    co_await stream.async_handshake(ssl::stream_base::server,
                                    asio::redirect_error(use_awaitable, ec));
    if (ec) {
      --strangers;
      ++stats.refused;
      co_return;
    }
    co_await serve_on(stream);
  }

  template <class Stream>
  awaitable<void> serve_on(Stream& stream) {
    beast::flat_buffer buffer;
    bool stranger = true;  // until a request of this connection is admitted
    for (;;) {
      beast::error_code ec;
      http::request_parser<http::vector_body<uint8_t>> parser;
      parser.body_limit(options.body_bytes_max);
      if (stranger) {
        beast::get_lowest_layer(stream).expires_after(
            std::chrono::milliseconds(options.header_timeout_ms));
      } else {
        beast::get_lowest_layer(stream).expires_never();  // an idle peer connection stays open
      }
      co_await http::async_read_header(stream, buffer, parser,
                                       asio::redirect_error(use_awaitable, ec));
      if (ec) {
        if (stranger) {
          --strangers;
          if (ec == beast::error::timeout) ++stats.strangers_dropped;
        }
        co_return;
      }
      const auto& head = parser.get();
      bool forwarded = head.target() == kForwardPath;
      if (!admitted(head)) {
        if (stranger) --strangers;
        ++stats.refused;
        http::response<http::string_body> res{http::status::unauthorized, head.version()};
        res.set(http::field::content_type, "application/json");
        res.body() = R"({"error":"bad raft token or path","code":"unauthorized"})";
        res.keep_alive(false);
        res.prepare_payload();
        beast::get_lowest_layer(stream).expires_after(
            std::chrono::milliseconds(options.io_timeout_ms));
        co_await http::async_write(stream, res, asio::redirect_error(use_awaitable, ec));
        co_return;
      }
      if (stranger) {
        stranger = false;
        --strangers;
      }
      uint64_t from = *peer_of(head);
      beast::get_lowest_layer(stream).expires_after(
          std::chrono::milliseconds(options.io_timeout_ms));
      make_room_for_body(buffer, parser.content_length());
      co_await http::async_read(stream, buffer, parser, asio::redirect_error(use_awaitable, ec));
      if (ec) co_return;
      unpack(from, parser.get().body(), forwarded && forward.deliver ? forward.deliver : deliver);
      http::response<http::empty_body> res{http::status::no_content, head.version()};
      res.keep_alive(parser.get().keep_alive());
      co_await http::async_write(stream, res, asio::redirect_error(use_awaitable, ec));
      if (ec || !res.keep_alive()) co_return;
    }
  }

  void unpack(uint64_t from, const std::vector<uint8_t>& body, const Deliver& to) {
    size_t pos = 0;
    while (pos + 4 <= body.size()) {
      uint32_t len = 0;
      std::memcpy(&len, body.data() + pos, 4);
      pos += 4;
      if (len > body.size() - pos) return;  // a damaged batch: the rest is dropped
      ++stats.received;
      to(from,
         Bytes(body.begin() + static_cast<long>(pos), body.begin() + static_cast<long>(pos + len)));
      pos += len;
    }
  }

  // ---- sending ----

  void enqueue(uint64_t to, size_t lane, Bytes message) {
    auto it = peers.find(to);
    if (it == peers.end() || it->second.retired) return;
    Peer& p = it->second;
    Lane& l = p.lanes[lane];
    if (l.queued_bytes + message.size() > options.queued_bytes_max) {
      ++stats.dropped;
      if (lane > 0) lost(to);
      return;
    }
    l.queued_bytes += message.size();
    l.queue.push_back(std::move(message));
    if (l.watching && l.stream) {
      beast::error_code ec;
      l.stream->tcp().socket().cancel(ec);  // the watch ends and the loop sends
    }
    if (!l.sending) {
      l.sending = true;
      asio::co_spawn(context, send_loop(p, lane), asio::detached);
    }
  }

  void lost(uint64_t peer) {
    if (forward.lost) forward.lost(peer);
  }

  awaitable<void> send_loop(Peer& p, size_t lane) {
    Lane& l = p.lanes[lane];
    for (;;) {
      while (!l.queue.empty()) co_await send_batch(p, lane);
      // A forward lane watches its idle connection: a peer that goes away fails what waits
      // on it at once instead of at its deadline.
      if (lane == 0 || !l.stream) break;
      if (!co_await idle_until_closed(l)) continue;  // something to send
      l.stream.reset();
      lost(p.address.id);
      if (l.queue.empty()) break;
    }
    l.sending = false;
  }

  // True when the peer closed the idle connection; false when there is something to send.
  awaitable<bool> idle_until_closed(Lane& l) {
    l.watching = true;
    beast::error_code ec;
    co_await l.stream->tcp().socket().async_wait(tcp::socket::wait_read,
                                                 asio::redirect_error(use_awaitable, ec));
    l.watching = false;
    // Cancelled: something was queued. Readable: a server never writes unasked, so the peer
    // closed it (or an error did).
    co_return ec != asio::error::operation_aborted;
  }

  awaitable<void> send_batch(Peer& p, size_t lane) {
    Lane& l = p.lanes[lane];
    if (!l.stream && !co_await connect(p, l)) {
      drop_queue(p.address.id, lane);
      asio::steady_timer wait(context, std::chrono::milliseconds(l.backoff_ms));
      beast::error_code ec;
      co_await wait.async_wait(asio::redirect_error(use_awaitable, ec));
      l.backoff_ms =
          std::min(options.reconnect_ms_max, std::max(options.reconnect_ms_min, l.backoff_ms * 2));
      co_return;
    }
    http::request<http::vector_body<uint8_t>> req{http::verb::post,
                                                  lane == 0 ? kPath : kForwardPath, 11};
    req.set(http::field::host, p.address.host);
    req.set(kTokenHeader, options.token);
    req.set(kClusterHeader, options.cluster_id);
    req.set(kFromHeader, std::to_string(options.self_id));
    req.set(http::field::content_type, "application/octet-stream");
    req.keep_alive(true);
    size_t count = take_batch(l, &req.body());
    req.prepare_payload();
    beast::error_code ec;
    l.stream->tcp().expires_after(std::chrono::milliseconds(options.io_timeout_ms));
    http::response<http::string_body> res;
    co_await l.stream->exchange(req, res, ec);
    if (!ec && res.result() != http::status::no_content) ec = asio::error::access_denied;
    if (ec) {
      stats.dropped += count;
      l.stream.reset();
      if (lane > 0) lost(p.address.id);
      co_return;
    }
    l.stream->tcp().expires_never();
    stats.sent += count;
    l.backoff_ms = 0;
  }

  size_t take_batch(Lane& p, std::vector<uint8_t>* body) {
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

  void drop_queue(uint64_t peer, size_t lane) {
    Lane& l = peers[peer].lanes[lane];
    stats.dropped += l.queue.size();
    l.queue.clear();
    l.queued_bytes = 0;
    if (lane > 0) lost(peer);
  }

  awaitable<bool> connect(Peer& p, Lane& l) {
    auto stream = co_await connect_within(context.get_executor(), p.address.host, p.address.port,
                                          options.io_timeout_ms);
    if (!stream) co_return false;
    if (!tls) {
      l.stream = std::make_unique<PeerConnOf<beast::tcp_stream>>(std::move(*stream));
      co_return true;
    }
    TlsStream secured(std::move(*stream), *tls);
    beast::get_lowest_layer(secured).expires_after(
        std::chrono::milliseconds(options.io_timeout_ms));
    beast::error_code ec;
    co_await secured.async_handshake(ssl::stream_base::client,
                                     asio::redirect_error(use_awaitable, ec));
    if (ec) co_return false;
    l.stream = std::make_unique<PeerConnOf<TlsStream>>(std::move(secured));
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
  if (!t.options.tls_cert.empty()) {
    auto ctx = tls_context(t.options);
    if (!ctx.ok()) return ctx.error();
    t.tls = std::move(ctx.value());
  }
  beast::error_code ec;
  auto address = asio::ip::make_address(t.options.listen_host, ec);
  if (ec) {  // a host name (the peer list may use them): the first address it resolves to
    tcp::resolver resolver(t.context);
    auto found = resolver.resolve(t.options.listen_host, std::to_string(t.options.listen_port), ec);
    if (ec || found.empty()) {
      return make_error(Errc::bad_request,
                        "cannot listen for peers: " + t.options.listen_host + " does not resolve");
    }
    address = found.begin()->endpoint().address();
  }
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
  t.thread = std::thread([&t] {
    name_this_thread("queen-raft-net");
    t.context.run();
  });
  return ok_status();
}

void Transport::send(uint64_t to, Bytes message) {
  Impl& t = *impl_;
  asio::post(t.context,
             [&t, to, m = std::move(message)]() mutable { t.enqueue(to, 0, std::move(m)); });
}

void Transport::set_peers(std::vector<PeerAddress> peers) {
  Impl& t = *impl_;
  asio::post(t.context, [&t, peers = std::move(peers)] {
    for (auto& [id, p] : t.peers) p.retired = true;
    for (const PeerAddress& a : peers) {
      if (a.id == t.options.self_id) continue;
      Impl::Peer& p = t.peers[a.id];
      if (p.lanes.empty()) p.lanes.resize(1 + t.options.forward_streams);
      p.address = a;
      p.retired = false;
    }
  });
}

void Transport::set_forward_handler(ForwardHandler handler) {
  impl_->forward = std::move(handler);
}

void Transport::send_forward(uint64_t to, uint64_t key, Bytes message) {
  Impl& t = *impl_;
  size_t lane = 1 + key % std::max<uint32_t>(1, t.options.forward_streams);
  asio::post(t.context, [&t, to, lane, m = std::move(message)]() mutable {
    t.enqueue(to, lane, std::move(m));
  });
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
