// A connection's reading and answering (server/http_session.h).
#include "server/http_session.h"
#include "server/edge_counters.h"

#include <unistd.h>

namespace queen::server {

void Session::start() {
  asio::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->read_next(); });
}

void Session::on_reply(ReplyHandle handle, Reply reply) {
  asio::post(stream_.get_executor(), [self = shared_from_this(), handle, reply = std::move(reply),
                                      since = real::HandoffClock::now()]() mutable {
    real::record_handoff(real::Handoff::reply, since);
    if (self->held_ != handle) return;
    self->held_.reset();
    self->deadline_timer_.cancel();
    if (self->try_forward(reply)) return;
    if (self->fetch_again(reply)) return;
    self->forwarding_.reset();
    if (rendered_rows(reply) >= self->shared_->options.render_apart_rows)
      return self->render_apart(std::move(reply));
    self->write_answer(render_reply(reply, self->held_render_, self->held_view_),
                       "application/json");
  });
}

// A whole list of a million partitions takes about a second to render: on the render thread,
// so this edge thread's other connections are answered meanwhile. The session stays busy, so
// nothing else of this connection is answered before it; the reply is freed there too.
void Session::render_apart(Reply reply) {
  asio::post(*shared_->render, [self = shared_from_this(), reply = std::move(reply),
                                as = held_render_, view = held_view_]() mutable {
    auto answer = std::make_shared<HttpAnswer>(render_reply(reply, as, view));
    reply = Reply{};
    asio::post(self->stream_.get_executor(), [self, answer] {
      if (self->peer_gone_) return self->close();
      self->write_answer(std::move(*answer), "application/json");
    });
  });
}

void Session::read_next() {
  if (reading_ || read_closed_ || pending_.size() >= shared_->options.pipelined_max) return;
  if (!pending_.empty() && pending_bytes_ >= shared_->options.readahead_bytes_max) return;
  parser_.emplace();
  parser_->body_limit(shared_->options.body_bytes_max);
  parser_->header_limit(shared_->options.header_bytes_max);
  reading_ = true;
  if (buffer_.size() == 0) return wait_for_request();
  read_header();
}

// Nothing of the next request has arrived: wait for its first byte without a buffer, so an
// idle keep-alive connection costs only its socket and this session.
void Session::wait_for_request() {
  if (placed_elsewhere() && quiet() && move()) return;
  if (buffer_.capacity() > kIdleReadBufferBytesMax) buffer_.shrink_to_fit();
  waiting_idle_ = true;
  arm_idle_timer();
  stream_.socket().async_wait(tcp::socket::wait_read,
                              [self = shared_from_this()](beast::error_code ec) {
                                self->waiting_idle_ = false;
                                self->idle_timer_.cancel();
                                if (self->moving_ && self->moved_on(ec)) return;
                                if (ec) return self->on_read(ec);
                                self->read_header();
                              });
}

void Session::move_when_quiet() {
  if (!waiting_idle_ || moving_ || !placed_elsewhere() || !quiet()) return;
  moving_ = true;
  beast::error_code ignored;
  stream_.socket().cancel(ignored);  // the wait above: nothing of the next request is read
}

bool Session::moved_on(beast::error_code ec) {
  moving_ = false;
  if (quiet() && move()) return true;
  if (ec != asio::error::operation_aborted) return false;
  wait_for_request();  // it stays: wait again for the request it was waiting for
  return true;
}

bool Session::placed_elsewhere() const {
  if (!shared_->node || shared_->edges.empty()) return false;  // one place only
  return shared_->placement.on_node() != on_node_key_.has_value();
}

bool Session::quiet() const {
  return pending_.empty() && !held_ && !busy_ && buffer_.size() == 0 && !forwarding_ &&
         !fetch_wait_ && !admit_ticket_ && !peer_gone_ && !closed_ && !read_closed_;
}

bool Session::move() {
  bool here_on_node = on_node_key_.has_value();
  asio::io_context& there = here_on_node ? shared_->next_edge() : *shared_->node;
  beast::error_code ec;
  auto protocol = stream_.socket().local_endpoint(ec).protocol();
  if (ec) return false;
  auto fd = stream_.socket().release(ec);
  if (ec) return false;
  moved_ = true;
  closed_ = true;
  tcp::socket socket(there);
  socket.assign(protocol, fd, ec);
  if (ec) {  // not registered with the other thread's reactor: the connection ends here
    ::close(fd);
    moved_ = false;
    return true;
  }
  auto next = std::make_shared<Session>(std::move(socket), shared_);
  // A stop closing the node thread's connections has begun: this one closes with them (the
  // new session ends unstarted).
  if (!here_on_node && !next->serve_on_node()) return true;
  edge_counters().connections_moved.fetch_add(1, std::memory_order_relaxed);
  next->start();
  return true;
}

