#include "server/http_server.h"

#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <deque>
#include <optional>
#include <random>

#include "io/real/log.h"
#include "io/real/real_env.h"
#include "server/routes.h"

namespace queen::server {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

struct HttpServer::Shared {
  Shared(HttpServerOptions o, real::NodeDriver& d, ReplyRouter& r)
      : options(std::move(o)), driver(d), router(r) {}
  HttpServerOptions options;
  real::NodeDriver& driver;
  ReplyRouter& router;
  std::atomic<size_t> connections{0};
};

// ---------- reply router ----------

ReplyHandle ReplyRouter::add(std::weak_ptr<ReplyTarget> target) {
  std::lock_guard lock(mutex_);
  ReplyHandle handle = next_++;
  waiting_.emplace(handle, std::move(target));
  return handle;
}

bool ReplyRouter::drop(ReplyHandle handle) {
  std::lock_guard lock(mutex_);
  return waiting_.erase(handle) > 0;
}

void ReplyRouter::deliver(ReplyHandle handle, Reply reply) {
  std::shared_ptr<ReplyTarget> target;
  {
    std::lock_guard lock(mutex_);
    auto it = waiting_.find(handle);
    if (it == waiting_.end()) return;  // the client went away
    target = it->second.lock();
    waiting_.erase(it);
  }
  if (target) target->on_reply(handle, std::move(reply));
}

namespace {

// Ids minted on an edge thread: its own generator, seeded from the OS.
class EdgeIds final : public IdSource {
 public:
  int64_t now_ms() override { return real::wall_clock_us() / 1000; }
  uint64_t random_u64() override {
    thread_local std::mt19937_64 rng = [] {
      std::random_device device;
      return std::mt19937_64((static_cast<uint64_t>(device()) << 32) ^ device());
    }();
    return rng();
  }
};

constexpr int kOverloadedRetryAfterS = 1;
constexpr auto kAcceptRetryDelay = std::chrono::milliseconds(100);
constexpr auto kDrainAfterRefusal = std::chrono::seconds(2);

// A request read from the connection, or an answer decided while reading it.
struct Pending {
  http::request<http::string_body> request;
  std::optional<HttpAnswer> refusal;  // 413 / 400 from the parser; the connection then closes
};

void add_common_headers(http::response<http::string_body>& res) {
  res.set(http::field::server, "queen");
  res.set(http::field::access_control_allow_origin, "*");
  res.set(http::field::access_control_allow_methods, "GET, POST, PUT, DELETE, OPTIONS");
  res.set(http::field::access_control_allow_headers, "Content-Type, Authorization");
  res.set(http::field::access_control_max_age, "86400");
}

class Session final : public ReplyTarget, public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, std::shared_ptr<HttpServer::Shared> shared)
      : stream_(std::move(socket)), shared_(std::move(shared)) {}

  ~Session() override {
    cancel_held();
    shared_->connections.fetch_sub(1);
  }

