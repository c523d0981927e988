// One client connection of the HTTP edge (server/http_server.h): reading requests with their
// admission permits, handing commands to the node, waiting fetches, forwarding a follower's
// requests to the leader, and writing answers in order. Internal to server/: http_session.cpp
// holds the reading and answering, http_forward.cpp the waits and the forwarding.
#pragma once

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
#include <map>
#include <mutex>
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

class Session;

struct HttpServer::Shared {
  Shared(HttpServerOptions o, real::NodeDriver& d, ReplyRouter& r)
      : options(std::move(o)),
        driver(d),
        router(r),
        admission(options.admit_bytes_max, &edge_counters()),
        disk(options.disk),
        placement(PlacementOptions{
            .busy_max = options.threads > 0 ? static_cast<double>(options.node_busy_max) : 0.0}) {}
  HttpServerOptions options;
  real::NodeDriver& driver;
  ReplyRouter& router;
  Admission admission;
  DiskGate disk;
  std::atomic<size_t> connections{0};
  std::atomic<uint64_t> slow_bodies_dropped{0};  // below QUEEN_HTTP_BODY_MIN_BYTES_PER_S
  std::shared_ptr<CommandForwarder> forwarder;   // a cluster with client offload
  boost::asio::io_context* render = nullptr;     // the render thread (render_apart_rows)
  // Where connections are served: the node thread's context (threads 0, or an adaptive
  // placement), the edge threads' (none with threads 0), and the rule choosing between them.
  boost::asio::io_context* node = nullptr;
  std::vector<boost::asio::io_context*> edges;
  std::atomic<uint64_t> edge_next{0};
  Placement placement;
  // Whether new connections go to the node thread now.
  bool serving_on_node() const { return node && (edges.empty() || placement.on_node()); }
  // The io_context a connection is to be served on now (the next edge thread's, in turn).
  boost::asio::io_context& placed() { return serving_on_node() ? *node : next_edge(); }
  boost::asio::io_context& next_edge() {
    return *edges[edge_next.fetch_add(1, std::memory_order_relaxed) % edges.size()];
  }
  // The connections served on the node thread, by the order they came in, for closing them
  // there at stop (HttpServer::close_node_connections); none is added once that began.
  std::mutex on_node_mutex;
  std::map<uint64_t, std::weak_ptr<Session>> on_node;
  uint64_t on_node_next = 0;
  bool on_node_closing = false;
};

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
// A fetch that waits for minBytes asks the node again this often.
constexpr int64_t kFetchPollMs = 20;
// A body may start slowly for this long before QUEEN_HTTP_BODY_MIN_BYTES_PER_S applies.
constexpr double kBodyGraceS = 1.0;

// A request read from the connection, or an answer decided while reading it.
struct Pending {
  http::request<http::string_body> request;
  std::optional<HttpAnswer> refusal;  // 413 / 400 / 429 before the body; the connection closes
  bool refusal_json = false;
  AdmitPermit permit;                  // admission bytes held until the answer is written
  std::optional<std::string> subject;  // the token's sub, when JWT was checked at the header
};

using std::chrono::milliseconds;

// `hold_ms` +-25%, so that waiters refused together do not come back together.
inline int64_t jittered(int64_t hold_ms, IdSource& ids) {
  int64_t quarter = hold_ms / 4;
  if (quarter == 0) return hold_ms;
  return hold_ms - quarter + static_cast<int64_t>(ids.random_u64() % (2 * quarter + 1));
}

inline int64_t steady_us(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
}

inline HttpAnswer plain_answer(unsigned status, const char* text) {
  HttpAnswer answer;
  answer.status = status;
  answer.body = text;
  return answer;
}

