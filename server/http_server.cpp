#include "server/http_server.h"

#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>

#include <charconv>
#include <chrono>
#include <deque>
#include <optional>
#include <random>

#include "io/real/body_room.h"
#include "io/real/latency.h"
#include "io/real/log.h"
#include "io/real/real_env.h"
#include "server/api/routes.h"
#include "server/auth.h"
#include "server/command_forwarder.h"
#include "server/forward_counters.h"

namespace queen::server {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

struct HttpServer::Shared {
  Shared(HttpServerOptions o, real::NodeDriver& d, ReplyRouter& r)
      : options(std::move(o)),
        driver(d),
        router(r),
        admission(options.admit_bytes_max),
        disk(options.disk) {}
  HttpServerOptions options;
  real::NodeDriver& driver;
  ReplyRouter& router;
  Admission admission;
  DiskGate disk;
  std::atomic<size_t> connections{0};
  std::atomic<uint64_t> slow_bodies_dropped{0};  // below QUEEN_HTTP_BODY_MIN_BYTES_PER_S
  std::shared_ptr<CommandForwarder> forwarder;  // a cluster with client offload
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
constexpr int kAdmitRetryAfterMinS = 1;
constexpr int kAdmitRetryAfterMaxS = 5;
constexpr int kTimeoutRetryAfterS = 1;
constexpr auto kAcceptRetryDelay = std::chrono::milliseconds(100);
constexpr auto kDrainAfterRefusal = std::chrono::seconds(2);
// Before a body the read buffer gets room for it (io/real/body_room.h); between requests it
// keeps at most this.
constexpr size_t kIdleReadBufferBytesMax = 4 * 1024;
// Sends to leaders and retries through this node, together, for one forwarded request: the
// deadline ends the retries first (30 s of 100 ms pauses), this only bounds a ping-pong.
constexpr int kForwardAttemptsMax = 300;
constexpr int64_t kForwardRetryDelayMs = 100;  // before asking this node again
// A forwarded command's deadline at the leader ends this long before the follower stops
// waiting for its reply.
constexpr int64_t kForwardReplyMarginMs = 100;
// A fetch that waits for minBytes asks the node again this often.
constexpr int64_t kFetchPollMs = 20;
// A body may start slowly for this long before QUEEN_HTTP_BODY_MIN_BYTES_PER_S applies.
constexpr double kBodyGraceS = 1.0;

// A request read from the connection, or an answer decided while reading it.
struct Pending {
  http::request<http::string_body> request;
  std::optional<HttpAnswer> refusal;  // 413 / 400 / 429 before the body; the connection closes
  bool refusal_json = false;
  AdmitPermit permit;  // admission bytes held until the answer is written
  std::optional<std::string> subject;  // the token's sub, when JWT was checked at the header
};

using std::chrono::milliseconds;

// `hold_ms` +-25%, so that waiters refused together do not come back together.
int64_t jittered(int64_t hold_ms, IdSource& ids) {
  int64_t quarter = hold_ms / 4;
  if (quarter == 0) return hold_ms;
  return hold_ms - quarter + static_cast<int64_t>(ids.random_u64() % (2 * quarter + 1));
}

HttpAnswer plain_answer(unsigned status, const char* text) {
  HttpAnswer answer;
  answer.status = status;
  answer.body = text;
  return answer;
}

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
      : stream_(std::move(socket)),
        shared_(std::move(shared)),
        client_(client_of(stream_.socket())),
        idle_timer_(stream_.get_executor()),
        hold_timer_(stream_.get_executor()),
        deadline_timer_(stream_.get_executor()),
        forward_timer_(stream_.get_executor()),
        follow_timer_(stream_.get_executor()) {}