  void start() {
    asio::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->read_next(); });
  }

  void on_reply(ReplyHandle handle, Reply reply) override {
    asio::post(stream_.get_executor(),
               [self = shared_from_this(), handle, reply = std::move(reply)]() mutable {
                 if (self->held_ != handle) return;
                 self->held_.reset();
                 self->write_answer(render_reply(reply), "application/json");
               });
  }

 private:
  // ---- reading ----

  void read_next() {
    if (reading_ || read_closed_ || pending_.size() >= shared_->options.pipelined_max) return;
    if (!pending_.empty() && pending_bytes_ >= shared_->options.readahead_bytes_max) return;
    parser_.emplace();
    parser_->body_limit(shared_->options.body_bytes_max);
    parser_->header_limit(shared_->options.header_bytes_max);
    reading_ = true;
    http::async_read_header(
        stream_, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code ec, size_t) { self->on_header(ec); });
  }

  void on_header(beast::error_code ec) {
    if (ec) return on_read(ec);
    const auto& req = parser_->get();
    bool expects_continue = beast::iequals(req[http::field::expect], "100-continue");
    if (expects_continue && !busy_ && pending_.empty()) {
      // Nothing else is being written: tell the client to send its body now.
      auto res = std::make_shared<http::response<http::empty_body>>(http::status::continue_,
                                                                    req.version());
      http::async_write(stream_, *res,
                        [self = shared_from_this(), res](beast::error_code wec, size_t) {
                          if (wec) return self->on_read(wec);
                          self->read_body();
                        });
      return;
    }
    read_body();
  }

  void read_body() {
    http::async_read(
        stream_, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code ec, size_t) { self->on_read(ec); });
  }

  void on_read(beast::error_code ec) {
    reading_ = false;
    if (ec == http::error::body_limit) {
      refuse(413, "Payload Too Large");
    } else if (ec == http::error::header_limit) {
      refuse(431, "Request Header Fields Too Large");
    } else if (ec && is_parse_error(ec)) {
      refuse(400, "Bad Request");
    } else if (ec) {
      peer_gone();
      return;
    } else {
      pending_.push_back(Pending{parser_->release(), std::nullopt});
      pending_bytes_ += pending_.back().request.body().size();
    }
    if (!busy_) answer_front();
    read_next();
  }

  static bool is_parse_error(beast::error_code ec) {
    return ec.category() == beast::error_code(http::error::bad_target).category() &&
           ec != http::error::end_of_stream && ec != http::error::partial_message;
  }

  // The request cannot be read on: answer it in turn, then close the connection.
  void refuse(unsigned status, const char* text) {
    read_closed_ = true;
    Pending p;
    p.request.version(11);
    p.request.keep_alive(false);
    p.refusal = HttpAnswer{status, text, 0};
    pending_.push_back(std::move(p));
  }

  void peer_gone() {
    read_closed_ = true;
    peer_gone_ = true;
    cancel_held();
    if (!busy_) close();
  }

  void cancel_held() {
    if (!held_) return;
    if (shared_->router.drop(*held_)) shared_->driver.cancel(*held_);
    held_.reset();
  }

  // ---- answering ----

  void answer_front() {
    if (peer_gone_) return close();
    if (pending_.empty()) {
      if (read_closed_) close();
      return;
    }
    busy_ = true;
    Pending& front = pending_.front();
    if (front.refusal) return write_answer(*front.refusal, "text/plain");
    const auto& req = front.request;
    EdgeIds ids;
    auto method = req.method_string();
    auto target = req.target();
    Parsed parsed = route_request(std::string_view(method.data(), method.size()),
                                  std::string_view(target.data(), target.size()), req.body(),
                                  shared_->options.settings, ids);
    release_body(front);
    if (!parsed.command) return write_answer(parsed.answer, "application/json");
    ReplyHandle handle = shared_->router.add(weak_from_this());
    held_ = handle;
    if (!shared_->driver.submit(handle, std::move(*parsed.command))) {
      shared_->router.drop(handle);
      held_.reset();
      HttpAnswer busy = error_answer(429, "overloaded", "the node has too many queued commands");
      busy.retry_after_s = kOverloadedRetryAfterS;
      write_answer(busy, "application/json");
    }
  }

  // The body is parsed: its bytes no longer count against the read-ahead budget.
  void release_body(Pending& p) {
    pending_bytes_ -= p.request.body().size();
    std::string().swap(p.request.body());
  }

  void write_answer(const HttpAnswer& answer, const char* content_type) {
    const auto& req = pending_.front().request;
    auto res = std::make_shared<http::response<http::string_body>>(
        static_cast<http::status>(answer.status), req.version());
    add_common_headers(*res);
    if (!answer.body.empty()) res->set(http::field::content_type, content_type);
    if (answer.retry_after_s > 0) {
      res->set(http::field::retry_after, std::to_string(answer.retry_after_s));
    }
    res->keep_alive(req.keep_alive() && !pending_.front().refusal);
    if (real::log_enabled(LogLevel::debug)) {
      real::log_line(LogLevel::debug, "http",
                     std::string(req.method_string()) + " " + std::string(req.target()) + " -> " +
                         std::to_string(answer.status));
    }
    res->body() = answer.body;
    res->prepare_payload();
    http::async_write(stream_, *res,
                      [self = shared_from_this(), res](beast::error_code ec, size_t) {
                        self->on_written(ec, res->keep_alive());
                      });
  }

  void on_written(beast::error_code ec, bool keep_alive) {
    bool refused = pending_.front().refusal.has_value();
    pending_bytes_ -= pending_.front().request.body().size();
    pending_.pop_front();
    busy_ = false;
    if (ec) return close();
    if (refused) return drain_and_close();
    if (!keep_alive) return close();
    answer_front();
    read_next();
  }

  // After a refusal the client may still be sending its body: read and discard it for a
  // moment so that it sees the answer rather than a reset.
  void drain_and_close() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    stream_.expires_after(kDrainAfterRefusal);
    drain_buffer_.resize(64 * 1024);
    stream_.async_read_some(asio::buffer(drain_buffer_),
                            [self = shared_from_this()](beast::error_code ec, size_t) {
                              if (ec) return self->close();
                              self->drain_and_close();
                            });
  }

  void close() {
    if (closed_) return;
    closed_ = true;
    cancel_held();
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.socket().close(ignored);
  }

  beast::tcp_stream stream_;
  std::shared_ptr<HttpServer::Shared> shared_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::deque<Pending> pending_;  // read, not yet answered; the front is being answered
  uint64_t pending_bytes_ = 0;   // body bytes held in pending_
  std::optional<ReplyHandle> held_;
  std::vector<char> drain_buffer_;
  bool reading_ = false;
  bool read_closed_ = false;
  bool busy_ = false;
  bool peer_gone_ = false;
  bool closed_ = false;
};

}  // namespace

