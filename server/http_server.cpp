#include "server/http_server.h"

#include "io/real/thread_name.h"
#include "server/http_session.h"
#include "server/status_history.h"

namespace queen::server {

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

// ---------- status sampler ----------

namespace {

// Keeps each metrics reply as a sample of the status history. The reply arrives on the node
// thread; the sample (which reads /proc and getrusage) is taken on the server's own.
class StatusSampler final : public ReplyTarget {
 public:
  explicit StatusSampler(asio::any_io_executor executor) : executor_(std::move(executor)) {}
  void on_reply(ReplyHandle, Reply reply) override {
    auto* m = std::get_if<MetricsReply>(&reply.body);
    if (m == nullptr) return;
    int64_t at_ms = real::wall_clock_us() / 1000;
    asio::post(executor_, [metrics = std::move(*m), at_ms] {
      status_history().add(sample_of(metrics, at_ms));
    });
  }

 private:
  asio::any_io_executor executor_;
};

}  // namespace

// ---------- server ----------

HttpServer::HttpServer(HttpServerOptions options, real::NodeDriver& driver, ReplyRouter& router)
    : options_(options),
      acceptor_(context_),
      accept_retry_(context_),
      disk_timer_(context_),
      sample_timer_(context_),
      place_timer_(context_),
      sampler_(std::make_shared<StatusSampler>(context_.get_executor())),
      shared_(std::make_shared<Shared>(options, driver, router)) {
  shared_->render = &render_context_;
  if (options_.threads == 0 || shared_->placement.adaptive()) shared_->node = &driver.context();
  if (options_.threads > 0) shared_->edges.push_back(&context_);
  for (int i = 1; i < options_.threads; ++i) {
    more_contexts_.push_back(std::make_unique<asio::io_context>(1));
    shared_->edges.push_back(more_contexts_.back().get());
  }
  if (options_.forward && options_.forward->offload) {
    EdgeIds ids;
    shared_->forwarder = std::make_shared<CommandForwarder>(
        context_.get_executor(), driver, router, shared_->admission, shared_->disk,
        CommandForwarder::Options{.admit_hold_ms = options_.admit_fwd_hold_ms,
                                  .first_id = ids.random_u64() >> 1});
    std::weak_ptr<CommandForwarder> forwarder = shared_->forwarder;
    driver.set_command_forwarder([forwarder, &driver](uint64_t to, uint64_t id,
                                                      std::shared_ptr<const CommandEnvelope> c,
                                                      int64_t remaining_ms) {
      auto f = forwarder.lock();
      if (!f) return driver.forward_reply(id, std::nullopt);
      f->forward(to, std::move(c), remaining_ms, [&driver, id](std::optional<Reply> reply) {
        driver.forward_reply(id, std::move(reply));
      });
    });
  }
}

std::optional<real::ForwardHandler> HttpServer::forward_handler() {
  if (!shared_->forwarder) return std::nullopt;
  return shared_->forwarder->handler();
}

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
  asio::io_context& home = shared_->placed();
  bool on_node = &home == shared_->node;
  acceptor_.async_accept(home, [this, on_node](beast::error_code ec, tcp::socket socket) {
    if (ec == asio::error::operation_aborted) return;
    if (ec) return accept_later(ec);
    if (shared_->connections.fetch_add(1) >= options_.connections_max) {
      shared_->connections.fetch_sub(1);
      beast::error_code ignored;
      socket.close(ignored);
    } else {
      socket.set_option(tcp::no_delay(true), ec);
      auto session = std::make_shared<Session>(std::move(socket), shared_);
      if (!on_node || session->serve_on_node()) session->start();
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

void HttpServer::check_disk_later() {
  disk_timer_.expires_after(milliseconds(options_.disk_check_ms));
  disk_timer_.async_wait([this](beast::error_code ec) {
    if (ec) return;
    shared_->disk.check(shared_->admission.in_use());
    check_disk_later();
  });
}

void HttpServer::sample_status() {
  EdgeIds ids;
  Parsed p = parse_metrics(options_.settings, ids);
  ReplyHandle handle = shared_->router.add(sampler_);
  if (!shared_->driver.submit(handle, std::move(*p.command))) shared_->router.drop(handle);
  sample_timer_.expires_after(milliseconds(options_.status_sample_ms));
  sample_timer_.async_wait([this](beast::error_code ec) {
    if (!ec) sample_status();
  });
}

void HttpServer::place_later() {
  place_timer_.expires_after(milliseconds(kPlacementTickMs));
  place_timer_.async_wait([this](beast::error_code ec) {
    if (ec) return;
    if (shared_->placement.tick(steady_us(std::chrono::steady_clock::now()))) {
      bool on_node = shared_->serving_on_node();
      edge_counters().serving_on_node.store(on_node, std::memory_order_relaxed);
      real::log_line(LogLevel::debug, "http",
                     std::string("connections move to the ") +
                         (on_node ? "node thread" : "edge threads") + " at " +
                         std::to_string(shared_->placement.last_busy()) + " in flight");
    }
    place_later();
  });
}

void HttpServer::run() {
  shared_->disk.check(shared_->admission.in_use());
  check_disk_later();
  sample_status();
  edge_counters().serving_on_node.store(shared_->serving_on_node());
  if (shared_->placement.adaptive()) place_later();
  asio::signal_set signals(context_, SIGINT, SIGTERM);
  signals.async_wait([this](beast::error_code ec, int signal) {
    if (ec) return;
    real::log_line(LogLevel::info, "http", "signal " + std::to_string(signal) + ": stopping");
    context_.stop();
  });
  accept_next();
  std::vector<std::thread> threads;
  threads.emplace_back([this] {
    real::name_this_thread("queen-render");
    auto work = asio::make_work_guard(render_context_);
    render_context_.run();
  });
  for (auto& c : more_contexts_)
    threads.emplace_back([ctx = c.get()] {
      real::name_this_thread("queen-http");
      auto work = asio::make_work_guard(*ctx);
      ctx->run();
    });
  context_.run();
  close_node_connections();
  for (auto& c : more_contexts_) c->stop();
  render_context_.stop();
  for (auto& t : threads) t.join();
}

void HttpServer::stop() {
  context_.stop();
  for (auto& c : more_contexts_) c->stop();
  render_context_.stop();
}

void HttpServer::close_node_connections() {
  if (!shared_->node) return;
  shared_->driver.run_on_node([shared = shared_](Node&) {
    std::vector<std::shared_ptr<Session>> open;
    {
      std::lock_guard lock(shared->on_node_mutex);
      shared->on_node_closing = true;
      for (const auto& [key, session] : shared->on_node)
        if (auto s = session.lock()) open.push_back(std::move(s));
    }
    for (const auto& s : open) s->shut();
  });
}

}  // namespace queen::server