void Session::arm_idle_timer() {
  idle_timer_.expires_after(milliseconds(shared_->options.idle_timeout_ms));
  idle_timer_.async_wait([self = shared_from_this()](beast::error_code ec) {
    if (ec || !self->waiting_idle_) return;
    // A request is still at the node or being answered: the connection is not idle.
    if (self->held_ || self->busy_ || !self->pending_.empty()) return self->arm_idle_timer();
    self->close();
  });
}

void Session::read_header() {
  stream_.expires_after(milliseconds(shared_->options.header_timeout_ms));
  http::async_read_header(
      stream_, buffer_, *parser_,
      [self = shared_from_this()](beast::error_code ec, size_t) { self->on_header(ec); });
}

// The admission source of a client connecting from the socket's peer address.
AdmitSource Session::client_of(const tcp::socket& socket) {
  beast::error_code ec;
  auto peer = socket.remote_endpoint(ec);
  return ec ? kLocalClients : client_source(peer.address().to_string());
}

// With JWT on, the token is checked on the header: a request without a valid one is
// answered before its body is read, and takes no admission permit.
bool Session::refused_at_header() {
  header_subject_.reset();
  const Authenticator* auth = shared_->options.settings.auth.get();
  if (!auth) return false;
  const auto& req = parser_->get();
  auto method = req.method_string();
  auto target = req.target();
  auto header = req[http::field::authorization];
  std::string subject;
  auto denied = auth->check(std::string_view(method.data(), method.size()),
                            std::string_view(target.data(), target.size()),
                            std::string_view(header.data(), header.size()),
                            EdgeIds().now_ms() / 1000, &subject);
  if (!denied) {
    header_subject_ = std::move(subject);
    return false;
  }
  reading_ = false;
  refuse(*denied, /*json=*/true);
  if (!busy_) answer_front();
  return true;
}

// The body limit of the request's route-table row: the server's for the routes that carry
// messages, a small one for the others and for paths no row matches.
uint64_t Session::body_limit_of_row() const {
  const auto& req = parser_->get();
  auto method = req.method_string();
  auto target = req.target();
  std::string_view path(target.data(), target.size());
  const Route* row =
      find_route(std::string_view(method.data(), method.size()), path.substr(0, path.find('?')));
  uint64_t server_max = shared_->options.body_bytes_max;
  if (!row) return std::min(server_max, kBodyBytesSmallMax);
  if (row->body_bytes_max == kBodyServerMax) return server_max;
  return std::min(server_max, row->body_bytes_max);
}

// The header is in: check its token, then take admission permits for the body before
// reading it.
void Session::on_header(beast::error_code ec) {
  if (ec) return on_read(ec);
  if (refused_at_header()) return;
  parser_->body_limit(body_limit_of_row());
  Admission& admission = shared_->admission;
  uint64_t bytes = parser_->content_length().value_or(parser_->chunked() ? kChunkedPermitBytes : 0);
  if (!admission.enabled() || bytes == 0) {
    edge_counters().count(AdmitOutcome::admitted);
    return after_admitted();
  }
  AdmitPermit permit = admission.permit_for(bytes, admit_source());
  auto ticket = admission.acquire(permit, [self = shared_from_this(), permit] {
    asio::post(self->stream_.get_executor(), [self, permit] { self->on_admitted(permit); });
  });
  if (!ticket) {
    edge_counters().count(AdmitOutcome::admitted);
    reading_permit_ = permit;
    return after_admitted();
  }
  admit_ticket_ = *ticket;
  EdgeIds ids;
  hold_timer_.expires_after(milliseconds(jittered(shared_->options.admit_hold_ms, ids)));
  hold_timer_.async_wait([self = shared_from_this()](beast::error_code wait_ec) {
    if (!wait_ec) self->on_hold_elapsed();
  });
}

// Whose share a request takes: the peer that forwarded it, or the client's address.
AdmitSource Session::admit_source() const {
  AdmitSource peer = forwarding_peer(parser_->get()[kForwardedHeader]);
  return peer != kLocalClients ? peer : client_;
}

