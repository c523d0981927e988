#include "server/command_forwarder.h"

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include <algorithm>
#include <chrono>

#include "core/api/command_codec.h"
#include "io/real/real_env.h"
#include "server/edge_counters.h"

namespace queen::server {

namespace {

constexpr uint8_t kCommandMessage = 1;
constexpr uint8_t kReplyMessage = 2;
constexpr size_t kHeaderBytes = 9;  // kind, forward id

Bytes frame(uint8_t kind, uint64_t id, const Bytes& body) {
  Bytes out;
  out.reserve(kHeaderBytes + body.size());
  ByteWriter w(&out);
  w.u8(kind);
  w.u64(id);
  w.raw(body.data(), body.size());
  return out;
}

Reply error_reply(api::Errc code, const char* message) {
  ErrorReply e;
  e.code = code;
  e.message = message;
  e.retry_after_s = code == api::Errc::overloaded ? 1 : 0;
  return Reply{std::move(e)};
}

}  // namespace

// A forwarded command waiting for admission at the leader.
struct CommandForwarder::Admitting {
  explicit Admitting(boost::asio::any_io_executor executor) : hold(std::move(executor)) {}
  uint64_t from = 0;
  uint64_t id = 0;
  AdmitPermit permit;
  CommandEnvelope envelope;
  boost::asio::steady_timer hold;
};

CommandForwarder::CommandForwarder(boost::asio::any_io_executor executor, real::NodeDriver& driver,
                                   ReplyRouter& router, Admission& admission, const DiskGate& disk,
                                   Options options)
    : executor_(std::move(executor)),
      driver_(driver),
      router_(router),
      admission_(admission),
      disk_(disk),
      admit_hold_ms_(options.admit_hold_ms),
      next_id_(options.first_id) {}

real::ForwardHandler CommandForwarder::handler() {
  std::weak_ptr<CommandForwarder> weak = weak_from_this();
  return real::ForwardHandler{.deliver =
                                  [weak](uint64_t from, Bytes message) {
                                    if (auto self = weak.lock()) self->on_message(from, message);
                                  },
                              .lost =
                                  [weak](uint64_t peer) {
                                    if (auto self = weak.lock()) self->on_lost(peer);
                                  }};
}

// ---- follower ----

void CommandForwarder::forward(uint64_t leader, std::shared_ptr<const CommandEnvelope> envelope,
                               int64_t remaining_ms, Done done) {
  uint64_t id = 0;
  {
    std::lock_guard lock(mutex_);
    id = next_id_++;
    waiting_[id] = Waiting{leader, std::move(done)};
  }
  ++forward_counters().sent;
  boost::asio::post(executor_, [self = shared_from_this(), leader, id, remaining_ms,
                                envelope = std::move(envelope)] {
    Bytes encoded = encode_command(envelope->request_id, remaining_ms, envelope->command);
    self->driver_.send_forward(leader, id, frame(kCommandMessage, id, std::move(encoded)));
  });
}

void CommandForwarder::on_lost(uint64_t peer) {
  std::vector<Done> failed;
  {
    std::lock_guard lock(mutex_);
    for (auto it = waiting_.begin(); it != waiting_.end();) {
      if (it->second.leader != peer) {
        ++it;
        continue;
      }
      failed.push_back(std::move(it->second.done));
      it = waiting_.erase(it);
    }
  }
  forward_counters().lost += failed.size();
  for (Done& done : failed) done(std::nullopt);
}

void CommandForwarder::on_leader_reply(uint64_t id, const uint8_t* data, size_t size) {
  Done done;
  {
    std::lock_guard lock(mutex_);
    auto it = waiting_.find(id);
    if (it == waiting_.end()) return;  // abandoned, or meant for a previous run
    done = std::move(it->second.done);
    waiting_.erase(it);
  }
  auto reply = decode_reply(data, size);
  done(reply ? std::move(reply)
             : error_reply(api::Errc::internal, "undecodable reply from the leader"));
}

// ---- leader ----

void CommandForwarder::on_message(uint64_t from, const Bytes& message) {
  ByteReader r(message.data(), message.size());
  uint8_t kind = r.u8();
  uint64_t id = r.u64();
  if (!r.ok()) return;
  const uint8_t* body = message.data() + kHeaderBytes;
  size_t size = message.size() - kHeaderBytes;
  if (kind == kCommandMessage) return serve(from, id, body, size);
  if (kind == kReplyMessage) return on_leader_reply(id, body, size);
}

void CommandForwarder::serve(uint64_t from, uint64_t id, const uint8_t* data, size_t size) {
  ++forward_counters().served;
  auto command = decode_command(data, size);
  if (!command)
    return send_reply(from, id, error_reply(api::Errc::bad_request, "undecodable command"));
  if (disk_.full() && grows_storage(command->command)) {
    edge_counters().count(AdmitOutcome::storage_full);
    return send_reply(from, id,
                      error_reply(api::Errc::storage_full,
                                  "the leader's disk is at or above QUEEN_RAFT_DISK_HIGH_PCT"));
  }
  auto a = std::make_shared<Admitting>(executor_);
  a->from = from;
  a->id = id;
  a->permit = admission_.permit_for(size, from);
  a->envelope.request_id = command->request_id;
  a->envelope.deadline_ms = real::wall_clock_us() / 1000 + command->remaining_ms;
  a->envelope.command = std::move(command->command);
  admit(std::move(a));
}

// Takes the permit now, or waits for it within the hold: past it, 429 and nothing taken.
void CommandForwarder::admit(std::shared_ptr<Admitting> a) {
  auto self = shared_from_this();
  auto ticket = admission_.acquire(a->permit, [self, a] {
    boost::asio::post(self->executor_, [self, a] {
      a->hold.cancel();
      edge_counters().count(AdmitOutcome::waited);
      self->submit(*a);
    });
  });
  if (!ticket) {
    edge_counters().count(AdmitOutcome::admitted);
    return submit(*a);
  }
  int64_t left_ms = a->envelope.deadline_ms - real::wall_clock_us() / 1000;
  a->hold.expires_after(std::chrono::milliseconds(std::min(admit_hold_ms_, left_ms / 2)));
  a->hold.async_wait([self, a, ticket = *ticket](boost::system::error_code ec) {
    if (ec || !self->admission_.withdraw(ticket)) return;  // admitted meanwhile
    edge_counters().count(AdmitOutcome::overloaded);
    self->send_reply(
        a->from, a->id,
        error_reply(api::Errc::overloaded, "the leader's admission budget stayed full"));
  });
}

void CommandForwarder::submit(Admitting& a) {
  ReplyHandle handle = router_.add(weak_from_this());
  {
    std::lock_guard lock(mutex_);
    serving_[handle] = Serving{a.from, a.id, a.permit};
  }
  if (driver_.submit(handle, std::move(a.envelope))) return;
  router_.drop(handle);
  {
    std::lock_guard lock(mutex_);
    serving_.erase(handle);
  }
  admission_.release(a.permit);
  edge_counters().count(AdmitOutcome::queue_full);
  send_reply(a.from, a.id,
             error_reply(api::Errc::overloaded, "the leader's command queue is full"));
}

void CommandForwarder::on_reply(ReplyHandle handle, Reply reply) {
  Serving to;
  {
    std::lock_guard lock(mutex_);
    auto it = serving_.find(handle);
    if (it == serving_.end()) return;
    to = it->second;
    serving_.erase(it);
  }
  admission_.release(to.permit);
  boost::asio::post(executor_, [self = shared_from_this(), to, reply = std::move(reply)] {
    self->send_reply(to.from, to.id, reply);
  });
}

void CommandForwarder::send_reply(uint64_t to, uint64_t id, const Reply& reply) {
  driver_.send_forward(to, id, frame(kReplyMessage, id, encode_reply(reply)));
}

}  // namespace queen::server
