// The HTTP/1.1 edge (Boost.Beast): accepts connections, reads requests (keep-alive and
// pipelining: answers go out in request order), routes and parses them on the edge threads,
// hands prepared commands to the node and writes the node's replies back on the connection
// that owns them. Each edge thread runs its own io_context; accepted connections are dealt
// round-robin to them. A connection served on the node thread's io_context instead reads,
// parses and answers there: a request reaches the node and its answer goes out without a
// hand-off between threads. With no edge threads (threads 0) every connection is; with
// node_busy_max set, they are while few requests are in flight (server/edge_placement.h), and
// a connection moves between the node thread and an edge thread when the placement changes,
// at its next moment with nothing read, held or being answered. The acceptor, timers and
// signals stay on the thread that calls run().
//
// Contract:
// - Every answer carries the CORS headers; JSON answers are application/json.
// - A body over body_bytes_max is refused with a plain-text 413 before it is read, and the
//   connection is closed.
// - A connection holds at most one request at the node; further requests are read ahead
//   up to `pipelined_max` of them and `readahead_bytes_max` of bodies. At most
//   `connections_max` connections are served at once.
// - When a client goes away while its request is held at the node, Node::on_cancel is called
//   for its handle and any later reply for it is dropped.
// - Too many commands queued for the node thread: 429 overloaded with Retry-After.
// - Admission (server/admission.h): a request with a body takes permits sized by its
//   Content-Length after its header is read and before its body is; it gives them back once
//   its answer is written. A request that waits longer than admit_hold_ms (+-25%) is
//   answered 429 overloaded with Retry-After 1-5 s, and its connection closes (its body was
//   never read).
// - Timeouts: an idle connection (no request begun, nothing held) is closed after
//   idle_timeout_ms; a header must arrive within header_timeout_ms of its first byte and a
//   body within body_timeout_ms of its header, and after its first second at
//   body_min_bytes_per_s at least (a client that trickles bytes is dropped and its admission
//   permit given back); a write gets body_timeout_ms.
// - With JWT on, the token is checked on the header, before admission: a request without a
//   valid one is answered 401/403 without its body being read.
// - A request the node has not answered by its deadline (+ kDeadlineGraceMs) is answered 503
//   timeout with Retry-After, and the node is told (Node::on_cancel); the write may land.
// - In a cluster, a request the node refuses with "503 retry, the leader is N" is forwarded to
//   N: its prepared command over the raft port (server/command_forwarder.h), or with client
//   offload off the whole request to N's HTTP address (server/forwarder.h); N's answer is
//   the client's.
// - While the disk gate is full, pushes, KV writes, timer schedules and transactions are
//   answered 507 storage_full; everything else is served.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "io/real/driver.h"
#include "io/real/real_env.h"
#include "server/admission.h"
#include "server/api/api.h"
#include "server/edge_placement.h"
#include "server/forwarder.h"

namespace queen::server {

// A connection waiting for a reply from the node.
class ReplyTarget {
 public:
  virtual ~ReplyTarget() = default;
  // Called on the node thread; must only hand the reply off.
  virtual void on_reply(ReplyHandle handle, Reply reply) = 0;
};

// Maps reply handles to the connections that own them; the node's replies arrive here.
class ReplyRouter final : public real::ReplySink {
 public:
  ReplyHandle add(std::weak_ptr<ReplyTarget> target);
  // True when the handle was still waiting (its reply had not been delivered).
  bool drop(ReplyHandle handle);
  void deliver(ReplyHandle handle, Reply reply) override;