void Session::on_admitted(AdmitPermit permit) {
  edge_counters().count(AdmitOutcome::waited);
  admit_ticket_.reset();
  hold_timer_.cancel();
  reading_permit_ = permit;
  after_admitted();
}

// The budget stayed full for the whole hold: 429, and the unread body closes the connection.
void Session::on_hold_elapsed() {
  if (!admit_ticket_ || !shared_->admission.withdraw(*admit_ticket_)) return;  // granted
  admit_ticket_.reset();
  reading_ = false;
  edge_counters().count(AdmitOutcome::overloaded);
  EdgeIds ids;
  HttpAnswer answer = error_answer(429, "overloaded", "the admission budget stayed full");
  answer.retry_after_s =
      kAdmitRetryAfterMinS +
      static_cast<int>(ids.random_u64() % (kAdmitRetryAfterMaxS - kAdmitRetryAfterMinS + 1));
  refuse(answer, /*json=*/true);
  if (!busy_) answer_front();
}

void Session::after_admitted() {
  const auto& req = parser_->get();
  bool expects_continue = beast::iequals(req[http::field::expect], "100-continue");
  if (expects_continue && !busy_ && pending_.empty()) {
    // Nothing else is being written: tell the client to send its body now.
    auto res =
        std::make_shared<http::response<http::empty_body>>(http::status::continue_, req.version());
    stream_.expires_after(milliseconds(shared_->options.body_timeout_ms));
    http::async_write(stream_, *res,
                      [self = shared_from_this(), res](beast::error_code wec, size_t) {
                        if (wec) return self->on_read(wec);
                        self->read_body();
                      });
    return;
  }
  read_body();
}

// The body is read a piece at a time: it must arrive within body_timeout_ms of its header,
// and, past a grace second, at QUEEN_HTTP_BODY_MIN_BYTES_PER_S at least, so a client
// trickling a large body gives its admission permit back early instead of holding it.
void Session::read_body() {
  real::make_room_for_body(buffer_, parser_->content_length());
  body_started_ = std::chrono::steady_clock::now();
  body_expected_ = parser_->content_length().value_or(0);
  stream_.expires_after(milliseconds(shared_->options.body_timeout_ms));
  read_body_some();
}

void Session::read_body_some() {
  if (parser_->is_done()) return on_read({});  // no body, or all of it came with the header
  http::async_read_some(stream_, buffer_, *parser_,
                        [self = shared_from_this()](beast::error_code ec, size_t) {
                          if (ec || self->parser_->is_done()) return self->on_read(ec);
                          if (self->body_too_slow()) return self->drop_slow_body();
                          self->read_body_some();
                        });
}

bool Session::body_too_slow() const {
  uint64_t min_rate = shared_->options.body_min_bytes_per_s;
  if (min_rate == 0 || body_expected_ == 0) return false;
  auto elapsed = std::chrono::steady_clock::now() - body_started_;
  double seconds = std::chrono::duration<double>(elapsed).count() - kBodyGraceS;
  if (seconds <= 0) return false;
  uint64_t left = parser_->content_length_remaining().value_or(0);
  uint64_t got = body_expected_ - std::min(body_expected_, left);
  return static_cast<double>(got) < static_cast<double>(min_rate) * seconds;
}

// The client sends its body too slowly: its permit goes back and the connection closes.
void Session::drop_slow_body() {
  ++shared_->slow_bodies_dropped;
  reading_ = false;
  shared_->admission.release(std::exchange(reading_permit_, AdmitPermit{}));
  peer_gone();
}

void Session::on_read(beast::error_code ec) {
  reading_ = false;
  AdmitPermit permit = std::exchange(reading_permit_, AdmitPermit{});
  if (ec == http::error::body_limit) {
    refuse(plain_answer(413, "Payload Too Large"), false, permit);
  } else if (ec == http::error::header_limit) {
    refuse(plain_answer(431, "Request Header Fields Too Large"), false, permit);
  } else if (ec && is_parse_error(ec)) {
    refuse(plain_answer(400, "Bad Request"), false, permit);
  } else if (ec) {
    shared_->admission.release(permit);
    peer_gone();
    return;
  } else {
    pending_.push_back(
        Pending{parser_->release(), std::nullopt, false, permit, std::move(header_subject_)});
    pending_bytes_ += pending_.back().request.body().size();
  }
  if (!busy_) answer_front();
  read_next();
}

bool Session::is_parse_error(beast::error_code ec) {
  return ec.category() == beast::error_code(http::error::bad_target).category() &&
         ec != http::error::end_of_stream && ec != http::error::partial_message;
}

