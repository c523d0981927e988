// A connection's held requests that go on after the node answers: fetches that wait for
// minBytes, and, with QUEEN_RAFT_CLIENT_OFFLOAD off, a follower's whole HTTP requests sent on
// to the leader (server/http_session.h). With it on, the node forwards the prepared command
// itself (core/node/node_forward.cpp) and this edge only waits for its answer.
#include "server/http_session.h"

namespace queen::server {

void Session::hold_for_fetch_wait(const CommandEnvelope& envelope) {
  fetch_wait_.reset();
  const auto* fetch = std::get_if<FetchCmd>(&envelope.command);
  if (!fetch || fetch->max_wait_ms <= 0 || fetch->min_bytes == 0) return;
  fetch_wait_ = FetchWait{envelope, fetch->min_bytes,
                          std::chrono::steady_clock::now() + milliseconds(fetch->max_wait_ms)};
}

uint64_t Session::fetched_bytes(const FetchReply& r) {
  uint64_t bytes = 0;
  for (const auto& e : r.entries)
    for (const auto& m : e.records) bytes += m.payload.size();
  return bytes;
}

bool Session::fetch_again(const Reply& reply) {
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

bool Session::retryable(const ErrorReply& e) {
  return api::is_retry(e.code);
}

// The node said another node leads, or none does yet: send the request to the leader, or
// ask the node again shortly. False: answer the reply as it is.
bool Session::try_forward(const Reply& reply) {
  const auto* e = std::get_if<ErrorReply>(&reply.body);
  if (!forwarding_ || !e || !retryable(*e)) return false;
  forwarding_->last = render_reply(reply, held_render_, held_view_);
  uint64_t self_id = shared_->options.forward->self_id;
  if (e->leader != 0 && e->leader != self_id) return forward_to(e->leader);
  return resubmit_later();
}

// A retry through this node after a pause: it knows the leader by then, or leads itself.
bool Session::resubmit_later() {
  auto& f = *forwarding_;
  auto resume_at = std::chrono::steady_clock::now() + milliseconds(kForwardRetryDelayMs);
  if (f.attempts_left-- <= 0 || resume_at >= f.until) return false;
  forward_timer_.expires_at(resume_at);
  forward_timer_.async_wait([self = shared_from_this()](beast::error_code ec) {
    if (!ec && !self->closed_) self->resubmit();
  });
  return true;
}

void Session::resubmit() {
  ReplyHandle handle = shared_->router.add(weak_from_this());
  held_ = handle;
  if (!shared_->driver.submit(handle, CommandEnvelope(forwarding_->envelope))) {
    shared_->router.drop(handle);
    held_.reset();
    return give_up();
  }
  arm_deadline(handle, forwarding_->envelope.deadline_ms - EdgeIds().now_ms() + kDeadlineGraceMs);
}

void Session::give_up() {
  HttpAnswer last = std::move(forwarding_->last);
  forwarding_.reset();
  write_answer(std::move(last), "application/json");
}

void Session::on_forwarded(std::optional<ForwardResponse> res, uint64_t leader) {
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

void Session::answer_forwarded(ForwardResponse& res) {
  forwarding_.reset();
  HttpAnswer a(res.result_int(), std::move(res.body()));
  auto retry = res[http::field::retry_after];
  if (!retry.empty()) a.retry_after_s = std::atoi(std::string(retry).c_str());
  a.etag = std::string(res[http::field::etag]);
  std::string type(res[http::field::content_type]);
  write_answer(std::move(a), type.empty() ? "application/json" : type.c_str());
}

// One attempt at `leader`; false when it cannot be made (unknown node, no time left).
bool Session::forward_to(uint64_t leader) {
  const auto& fwd = *shared_->options.forward;
  auto& f = *forwarding_;
  auto to = fwd.nodes->find(leader);
  if (!to || leader == fwd.self_id || f.attempts_left-- <= 0) return false;
  int64_t left_ms =
      std::chrono::duration_cast<milliseconds>(f.until - std::chrono::steady_clock::now()).count();
  if (left_ms <= 0) return false;
  forward_request(stream_.get_executor(), *to, *f.request, left_ms,
                  [self = shared_from_this(), leader](std::optional<ForwardResponse> res) {
                    self->on_forwarded(std::move(res), leader);
                  });
  return true;
}

// Starts forwarding state for a request this follower's edge serves (not one forwarded to
// it: that is answered where it lands).
void Session::hold_for_forwarding(const http::request<http::string_body>& req,
                                  const CommandEnvelope& envelope) {
  forwarding_.reset();
  const auto& fwd = shared_->options.forward;
  if (!fwd || shared_->forwarder || !req[kForwardedHeader].empty()) return;
  auto f = std::make_shared<Forwarding>();
  f->request = std::make_shared<ForwardRequest>(req);
  f->request->set(kForwardedHeader, std::to_string(fwd->self_id));
  f->request->set(kRequestIdHeader, uuid_to_string(envelope.request_id));
  f->envelope = envelope;
  int64_t left_ms = std::min<int64_t>(fwd->timeout_ms, envelope.deadline_ms - EdgeIds().now_ms());
  f->until = std::chrono::steady_clock::now() + milliseconds(std::max<int64_t>(0, left_ms));
  forwarding_ = std::move(f);
}

// A request forwarded by a peer keeps the request id the peer gave it.
void Session::adopt_forwarded_request_id(const http::request<http::string_body>& req,
                                         CommandEnvelope* envelope) const {
  if (forwarding_peer(req[kForwardedHeader]) == kLocalClients) return;
  Uuid id;
  auto header = req[kRequestIdHeader];
  if (uuid_from_string(std::string(header), &id) && !id.is_nil())
    envelope->request_id = RequestId{id};
}

// The member named by an x-queen-forwarded value, or kLocalClients.
AdmitSource Session::forwarding_peer(boost::beast::string_view header) const {
  const auto& fwd = shared_->options.forward;
  if (!fwd || header.empty()) return kLocalClients;
  uint64_t id = 0;
  auto [end, ec] = std::from_chars(header.data(), header.data() + header.size(), id);
  bool peer = ec == std::errc() && end == header.data() + header.size() && id != fwd->self_id &&
              fwd->nodes->find(id).has_value();
  return peer ? id : kLocalClients;
}

}  // namespace queen::server