  ~Session() override {
    cancel_held();
    shared_->admission.release(reading_permit_);
    for (const Pending& p : pending_) shared_->admission.release(p.permit);
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
                 self->deadline_timer_.cancel();
                 if (self->try_forward(reply)) return;
                 if (self->fetch_again(reply)) return;
                 self->forwarding_.reset();
                 self->write_answer(render_reply(reply, self->held_render_), "application/json");
               });
  }

 private:
  // ---- reads by offset that wait (maxWaitMs, minBytes) ----

  // A fetch whose records fall short of minBytes is asked again every kFetchPollMs until they
  // do or maxWaitMs passes; then the last answer is given.
  struct FetchWait {
    CommandEnvelope envelope;
    uint64_t min_bytes = 0;
    std::chrono::steady_clock::time_point until;
  };

  void hold_for_fetch_wait(const CommandEnvelope& envelope) {
    fetch_wait_.reset();
    const auto* fetch = std::get_if<FetchCmd>(&envelope.command);
    if (!fetch || fetch->max_wait_ms <= 0 || fetch->min_bytes == 0) return;
    fetch_wait_ = FetchWait{envelope, fetch->min_bytes,
                            std::chrono::steady_clock::now() + milliseconds(fetch->max_wait_ms)};
  }

  static uint64_t fetched_bytes(const FetchReply& r) {
    uint64_t bytes = 0;
    for (const auto& e : r.entries)
      for (const auto& m : e.records) bytes += m.payload.size();
    return bytes;
  }

  bool fetch_again(const Reply& reply) {
    const auto* r = std::get_if<FetchReply>(&reply.body);
    auto next = std::chrono::steady_clock::now() + milliseconds(kFetchPollMs);
    bool again =
        fetch_wait_ && r && fetched_bytes(*r) < fetch_wait_->min_bytes && next < fetch_wait_->until;
    if (!again) {
      fetch_wait_.reset();
      return false;
    }
    forward_timer_.expires_at(next);
    forward_timer_.async_wait([self = shared_from_this()](beast::error_code ec) {
      if (ec || self->closed_ || !self->fetch_wait_) return;
      ReplyHandle handle = self->shared_->router.add(self->weak_from_this());
      self->held_ = handle;
      if (!self->shared_->driver.submit(handle, CommandEnvelope(self->fetch_wait_->envelope))) {
        self->shared_->router.drop(handle);
        self->held_.reset();
        self->fetch_wait_.reset();
        return self->write_answer(error_answer(429, "overloaded", "the node is busy"),
                                  "application/json");
      }
      int64_t deadline_ms = self->fetch_wait_->envelope.deadline_ms;
      self->arm_deadline(handle, deadline_ms - EdgeIds().now_ms() + kDeadlineGraceMs);
    });
    return true;
  }

  // ---- forwarding (a cluster's follower) ----

  // The held request while this follower's edge serves it through the leader. It keeps its
  // request id: every leader it reaches, and this node if it comes to lead, gets the same id,
  // so a retry after a leader change is answered from the first outcome, never applied twice.
  struct Forwarding {
    std::shared_ptr<ForwardRequest> request;  // as received, with the forwarding headers
    CommandEnvelope envelope;                 // as submitted to this node
    HttpAnswer last;                          // the answer to give when the retries run out
    uint64_t attempt = 0;                     // the forward id of the command at a leader
    std::chrono::steady_clock::time_point until;
    int attempts_left = kForwardAttemptsMax;
  };

  static bool retryable(const ErrorReply& e) { return api::is_retry(e.code); }

  // The node said another node leads, or none does yet: send the request to the leader, or
  // ask the node again shortly. False: answer the reply as it is.
  bool try_forward(const Reply& reply) {
    const auto* e = std::get_if<ErrorReply>(&reply.body);
    if (!forwarding_ || !e || !retryable(*e)) return false;
    forwarding_->last = render_reply(reply, held_render_);
    uint64_t self_id = shared_->options.forward->self_id;
    if (e->leader != 0 && e->leader != self_id) return forward_to(e->leader);
    return resubmit_later();
  }

  // A retry through this node after a pause: it knows the leader by then, or leads itself.
  bool resubmit_later() {
    auto& f = *forwarding_;
    auto resume_at = std::chrono::steady_clock::now() + milliseconds(kForwardRetryDelayMs);
    if (f.attempts_left-- <= 0 || resume_at >= f.until) return false;
    forward_timer_.expires_at(resume_at);
    forward_timer_.async_wait([self = shared_from_this()](beast::error_code ec) {
      if (!ec && !self->closed_) self->resubmit();
    });
    return true;
  }

  void resubmit() {
    ReplyHandle handle = shared_->router.add(weak_from_this());
    held_ = handle;
    if (!shared_->driver.submit(handle, CommandEnvelope(forwarding_->envelope))) {
      shared_->router.drop(handle);
      held_.reset();
      return give_up();
    }
    arm_deadline(handle, forwarding_->envelope.deadline_ms - EdgeIds().now_ms() + kDeadlineGraceMs);
  }

  void give_up() {
    HttpAnswer last = std::move(forwarding_->last);
    forwarding_.reset();
    write_answer(std::move(last), "application/json");
  }

  void on_forwarded(std::optional<ForwardResponse> res, uint64_t leader) {
    if (closed_ || !forwarding_) return;
    if (res) {
      auto body = nlohmann::json::parse(res->body(), nullptr, false);
      bool again = res->result_int() == 503 && body.is_object() && body.contains("code") &&
                   (body["code"] == "retry" || body["code"] == "no_leader");
      if (!again) return answer_forwarded(*res);
      forwarding_->last = HttpAnswer(503, res->body());
      forwarding_->last.retry_after_s = 1;
      uint64_t next = body.contains("leader") && body["leader"].is_number_unsigned()
                          ? body["leader"].get<uint64_t>()
                          : 0;
      if (next != 0 && next != leader && forward_to(next)) return;
    }
    // The leader is gone or lost its leadership: ask this node again under the same id.
    if (!resubmit_later()) give_up();
  }

  void answer_forwarded(ForwardResponse& res) {
    forwarding_.reset();
    HttpAnswer a(res.result_int(), std::move(res.body()));
    auto retry = res[http::field::retry_after];
    if (!retry.empty()) a.retry_after_s = std::atoi(std::string(retry).c_str());
    a.etag = std::string(res[http::field::etag]);
    std::string type(res[http::field::content_type]);
    write_answer(std::move(a), type.empty() ? "application/json" : type.c_str());
  }

  // One attempt at `leader`; false when it cannot be made (unknown node, no time left).
  bool forward_to(uint64_t leader) {
    const auto& fwd = *shared_->options.forward;
    auto& f = *forwarding_;
    auto to = fwd.nodes.find(leader);
    if (to == fwd.nodes.end() || leader == fwd.self_id || f.attempts_left-- <= 0) return false;
    int64_t left_ms =
        std::chrono::duration_cast<milliseconds>(f.until - std::chrono::steady_clock::now())
            .count();
    if (shared_->forwarder) return forward_command_to(leader, left_ms);
    if (left_ms <= 0) return false;
    forward_request(stream_.get_executor(), to->second, *f.request, left_ms,
                    [self = shared_from_this(), leader](std::optional<ForwardResponse> res) {
                      self->on_forwarded(std::move(res), leader);
                    });
    return true;
  }

  // Client offload: only the prepared command goes to the leader. Its deadline there ends
  // kForwardReplyMarginMs before this node stops waiting, so its answer has time to come back.
  bool forward_command_to(uint64_t leader, int64_t left_ms) {
    auto& f = *forwarding_;
    if (left_ms <= kForwardReplyMarginMs) return false;
    std::weak_ptr<Session> weak = weak_from_this();
    auto done = [weak, leader, executor = stream_.get_executor()](std::optional<Reply> reply) {
      asio::post(executor, [weak, leader, reply = std::move(reply)]() mutable {
        if (auto self = weak.lock()) self->on_forwarded_reply(std::move(reply), leader);
      });
    };
    f.attempt = shared_->forwarder->forward(leader, f.envelope, left_ms - kForwardReplyMarginMs,
                                            std::move(done));
    forward_timer_.expires_after(milliseconds(left_ms));
    forward_timer_.async_wait([self = shared_from_this(), attempt = f.attempt](auto ec) {
      if (ec || !self->forwarding_ || self->forwarding_->attempt != attempt) return;
      self->shared_->forwarder->abandon(attempt);
      self->forwarding_->attempt = 0;
      self->give_up();
    });
    follow_leader(f.attempt, leader);
    return true;
  }

  // While the command waits at `leader`: once this node hears that another node leads (the
  // one it forwarded to was paused, partitioned or deposed), the command goes there at once
  // under the same request id, instead of waiting for the old leader's stream to time out. A
  // command the old leader planned but never committed is then applied once, by the new one.
  void follow_leader(uint64_t attempt, uint64_t leader) {
    follow_timer_.expires_after(milliseconds(shared_->options.forward->follow_leader_ms));
    follow_timer_.async_wait([self = shared_from_this(), attempt, leader](auto ec) {
      auto& f = self->forwarding_;
      if (ec || self->closed_ || !f || f->attempt != attempt) return;
      uint64_t now = self->shared_->driver.known_leader();
      if (now == 0 || now == leader) return self->follow_leader(attempt, leader);
      self->shared_->forwarder->abandon(attempt);
      f->attempt = 0;
      self->forward_timer_.cancel();
      ++forward_counters().followed;
      bool sent = now != self->shared_->options.forward->self_id && self->forward_to(now);
      if (!sent && !self->resubmit_later()) self->give_up();
    });
  }

  // The leader's reply to the prepared command, or nullopt when it went away.
  void on_forwarded_reply(std::optional<Reply> reply, uint64_t leader) {
    if (closed_ || !forwarding_ || forwarding_->attempt == 0) return;
    forwarding_->attempt = 0;
    forward_timer_.cancel();
    follow_timer_.cancel();
    if (reply) {
      const auto* e = std::get_if<ErrorReply>(&reply->body);
      if (!e || !retryable(*e)) {
        forwarding_.reset();
        return write_answer(render_reply(*reply, held_render_), "application/json");
      }
      forwarding_->last = render_reply(*reply, held_render_);
      if (e->leader != 0 && e->leader != leader && forward_to(e->leader)) return;
    }
    // The leader is gone or lost its leadership: ask this node again under the same id.
    if (!resubmit_later()) give_up();
  }

  // Starts forwarding state for a request this follower's edge serves (not one forwarded to
  // it: that is answered where it lands).
  void hold_for_forwarding(const http::request<http::string_body>& req,
                           const CommandEnvelope& envelope) {
    forwarding_.reset();
    const auto& fwd = shared_->options.forward;
    if (!fwd || !req[kForwardedHeader].empty()) return;
    auto f = std::make_shared<Forwarding>();
    if (!shared_->forwarder) {  // the whole request goes to the leader
      f->request = std::make_shared<ForwardRequest>(req);
      f->request->set(kForwardedHeader, std::to_string(fwd->self_id));
      f->request->set(kRequestIdHeader, uuid_to_string(envelope.request_id));
    }
    f->envelope = envelope;
    int64_t left_ms = std::min<int64_t>(fwd->timeout_ms, envelope.deadline_ms - EdgeIds().now_ms());
    f->until = std::chrono::steady_clock::now() + milliseconds(std::max<int64_t>(0, left_ms));
    forwarding_ = std::move(f);
  }

  // A request forwarded by a peer keeps the request id the peer gave it.
  void adopt_forwarded_request_id(const http::request<http::string_body>& req,
                                  CommandEnvelope* envelope) const {
    if (forwarding_peer(req[kForwardedHeader]) == kLocalClients) return;
    Uuid id;
    auto header = req[kRequestIdHeader];
    if (uuid_from_string(std::string(header), &id) && !id.is_nil())
      envelope->request_id = RequestId{id};
  }

  // The configured peer named by an x-queen-forwarded value, or kLocalClients.
  AdmitSource forwarding_peer(boost::beast::string_view header) const {
    const auto& fwd = shared_->options.forward;
    if (!fwd || header.empty()) return kLocalClients;
    uint64_t id = 0;
    auto [end, ec] = std::from_chars(header.data(), header.data() + header.size(), id);
    bool peer = ec == std::errc() && end == header.data() + header.size() && id != fwd->self_id &&
                fwd->nodes.count(id) > 0;
    return peer ? id : kLocalClients;
  }

  // ---- reading ----

  void read_next() {
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
  void wait_for_request() {
    if (buffer_.capacity() > kIdleReadBufferBytesMax) buffer_.shrink_to_fit();
    waiting_idle_ = true;
    arm_idle_timer();
    stream_.socket().async_wait(tcp::socket::wait_read,
                                [self = shared_from_this()](beast::error_code ec) {
                                  self->waiting_idle_ = false;
                                  self->idle_timer_.cancel();
                                  if (ec) return self->on_read(ec);
                                  self->read_header();
                                });
  }

  void arm_idle_timer() {
    idle_timer_.expires_after(milliseconds(shared_->options.idle_timeout_ms));
    idle_timer_.async_wait([self = shared_from_this()](beast::error_code ec) {
      if (ec || !self->waiting_idle_) return;
      // A request is still at the node or being answered: the connection is not idle.
      if (self->held_ || self->busy_ || !self->pending_.empty()) return self->arm_idle_timer();
      self->close();
    });
  }

  void read_header() {
    stream_.expires_after(milliseconds(shared_->options.header_timeout_ms));
    http::async_read_header(
        stream_, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code ec, size_t) { self->on_header(ec); });
  }

  // The admission source of a client connecting from the socket's peer address.
  static AdmitSource client_of(const tcp::socket& socket) {
    beast::error_code ec;
    auto peer = socket.remote_endpoint(ec);
    return ec ? kLocalClients : client_source(peer.address().to_string());
  }

  // With JWT on, the token is checked on the header: a request without a valid one is
  // answered before its body is read, and takes no admission permit.
  bool refused_at_header() {
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
  uint64_t body_limit_of_row() const {
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
  void on_header(beast::error_code ec) {
    if (ec) return on_read(ec);
    if (refused_at_header()) return;
    parser_->body_limit(body_limit_of_row());
    Admission& admission = shared_->admission;
    uint64_t bytes =
        parser_->content_length().value_or(parser_->chunked() ? kChunkedPermitBytes : 0);
    if (!admission.enabled() || bytes == 0) return after_admitted();
    AdmitPermit permit = admission.permit_for(bytes, admit_source());
    auto ticket = admission.acquire(permit, [self = shared_from_this(), permit] {
      asio::post(self->stream_.get_executor(), [self, permit] { self->on_admitted(permit); });
    });
    if (!ticket) {
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
  AdmitSource admit_source() const {
    AdmitSource peer = forwarding_peer(parser_->get()[kForwardedHeader]);
    return peer != kLocalClients ? peer : client_;
  }

  void on_admitted(AdmitPermit permit) {
    admit_ticket_.reset();
    hold_timer_.cancel();
    reading_permit_ = permit;
    after_admitted();
  }

  // The budget stayed full for the whole hold: 429, and the unread body closes the connection.
  void on_hold_elapsed() {
    if (!admit_ticket_ || !shared_->admission.withdraw(*admit_ticket_)) return;  // granted
    admit_ticket_.reset();
    reading_ = false;
    EdgeIds ids;
    HttpAnswer answer = error_answer(429, "overloaded", "the admission budget stayed full");
    answer.retry_after_s =
        kAdmitRetryAfterMinS +
        static_cast<int>(ids.random_u64() % (kAdmitRetryAfterMaxS - kAdmitRetryAfterMinS + 1));
    refuse(answer, /*json=*/true);
    if (!busy_) answer_front();
  }

  void after_admitted() {
    const auto& req = parser_->get();
    bool expects_continue = beast::iequals(req[http::field::expect], "100-continue");
    if (expects_continue && !busy_ && pending_.empty()) {
      // Nothing else is being written: tell the client to send its body now.
      auto res = std::make_shared<http::response<http::empty_body>>(http::status::continue_,
                                                                    req.version());
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
  void read_body() {
    real::make_room_for_body(buffer_, parser_->content_length());
    body_started_ = std::chrono::steady_clock::now();
    body_expected_ = parser_->content_length().value_or(0);
    stream_.expires_after(milliseconds(shared_->options.body_timeout_ms));
    read_body_some();
  }

  void read_body_some() {
    if (parser_->is_done()) return on_read({});  // no body, or all of it came with the header
    http::async_read_some(stream_, buffer_, *parser_,
                          [self = shared_from_this()](beast::error_code ec, size_t) {
                            if (ec || self->parser_->is_done()) return self->on_read(ec);
                            if (self->body_too_slow()) return self->drop_slow_body();
                            self->read_body_some();
                          });
  }

  bool body_too_slow() const {
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
  void drop_slow_body() {
    ++shared_->slow_bodies_dropped;
    reading_ = false;
    shared_->admission.release(std::exchange(reading_permit_, AdmitPermit{}));
    peer_gone();
  }

  void on_read(beast::error_code ec) {
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

  static bool is_parse_error(beast::error_code ec) {
    return ec.category() == beast::error_code(http::error::bad_target).category() &&
           ec != http::error::end_of_stream && ec != http::error::partial_message;
  }

  // The request cannot be read on: answer it in turn, then close the connection.
  void refuse(HttpAnswer answer, bool json, AdmitPermit permit = {}) {
    read_closed_ = true;
    Pending p;
    p.request.version(11);
    p.request.keep_alive(false);
    p.refusal = std::move(answer);
    p.refusal_json = json;
    p.permit = permit;
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
    if (front.refusal) {
      return write_answer(*front.refusal, front.refusal_json ? "application/json" : "text/plain");
    }
    const auto& req = front.request;
    EdgeIds ids;
    request_started_ = std::chrono::steady_clock::now();
    request_kind_ = real::RequestKind::other;
    auto method = req.method_string();
    auto target = req.target();
    // The token's sub, stamped on pushed messages as producerSub: checked at the header.
    std::string subject = front.subject.value_or("");
    const Authenticator* auth = shared_->options.settings.auth.get();
    if (auth && !front.subject) {
      auto header = req[http::field::authorization];
      auto denied = auth->check(std::string_view(method.data(), method.size()),
                                std::string_view(target.data(), target.size()),
                                std::string_view(header.data(), header.size()), ids.now_ms() / 1000,
                                &subject);
      if (denied) {
        release_body(front);
        return write_answer(*denied, "application/json");
      }
    }
    std::string_view method_text(method.data(), method.size());
    std::string_view target_text(target.data(), target.size());
    const Route* row = find_route(method_text, target_text.substr(0, target_text.find('?')));
    if (row && row->grows == Growth::always && shared_->disk.full()) {
      release_body(front);
      return write_answer(storage_full(), "application/json");
    }
    Routed routed = route(method_text, target_text, req.body(), shared_->options.settings, ids);
    Parsed& parsed = routed.parsed;
    if (parsed.command && routed.route && routed.route->grows == Growth::by_command &&
        shared_->disk.full() && grows_storage(parsed.command->command)) {
      release_body(front);
      return write_answer(storage_full(), "application/json");
    }
    if (parsed.command) {
      request_kind_ = kind_of(parsed.command->command);
      if (auto* push = std::get_if<PushCmd>(&parsed.command->command); push && !subject.empty())
        for (PushItem& item : push->items) item.producer_sub = subject;
      adopt_forwarded_request_id(req, &*parsed.command);
      hold_for_forwarding(req, *parsed.command);
      hold_for_fetch_wait(*parsed.command);
    }
    release_body(front);
    if (!parsed.command) return write_answer(std::move(parsed.answer), "application/json");
    ReplyHandle handle = shared_->router.add(weak_from_this());
    held_ = handle;
    held_render_ = parsed.render;
    int64_t deadline_ms = parsed.command->deadline_ms;
    if (!shared_->driver.submit(handle, std::move(*parsed.command))) {
      shared_->router.drop(handle);
      held_.reset();
      HttpAnswer busy = error_answer(429, "overloaded", "the node has too many queued commands");
      busy.retry_after_s = kOverloadedRetryAfterS;
      return write_answer(std::move(busy), "application/json");
    }
    arm_deadline(handle, deadline_ms - ids.now_ms() + kDeadlineGraceMs);
  }

  static HttpAnswer storage_full() {
    return error_answer(507, "storage_full", "the disk is at or above QUEEN_RAFT_DISK_HIGH_PCT");
  }

  void arm_deadline(ReplyHandle handle, int64_t wait_ms) {
    deadline_timer_.expires_after(milliseconds(std::max<int64_t>(0, wait_ms)));
    deadline_timer_.async_wait([self = shared_from_this(), handle](beast::error_code ec) {
      if (!ec) self->on_deadline(handle);
    });
  }

  // The node has not answered in time: answer for it, and let it drop the request.
  void on_deadline(ReplyHandle handle) {
    if (held_ != handle) return;
    cancel_held();
    forwarding_.reset();
    forward_timer_.cancel();
    HttpAnswer answer = error_answer(503, "timeout", "the request deadline elapsed");
    answer.retry_after_s = kTimeoutRetryAfterS;
    write_answer(std::move(answer), "application/json");
  }

  // The body is parsed: its bytes no longer count against the read-ahead budget.
  void release_body(Pending& p) {
    pending_bytes_ -= p.request.body().size();
    std::string().swap(p.request.body());
  }

  static real::RequestKind kind_of(const Command& c) {
    if (std::holds_alternative<PushCmd>(c)) return real::RequestKind::push;
    if (std::holds_alternative<PopCmd>(c)) return real::RequestKind::pop;
    if (std::holds_alternative<AckCmd>(c)) return real::RequestKind::ack;
    if (std::holds_alternative<TxnCmd>(c)) return real::RequestKind::transaction;
    return real::RequestKind::other;
  }

  // The time from dispatch to this answer, by kind (GET /metrics/prometheus).
  void record_latency() {
    if (!request_started_) return;
    auto us = std::chrono::duration_cast<std::chrono::microseconds>(
                  std::chrono::steady_clock::now() - *request_started_)
                  .count();
    real::process_latencies().requests[static_cast<size_t>(request_kind_)].record_us(us);
    request_started_.reset();
  }

  // Takes the answer: its body moves into the response unless the caller keeps a copy.
  void write_answer(HttpAnswer answer, const char* content_type) {
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
    http::async_write(stream_, *res,
                      [self = shared_from_this(), res](beast::error_code ec, size_t) {
                        self->on_written(ec, res->keep_alive());
                      });
  }

  void on_written(beast::error_code ec, bool keep_alive) {
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
  AdmitSource client_;  // this connection's admission source (its client's address)
  asio::steady_timer idle_timer_;         // closes a connection idle for idle_timeout_ms
  std::optional<std::string> header_subject_;  // the JWT sub checked on the current header
  std::chrono::steady_clock::time_point body_started_;
  uint64_t body_expected_ = 0;            // Content-Length of the body being read
  asio::steady_timer hold_timer_;         // the admission hold of the request being read
  asio::steady_timer deadline_timer_;     // the deadline of the request held at the node
  std::optional<uint64_t> admit_ticket_;  // waiting for admission
  AdmitPermit reading_permit_;            // admission bytes of the request being read
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::deque<Pending> pending_;  // read, not yet answered; the front is being answered
  uint64_t pending_bytes_ = 0;   // body bytes held in pending_
  std::optional<ReplyHandle> held_;
  RenderAs held_render_ = RenderAs::standard;
  std::optional<std::chrono::steady_clock::time_point> request_started_;  // being answered
  real::RequestKind request_kind_ = real::RequestKind::other;
  std::shared_ptr<Forwarding> forwarding_;  // the held request, while a follower forwards it
  asio::steady_timer forward_timer_;        // the pause before a retry through this node
  asio::steady_timer follow_timer_;         // checks the forwarded-to node still leads
  std::optional<FetchWait> fetch_wait_;     // the held fetch, while it waits for records
  std::vector<char> drain_buffer_;
  bool reading_ = false;
  bool waiting_idle_ = false;
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
      disk_timer_(context_),
      shared_(std::make_shared<Shared>(options, driver, router)) {
  for (int i = 1; i < options_.threads; ++i)
    more_contexts_.push_back(std::make_unique<asio::io_context>(1));
  if (options_.forward && options_.forward->offload) {
    EdgeIds ids;
    shared_->forwarder = std::make_shared<CommandForwarder>(
        context_.get_executor(), driver, router, shared_->admission, shared_->disk,
        CommandForwarder::Options{.admit_hold_ms = options_.admit_fwd_hold_ms,
                                  .first_id = ids.random_u64() >> 1});
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
  acceptor_.async_accept(context_for(accepted_++),
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

void HttpServer::check_disk_later() {
  disk_timer_.expires_after(milliseconds(options_.disk_check_ms));
  disk_timer_.async_wait([this](beast::error_code ec) {
    if (ec) return;
    shared_->disk.check(shared_->admission.in_use());
    check_disk_later();
  });
}

void HttpServer::run() {
  shared_->disk.check(shared_->admission.in_use());
  check_disk_later();
  asio::signal_set signals(context_, SIGINT, SIGTERM);
  signals.async_wait([this](beast::error_code ec, int signal) {
    if (ec) return;
    real::log_line(LogLevel::info, "http", "signal " + std::to_string(signal) + ": stopping");
    context_.stop();
  });
  accept_next();
  std::vector<std::thread> threads;
  for (auto& c : more_contexts_)
    threads.emplace_back([ctx = c.get()] {
      auto work = asio::make_work_guard(*ctx);
      ctx->run();
    });
  context_.run();
  for (auto& c : more_contexts_) c->stop();
  for (auto& t : threads) t.join();
}

void HttpServer::stop() {
  context_.stop();
  for (auto& c : more_contexts_) c->stop();
}

asio::io_context& HttpServer::context_for(uint64_t n) {
  uint64_t i = n % (more_contexts_.size() + 1);
  return i == 0 ? context_ : *more_contexts_[i - 1];
}

}  // namespace queen::server