// The request cannot be read on: answer it in turn, then close the connection.
void Session::refuse(HttpAnswer answer, bool json, AdmitPermit permit) {
  read_closed_ = true;
  Pending p;
  p.request.version(11);
  p.request.keep_alive(false);
  p.refusal = std::move(answer);
  p.refusal_json = json;
  p.permit = permit;
  pending_.push_back(std::move(p));
}

void Session::peer_gone() {
  read_closed_ = true;
  peer_gone_ = true;
  cancel_held();
  if (!busy_) close();
}

void Session::cancel_held() {
  if (!held_) return;
  if (shared_->router.drop(*held_)) shared_->driver.cancel(*held_);
  held_.reset();
}

void Session::answer_front() {
  if (peer_gone_) return close();
  if (pending_.empty()) {
    if (read_closed_) close();
    return;
  }
  busy_ = true;
  Pending& front = pending_.front();
  if (front.refusal) {
    return write_answer(*front.refusal, front.refusal_json ? "application/json" : "text/plain");
  }
  const auto& req = front.request;
  EdgeIds ids;
  request_started_ = std::chrono::steady_clock::now();
  shared_->placement.begin(steady_us(*request_started_));
  request_kind_ = real::RequestKind::other;
  request_waits_ = false;
  auto method = req.method_string();
  auto target = req.target();
  // The token's sub, stamped on pushed messages as producerSub: checked at the header.
  std::string subject = front.subject.value_or("");
  const Authenticator* auth = shared_->options.settings.auth.get();
  if (auth && !front.subject) {
    auto header = req[http::field::authorization];
    auto denied =
        auth->check(std::string_view(method.data(), method.size()),
                    std::string_view(target.data(), target.size()),
                    std::string_view(header.data(), header.size()), ids.now_ms() / 1000, &subject);
    if (denied) {
      release_body(front);
      return write_answer(*denied, "application/json");
    }
  }
  std::string_view method_text(method.data(), method.size());
  std::string_view target_text(target.data(), target.size());
  Routed routed = route(method_text, target_text, req.body(), shared_->options.settings, ids);
  Parsed& parsed = routed.parsed;
  // A row that always grows storage is refused on a full disk whatever its body says; one
  // that grows it by command, when the parsed command does.
  Growth grows = routed.route ? routed.route->grows : Growth::none;
  bool refused = grows == Growth::always || (grows == Growth::by_command && parsed.command &&
                                             grows_storage(parsed.command->command));
  if (refused && shared_->disk.full()) {
    edge_counters().count(AdmitOutcome::storage_full);
    release_body(front);
    return write_answer(storage_full(), "application/json");
  }
  if (parsed.command) {
    request_kind_ = kind_of(parsed.command->command);
    const auto* pop = std::get_if<PopCmd>(&parsed.command->command);
    request_waits_ = pop != nullptr && pop->wait;
    if (auto* push = std::get_if<PushCmd>(&parsed.command->command); push && !subject.empty())
      for (PushItem& item : push->items) item.producer_sub = subject;
    adopt_forwarded_request_id(req, &*parsed.command);
    // A request that already went through one node is answered here, never sent on again.
    parsed.command->forwarded = !req[kForwardedHeader].empty();
    hold_for_forwarding(req, *parsed.command);
    hold_for_fetch_wait(*parsed.command);
  }
  release_body(front);
  if (!parsed.command) return write_answer(std::move(parsed.answer), "application/json");
  ReplyHandle handle = shared_->router.add(weak_from_this());
  held_ = handle;
  held_render_ = parsed.render;
  held_view_ = parsed.view;
  int64_t deadline_ms = parsed.command->deadline_ms;
  if (!shared_->driver.submit(handle, std::move(*parsed.command))) {
    shared_->router.drop(handle);
    held_.reset();
    edge_counters().count(AdmitOutcome::queue_full);
    HttpAnswer busy = error_answer(429, "overloaded", "the node has too many queued commands");
    busy.retry_after_s = kOverloadedRetryAfterS;
    return write_answer(std::move(busy), "application/json");
  }
  arm_deadline(handle, deadline_ms - ids.now_ms() + kDeadlineGraceMs);
}

HttpAnswer Session::storage_full() {
  return error_answer(507, "storage_full", "the disk is at or above QUEEN_RAFT_DISK_HIGH_PCT");
}