// ---------- server ----------

HttpServer::HttpServer(HttpServerOptions options, real::NodeDriver& driver, ReplyRouter& router)
    : options_(options),
      acceptor_(context_),
      accept_retry_(context_),
      shared_(std::make_shared<Shared>(options, driver, router)) {}

HttpServer::~HttpServer() {
  stop();
}

Status HttpServer::listen() {
  boost::system::error_code ec;
  auto address = asio::ip::make_address(options_.bind_addr, ec);
  std::string where = options_.bind_addr + ":" + std::to_string(options_.port);
  if (ec) return make_error(Errc::bad_request, "bad bind address " + options_.bind_addr);
  tcp::endpoint endpoint(address, options_.port);
  acceptor_.open(endpoint.protocol(), ec);
  if (!ec) acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor_.bind(endpoint, ec);
  if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return make_error(Errc::io, "cannot listen on " + where + ": " + ec.message());
  bound_port_ = acceptor_.local_endpoint().port();
  real::log_line(LogLevel::info, "http",
                 "listening on " + options_.bind_addr + ":" + std::to_string(bound_port_));
  return ok_status();
}

void HttpServer::accept_next() {
  acceptor_.async_accept(asio::make_strand(context_),
                         [this](beast::error_code ec, tcp::socket socket) {
                           if (ec == asio::error::operation_aborted) return;
                           if (ec) return accept_later(ec);
                           if (shared_->connections.fetch_add(1) >= options_.connections_max) {
                             shared_->connections.fetch_sub(1);
                             beast::error_code ignored;
                             socket.close(ignored);
                           } else {
                             socket.set_option(tcp::no_delay(true), ec);
                             std::make_shared<Session>(std::move(socket), shared_)->start();
                           }
                           accept_next();
                         });
}

// Out of descriptors (or another accept failure): wait a moment instead of spinning.
void HttpServer::accept_later(beast::error_code ec) {
  real::log_line(LogLevel::warn, "http", "accept failed: " + ec.message());
  accept_retry_.expires_after(kAcceptRetryDelay);
  accept_retry_.async_wait([this](beast::error_code wait_ec) {
    if (!wait_ec) accept_next();
  });
}

void HttpServer::run() {
  asio::signal_set signals(context_, SIGINT, SIGTERM);
  signals.async_wait([this](beast::error_code ec, int signal) {
    if (ec) return;
    real::log_line(LogLevel::info, "http", "signal " + std::to_string(signal) + ": stopping");
    context_.stop();
  });
  accept_next();
  std::vector<std::thread> threads;
  for (int i = 1; i < options_.threads; ++i) threads.emplace_back([this] { context_.run(); });
  context_.run();
  for (auto& t : threads) t.join();
}

void HttpServer::stop() {
  context_.stop();
}

}  // namespace queen::server