inline void add_common_headers(http::response<http::string_body>& res) {
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
        forward_timer_(stream_.get_executor()) {}

  ~Session() override {
    if (on_node_key_) {
      std::lock_guard lock(shared_->on_node_mutex);
      shared_->on_node.erase(*on_node_key_);
    }
    cancel_held();
    if (request_started_)  // ended unanswered: it is no longer in flight
      shared_->placement.end(steady_us(*request_started_),
                             steady_us(std::chrono::steady_clock::now()));
    shared_->admission.release(reading_permit_);
    for (const Pending& p : pending_) shared_->admission.release(p.permit);
    if (!moved_) shared_->connections.fetch_sub(1);
  }

  void start();
  // Files the connection among those served on the node thread (before start()); false once
  // they are being closed for a stop.
  bool serve_on_node() {
    std::lock_guard lock(shared_->on_node_mutex);
    if (shared_->on_node_closing) return false;
    on_node_key_ = shared_->on_node_next++;
    shared_->on_node.emplace(*on_node_key_, weak_from_this());
    return true;
  }
  // Closes the connection (on its own thread): a request held at the node is cancelled.
  void shut() { close(); }

  void on_reply(ReplyHandle handle, Reply reply) override;

 private:
  // ---- reads by offset that wait (maxWaitMs, minBytes) ----

  // A fetch whose records fall short of minBytes is asked again every kFetchPollMs until they
  // do or maxWaitMs passes; then the last answer is given.
  struct FetchWait {
    CommandEnvelope envelope;
    uint64_t min_bytes = 0;
    std::chrono::steady_clock::time_point until;
  };

  void hold_for_fetch_wait(const CommandEnvelope& envelope);

  static uint64_t fetched_bytes(const FetchReply& r);

  bool fetch_again(const Reply& reply);

  // ---- forwarding (a cluster's follower) ----

  // The held request while this follower's edge sends it on to the leader whole (client
  // offload off). It keeps its request id: every leader it reaches, and this node if it comes
  // to lead, gets the same id, so a retry after a leader change is answered from the first
  // outcome, never applied twice.
  struct Forwarding {
    std::shared_ptr<ForwardRequest> request;  // as received, with the forwarding headers
    CommandEnvelope envelope;                 // as submitted to this node
    HttpAnswer last;                          // the answer to give when the retries run out
    std::chrono::steady_clock::time_point until;
    int attempts_left = kForwardAttemptsMax;
  };

  static bool retryable(const ErrorReply& e);

  // The node said another node leads, or none does yet: send the request to the leader, or
  // ask the node again shortly. False: answer the reply as it is.
  bool try_forward(const Reply& reply);

  // A retry through this node after a pause: it knows the leader by then, or leads itself.
  bool resubmit_later();

  void resubmit();

  void give_up();

  void on_forwarded(std::optional<ForwardResponse> res, uint64_t leader);

  void answer_forwarded(ForwardResponse& res);

  // One attempt at `leader`; false when it cannot be made (unknown node, no time left).
  bool forward_to(uint64_t leader);

  // Starts forwarding state for a request this follower's edge serves (not one forwarded to
  // it: that is answered where it lands).
  void hold_for_forwarding(const http::request<http::string_body>& req,
                           const CommandEnvelope& envelope);

  // A request forwarded by a peer keeps the request id the peer gave it.
  void adopt_forwarded_request_id(const http::request<http::string_body>& req,
                                  CommandEnvelope* envelope) const;

  // The configured peer named by an x-queen-forwarded value, or kLocalClients.
  AdmitSource forwarding_peer(boost::beast::string_view header) const;

  // ---- reading ----

  void read_next();

  // Nothing of the next request has arrived: wait for its first byte without a buffer, so an
  // idle keep-alive connection costs only its socket and this session.
  void wait_for_request();

  // ---- moving between the node thread and an edge thread (server/edge_placement.h) ----

  // The placement wants this connection on the other side of the node thread.
  bool placed_elsewhere() const;
  // Nothing of it is read, held at the node, being answered or waiting.
  bool quiet() const;
  // After an answer: a connection placed elsewhere and quiet stops waiting for its next
  // request (its bytes stay unread in the socket) and moves.
  void move_when_quiet();
  // The wait was stopped for a move: moves, or waits again when it can no longer. False when
  // the wait ended otherwise and is to be handled as usual.
  bool moved_on(beast::error_code ec);
  // The socket goes on to a new session on the other side, and this one ends (true); false
  // when it stays (the socket cannot be taken). Once a stop began closing the node thread's
  // connections, one moving there is closed with them.
  bool move();

  void arm_idle_timer();

  void read_header();

  // The admission source of a client connecting from the socket's peer address.
  static AdmitSource client_of(const tcp::socket& socket);

  // With JWT on, the token is checked on the header: a request without a valid one is
  // answered before its body is read, and takes no admission permit.
  bool refused_at_header();

  // The body limit of the request's route-table row: the server's for the routes that carry
  // messages, a small one for the others and for paths no row matches.
  uint64_t body_limit_of_row() const;

  // The header is in: check its token, then take admission permits for the body before
  // reading it.
  void on_header(beast::error_code ec);

  // Whose share a request takes: the peer that forwarded it, or the client's address.
  AdmitSource admit_source() const;

  void on_admitted(AdmitPermit permit);

  // The budget stayed full for the whole hold: 429, and the unread body closes the connection.
  void on_hold_elapsed();

  void after_admitted();

  // The body is read a piece at a time: it must arrive within body_timeout_ms of its header,
  // and, past a grace second, at QUEEN_HTTP_BODY_MIN_BYTES_PER_S at least, so a client
  // trickling a large body gives its admission permit back early instead of holding it.
  void read_body();

  void read_body_some();

  bool body_too_slow() const;

  // The client sends its body too slowly: its permit goes back and the connection closes.
  void drop_slow_body();

  void on_read(beast::error_code ec);

  static bool is_parse_error(beast::error_code ec);

  // The request cannot be read on: answer it in turn, then close the connection.
  void refuse(HttpAnswer answer, bool json, AdmitPermit permit = {});

  void peer_gone();

  void cancel_held();

  // ---- answering ----

  void answer_front();

  static HttpAnswer storage_full();

  void arm_deadline(ReplyHandle handle, int64_t wait_ms);

  // The node has not answered in time: answer for it, and let it drop the request.
  void on_deadline(ReplyHandle handle);

  // The body is parsed: its bytes no longer count against the read-ahead budget.
  void release_body(Pending& p);

  static real::RequestKind kind_of(const Command& c);

  // The time from dispatch to this answer, by kind (GET /metrics/prometheus).
  void record_latency();

  // Takes the answer: its body moves into the response unless the caller keeps a copy.
  void write_answer(HttpAnswer answer, const char* content_type);
  // Renders `reply` on the render thread, then writes it here (Options::render_apart_rows).
  void render_apart(Reply reply);

  void on_written(beast::error_code ec, bool keep_alive);

  // After a refusal the client may still be sending its body: read and discard it for a
  // moment so that it sees the answer rather than a reset.
  void drain_and_close();

  void close();

  beast::tcp_stream stream_;
  std::shared_ptr<HttpServer::Shared> shared_;
  AdmitSource client_;             // this connection's admission source (its client's address)
  asio::steady_timer idle_timer_;  // closes a connection idle for idle_timeout_ms
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
  ViewArgs held_view_;
  std::optional<std::chrono::steady_clock::time_point> request_started_;  // being answered
  real::RequestKind request_kind_ = real::RequestKind::other;
  bool request_waits_ = false;              // a long poll: its time is not a slow command's
  std::shared_ptr<Forwarding> forwarding_;  // the held request, while a follower forwards it
  asio::steady_timer forward_timer_;        // the pause before a retry through this node
  std::optional<FetchWait> fetch_wait_;     // the held fetch, while it waits for records
  std::vector<char> drain_buffer_;
  bool reading_ = false;
  bool waiting_idle_ = false;
  bool read_closed_ = false;
  bool busy_ = false;
  bool peer_gone_ = false;
  bool closed_ = false;
  std::optional<uint64_t> on_node_key_;  // filed in Shared::on_node
  bool moving_ = false;                  // its wait is being stopped for a move
  bool moved_ = false;                   // its socket went on to another session
};

}  // namespace queen::server