void Session::arm_deadline(ReplyHandle handle, int64_t wait_ms) {
  deadline_timer_.expires_after(milliseconds(std::max<int64_t>(0, wait_ms)));
  deadline_timer_.async_wait([self = shared_from_this(), handle](beast::error_code ec) {
    if (!ec) self->on_deadline(handle);
  });
}

// The node has not answered in time: answer for it, and let it drop the request.
void Session::on_deadline(ReplyHandle handle) {
  if (held_ != handle) return;
  cancel_held();
  forwarding_.reset();
  forward_timer_.cancel();
  HttpAnswer answer = error_answer(503, "timeout", "the request deadline elapsed");
  answer.retry_after_s = kTimeoutRetryAfterS;
  write_answer(std::move(answer), "application/json");
}

// The body is parsed: its bytes no longer count against the read-ahead budget.
void Session::release_body(Pending& p) {
  pending_bytes_ -= p.request.body().size();
  std::string().swap(p.request.body());
}

real::RequestKind Session::kind_of(const Command& c) {
  if (std::holds_alternative<PushCmd>(c)) return real::RequestKind::push;
  if (std::holds_alternative<PopCmd>(c)) return real::RequestKind::pop;
  if (std::holds_alternative<AckCmd>(c)) return real::RequestKind::ack;
  if (std::holds_alternative<TxnCmd>(c)) return real::RequestKind::transaction;
  return real::RequestKind::other;
}

// The time from dispatch to this answer, by kind (GET /metrics/prometheus); a command that
// took longer than QUEEN_RAFT_SLOW_COMMAND_MS and did not wait on purpose (a long poll, a
// fetch for minBytes) counts as slow.
void Session::record_latency() {
  if (!request_started_) return;
  int64_t end_us = steady_us(std::chrono::steady_clock::now());
  int64_t us = end_us - steady_us(*request_started_);
  real::process_latencies().requests[static_cast<size_t>(request_kind_)].record_us(us);
  shared_->placement.end(steady_us(*request_started_), end_us);
  bool waits = request_waits_ || fetch_wait_.has_value();
  if (!waits && us > shared_->options.slow_command_ms * 1000)
    edge_counters().slow_commands.fetch_add(1, std::memory_order_relaxed);
  request_started_.reset();
  request_waits_ = false;
}

// Takes the answer: its body moves into the response unless the caller keeps a copy.
void Session::write_answer(HttpAnswer answer, const char* content_type) {
  record_latency();
  const auto& req = pending_.front().request;
  auto res = std::make_shared<http::response<http::string_body>>(
      static_cast<http::status>(answer.status), req.version());
  add_common_headers(*res);
  if (!answer.content_type.empty()) {  // an answer that is not JSON (e.g. Prometheus text)
    res->set(http::field::content_type, answer.content_type);
    res->set(http::field::cache_control, "no-cache");
  } else if (!answer.body.empty()) {
    res->set(http::field::content_type, content_type);
  }
  if (!answer.etag.empty()) res->set(http::field::etag, answer.etag);
  if (answer.retry_after_s > 0) {
    res->set(http::field::retry_after, std::to_string(answer.retry_after_s));
  }
  res->keep_alive(req.keep_alive() && !pending_.front().refusal);
  if (real::log_enabled(LogLevel::debug)) {
    real::log_line(LogLevel::debug, "http",
                   std::string(req.method_string()) + " " + std::string(req.target()) + " -> " +
                       std::to_string(answer.status));
  }
  res->body() = std::move(answer.body);
  res->prepare_payload();
  stream_.expires_after(milliseconds(shared_->options.body_timeout_ms));
  http::async_write(stream_, *res, [self = shared_from_this(), res](beast::error_code ec, size_t) {
    self->on_written(ec, res->keep_alive());
  });
}

void Session::on_written(beast::error_code ec, bool keep_alive) {
  bool refused = pending_.front().refusal.has_value();
  pending_bytes_ -= pending_.front().request.body().size();
  shared_->admission.release(pending_.front().permit);
  pending_.pop_front();
  busy_ = false;
  if (ec) return close();
  if (refused) return drain_and_close();
  if (!keep_alive) return close();
  answer_front();
  read_next();
  move_when_quiet();
}

// After a refusal the client may still be sending its body: read and discard it for a
// moment so that it sees the answer rather than a reset.
void Session::drain_and_close() {
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

void Session::close() {
  if (closed_) return;
  closed_ = true;
  cancel_held();
  beast::error_code ignored;
  stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
  stream_.socket().close(ignored);
}

}  // namespace queen::server