 private:
  std::mutex mutex_;
  std::unordered_map<ReplyHandle, std::weak_ptr<ReplyTarget>> waiting_;
  ReplyHandle next_ = 1;
};

struct HttpServerOptions {
  std::string bind_addr = "0.0.0.0";
  uint16_t port = 6632;
  uint64_t body_bytes_max = 64ull << 20;
  int threads = 2;  // QUEEN_HTTP_THREADS: edge threads; 0: connections on the node thread
  // QUEEN_HTTP_NODE_BUSY_MAX (with edge threads): the node thread serves the connections while
  // at most this many requests are in flight on average (server/edge_placement.h); 0: never.
  int node_busy_max = 0;
  size_t pipelined_max = 16;                // requests read ahead on one connection
  uint64_t readahead_bytes_max = 8u << 20;  // body bytes read ahead on one connection
  size_t connections_max = 10000;           // connections served at once
  uint32_t header_bytes_max = 64u << 10;
  int64_t header_timeout_ms = 10000;        // QUEEN_HTTP_HEADER_TIMEOUT_MS
  int64_t body_timeout_ms = 30000;          // QUEEN_HTTP_BODY_TIMEOUT_MS
  uint64_t body_min_bytes_per_s = 16384;    // QUEEN_HTTP_BODY_MIN_BYTES_PER_S (0: off)
  int64_t idle_timeout_ms = 120000;         // QUEEN_HTTP_IDLE_TIMEOUT_MS
  uint64_t admit_bytes_max = 128ull << 20;  // QUEEN_RAFT_ADMIT_MAX_MB (0: off)
  int64_t admit_hold_ms = 15000;            // QUEEN_RAFT_ADMIT_HOLD_MS
  int64_t admit_fwd_hold_ms = 2000;         // QUEEN_RAFT_ADMIT_FWD_HOLD_MS
  DiskGateOptions disk;
  int64_t disk_check_ms = 100;  // QUEEN_RAFT_DISK_CHECK_MS
  int64_t slow_command_ms = 50;  // QUEEN_RAFT_SLOW_COMMAND_MS
  int64_t status_sample_ms = 5000;  // QUEEN_STATUS_SAMPLE_MS (server/status_history.h)
  // An answer listing at least this many partitions (a whole list of a large queue) is
  // rendered on the render thread, so the edge thread's other connections are answered
  // meanwhile (QUEEN_HTTP_RENDER_APART_ROWS).
  size_t render_apart_rows = 10000;
  EdgeSettings settings;
  std::optional<ForwardOptions> forward;  // a cluster: followers forward to the leader
};

// A request is answered 503 timeout this long after its deadline when the node has not.
constexpr int64_t kDeadlineGraceMs = 1000;
// The permit a chunked request (no Content-Length) takes.
constexpr uint64_t kChunkedPermitBytes = 1u << 20;

class HttpServer {
 public:
  HttpServer(HttpServerOptions options, real::NodeDriver& driver, ReplyRouter& router);
  ~HttpServer();

  // In a cluster with client offload: where the driver's transport delivers forwarded
  // commands and replies (set it on the driver before the driver starts).
  std::optional<real::ForwardHandler> forward_handler();
  // Binds and listens; returns an error naming the address when it cannot.
  Status listen();
  uint16_t bound_port() const { return bound_port_; }
  // Serves on the edge threads until SIGINT or SIGTERM (or stop()).
  void run();
  void stop();

  struct Shared;  // what sessions need: options, driver, router, connection count

 private:
  void accept_next();
  void accept_later(boost::system::error_code ec);
  void check_disk_later();
  // Every status_sample_ms: asks the node for its metrics and keeps them in status_history().
  void sample_status();
  // Every kPlacementTickMs with an adaptive placement: where connections are to be served.
  void place_later();
  // After run()'s loop ends, with connections on the node thread: closes them there, so that
  // none hands the node a request while it hands over or checkpoints before the stop.
  void close_node_connections();

  HttpServerOptions options_;
  boost::asio::io_context context_{1};  // the acceptor, timers, signals; and connections
  std::vector<std::unique_ptr<boost::asio::io_context>> more_contexts_;  // threads - 1
  boost::asio::io_context render_context_{1};  // the render thread's (render_apart_rows)
  boost::asio::ip::tcp::acceptor acceptor_;
  boost::asio::steady_timer accept_retry_;
  boost::asio::steady_timer disk_timer_;
  boost::asio::steady_timer sample_timer_;
  boost::asio::steady_timer place_timer_;
  std::shared_ptr<ReplyTarget> sampler_;
  std::shared_ptr<Shared> shared_;
  uint16_t bound_port_ = 0;
};

}  // namespace queen::server
