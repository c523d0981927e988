// The HTTP/1.1 edge (Boost.Beast): accepts connections, reads requests (keep-alive and
// pipelining: answers go out in request order), routes and parses them on the edge threads,
// hands prepared commands to the node and writes the node's replies back on the connection
// that owns them.
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
#include "server/codec.h"

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
  int threads = 2;
  size_t pipelined_max = 16;                // requests read ahead on one connection
  uint64_t readahead_bytes_max = 8u << 20;  // body bytes read ahead on one connection
  size_t connections_max = 10000;           // connections served at once
  uint32_t header_bytes_max = 64u << 10;
  EdgeSettings settings;
};

class HttpServer {
 public:
  HttpServer(HttpServerOptions options, real::NodeDriver& driver, ReplyRouter& router);
  ~HttpServer();

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

  HttpServerOptions options_;
  boost::asio::io_context context_;
  boost::asio::ip::tcp::acceptor acceptor_;
  boost::asio::steady_timer accept_retry_;
  std::shared_ptr<Shared> shared_;
  uint16_t bound_port_ = 0;
};

}  // namespace queen::server
