// The wire of forwarded commands between the nodes of a cluster (QUEEN_RAFT_CLIENT_OFFLOAD,
// on by default). A follower's node decides what to forward, to whom and when to retry
// (core/node/node_forward.cpp); this carries its prepared command (core/api/command_codec.h)
// to the leader over the QUEEN_RAFT_FWD_STREAMS streams of the raft port. The leader hands
// it to its node as if its own edge had prepared it, and sends the typed reply back.
//
// Contract:
// - forward() encodes off the caller's thread and calls `done` exactly once: with the
//   leader's reply, or with nullopt when the stream to the leader failed or the leader went
//   away. It is called on the transport thread and must only hand the result off.
// - The leader admits a forwarded command as its edge admits a request: a permit of its size
//   from the forwarding peer's fair share (server/admission.h), waited for at most
//   QUEEN_RAFT_ADMIT_FWD_HOLD_MS (and at most half the command's remaining time), else 429;
//   a write that grows storage is refused 507 while the leader's disk gate is full.
// - A command that cannot be decoded is answered 400; one the leader's node cannot take now
//   (its command queue is full) 429 with Retry-After.
// - Each message is (u8 kind, u64 forward id, codec bytes); forward ids start at a random
//   value, so a reply meant for a previous run of this node matches nothing.
#pragma once

#include <utility>  // before Asio (Boost 1.74)

#include <boost/asio/any_io_executor.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>

#include "core/api/replies.h"
#include "io/real/driver.h"
#include "server/admission.h"
#include "server/forward_counters.h"
#include "server/http_server.h"

namespace queen::server {

class CommandForwarder final : public ReplyTarget,
                               public std::enable_shared_from_this<CommandForwarder> {
 public:
  using Done = std::function<void(std::optional<Reply>)>;

  struct Options {
    int64_t admit_hold_ms = 2000;  // QUEEN_RAFT_ADMIT_FWD_HOLD_MS
    uint64_t first_id = 1;         // random, so ids differ across runs
  };

  // `executor` runs admission holds and the encoding of replies this node sends back.
  CommandForwarder(boost::asio::any_io_executor executor, real::NodeDriver& driver,
                   ReplyRouter& router, Admission& admission, const DiskGate& disk,
                   Options options);

  // Where the transport delivers forwarded messages (set on the driver before it starts).
  real::ForwardHandler handler();

  // Follower: sends `envelope` to `leader`, whose deadline will be `remaining_ms` from when it
  // receives it.
  void forward(uint64_t leader, std::shared_ptr<const CommandEnvelope> envelope,
               int64_t remaining_ms, Done done);

  // Leader: the reply to a forwarded command, on the node thread.
  void on_reply(ReplyHandle handle, Reply reply) override;

 private:
  struct Waiting {
    uint64_t leader = 0;
    Done done;
  };
  struct Serving {
    uint64_t from = 0;
    uint64_t id = 0;
    AdmitPermit permit;
  };
  struct Admitting;

  void on_message(uint64_t from, const Bytes& message);
  void on_lost(uint64_t peer);
  void serve(uint64_t from, uint64_t id, const uint8_t* data, size_t size);
  void admit(std::shared_ptr<Admitting> a);
  void submit(Admitting& a);
  void on_leader_reply(uint64_t id, const uint8_t* data, size_t size);
  void send_reply(uint64_t to, uint64_t id, const Reply& reply);

  boost::asio::any_io_executor executor_;
  real::NodeDriver& driver_;
  ReplyRouter& router_;
  Admission& admission_;
  const DiskGate& disk_;
  const int64_t admit_hold_ms_;
  std::mutex mutex_;
  uint64_t next_id_;
  std::map<uint64_t, Waiting> waiting_;     // follower: by forward id
  std::map<ReplyHandle, Serving> serving_;  // leader: by the node's reply handle
};

}  // namespace queen::server
