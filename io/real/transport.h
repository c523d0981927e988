// The Raft transport between the nodes of a cluster: HTTP/1.1 on the raft port
// (QUEEN_RAFT_LISTEN), plain or over mutual TLS (QUEEN_RAFT_TLS_*), one thread of its own.
//
// Sending: one long-lived connection per peer. Messages queue per peer and go out in batches,
// one POST /raft/messages in flight per peer, body = repeated (u32 length, message bytes),
// headers x-queen-raft-from (the sender's node id) and x-queen-raft-token. A batch that
// cannot be delivered is dropped (Raft tolerates lost messages and resends) and the connection
// is opened again after a back-off of reconnect_ms_min doubling to reconnect_ms_max.
//
// Receiving: the token is compared in constant time after the header and before the body is
// read, and so are the cluster id (x-queen-raft-cluster) and the sender
// (x-queen-raft-from, which must be a peer); a request that fails any is answered 401 and the
// connection closed. A connection that has not yet sent one accepted request is a stranger:
// its header must arrive within header_timeout_ms of the connection (or of its previous
// request), and at most unauthenticated_max strangers are held at once (past that a new
// connection is closed at accept). Once a request was accepted, the connection is a peer's,
// which may stay idle between requests. Every message of an accepted batch is handed to
// `deliver(from, bytes)` on the transport thread, in order.
//
// Forwarding: besides that Raft connection, forward_streams more per peer
// (QUEEN_RAFT_FWD_STREAMS) carry forwarded commands and their replies, POST /raft/forward,
// same framing and token; `send_forward` picks the stream by a key, so one command's messages
// keep their order. A forward stream that fails, or an idle one the peer closes, reports the
// peer `lost` at once: what was forwarded there will get no reply.
//
// Limits: queued_bytes_max per peer and stream (past it, new messages to that peer are dropped and
// counted), batch_bytes_max per request sent, body_bytes_max per request received.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/common/bytes.h"
#include "core/common/result.h"

namespace queen::real {

struct PeerAddress {
  uint64_t id = 0;
  std::string host;
  uint16_t port = 0;
};

struct TransportOptions {
  uint64_t self_id = 1;
  std::string listen_host = "0.0.0.0";
  uint16_t listen_port = 7400;
  std::vector<PeerAddress> peers;  // the other voters
  std::string token;               // QUEEN_RAFT_TOKEN ("" = none required)
  std::string cluster_id;          // sent by every node and required to match
  // QUEEN_RAFT_TLS_CERT, _KEY, _CA (all or none): peer connections are TLS, and each side must
  // present a certificate of the CA (mutual TLS).
  std::string tls_cert, tls_key, tls_ca;
  int64_t header_timeout_ms = 10000;  // QUEEN_HTTP_HEADER_TIMEOUT_MS, for strangers
  uint32_t unauthenticated_max = 64;
  uint64_t queued_bytes_max = 64ull << 20;
  uint64_t batch_bytes_max = 8ull << 20;
  uint64_t body_bytes_max = 256ull << 20;
  int64_t reconnect_ms_min = 50;
  int64_t reconnect_ms_max = 1000;
  int64_t io_timeout_ms = 5000;
  uint32_t forward_streams = 4;  // QUEEN_RAFT_FWD_STREAMS
};

struct TransportStats {
  std::atomic<uint64_t> sent{0};
  std::atomic<uint64_t> received{0};
  std::atomic<uint64_t> dropped{0};  // queue full or batch lost on a broken connection
  std::atomic<uint64_t> refused{0};  // requests with a wrong token, cluster id or sender
  std::atomic<uint64_t> strangers_dropped{0};  // connections closed: too many, or too slow
};

// True when a and b are equal, in time that depends only on their lengths.
bool tokens_equal(const std::string& a, const std::string& b);

using Deliver = std::function<void(uint64_t from, Bytes message)>;

// Where forwarded messages go, on the transport thread.
struct ForwardHandler {
  Deliver deliver;
  std::function<void(uint64_t peer)> lost;
};

class Transport {
 public:
  Transport(TransportOptions options, Deliver deliver);
  ~Transport();
  Transport(const Transport&) = delete;
  Transport& operator=(const Transport&) = delete;

  // Before start(): where forwarded messages are delivered.
  void set_forward_handler(ForwardHandler handler);
  // Binds the raft port and starts the transport thread; an error names the address.
  Status start();
  // From any thread: queues `message` for peer `to` (dropped when `to` is unknown).
  void send(uint64_t to, Bytes message);
  // From any thread: queues a forwarded message on the stream `key` picks.
  void send_forward(uint64_t to, uint64_t key, Bytes message);
  // From any thread: the peers are now these (the cluster's membership changed). A new one is
  // added, a moved one is reached at its new address from its next connection, and one no
  // longer listed is retired: nothing more is sent to it, and its requests are refused.
  void set_peers(std::vector<PeerAddress> peers);
  void stop();
  uint16_t bound_port() const;
  const TransportStats& stats() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace queen::real
