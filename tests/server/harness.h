// Helpers for integration tests against the real `queen` binary: a child process on a free
// loopback port with its own data folder, and a small blocking HTTP/1.1 client (keep-alive,
// a timeout on every request). Conditions are awaited by polling with a deadline.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace queen::test {

using nlohmann::json;

struct HttpResult {
  int status = 0;  // 0: no answer (connection refused, reset, timeout)
  std::string body;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string transport_error;

  json body_json() const;  // null when the body is not JSON
  std::string header(const std::string& lower_name) const;
};

class HttpClient {
 public:
  explicit HttpClient(uint16_t port);
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  HttpResult request(const std::string& method, const std::string& target,
                     const std::string& body = "", int64_t timeout_ms = 10000,
                     const std::map<std::string, std::string>& headers = {});
  HttpResult get(const std::string& target, int64_t timeout_ms = 10000) {
    return request("GET", target, "", timeout_ms);
  }
  HttpResult post(const std::string& target, const json& body, int64_t timeout_ms = 10000) {
    return request("POST", target, body.dump(), timeout_ms);
  }
  HttpResult post_raw(const std::string& target, const std::string& body,
                      int64_t timeout_ms = 10000) {
    return request("POST", target, body, timeout_ms);
  }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// A temporary folder removed at destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

class ServerProcess {
 public:
  // `data_dir` is the node's QUEEN_RAFT_DIR; `log_path` receives its stderr.
  ServerProcess(std::string data_dir, std::string log_path,
                std::map<std::string, std::string> env = {});
  ~ServerProcess();

  // Starts the binary on a free loopback port and waits until /health answers 200.
  // Returns false (with the log's tail in `error`) when it does not come up.
  bool start(std::string* error);
  // A cluster member: always this port, and start() waits only for an answer on it (a node
  // with no leader yet answers /health 503).
  void fix_port(uint16_t port) { fixed_port_ = port; }
  void kill9();
  // SIGTERM and wait for exit; returns the exit code (-1 when it had to be killed).
  int stop();
  bool running();
  // How the last process exited, once running() or stop() saw it go: its exit code, or
  // 128 + the signal that ended it; -1 while none has been seen to exit.
  int exit_code() const { return exit_code_; }
  uint16_t port() const { return port_; }
  pid_t pid() const { return pid_; }
  std::string log_tail(size_t bytes = 4000) const;

 private:
  bool spawn(uint16_t port);

  std::string data_dir_;
  std::string log_path_;
  std::map<std::string, std::string> env_;
  pid_t pid_ = -1;
  uint16_t port_ = 0;
  uint16_t fixed_port_ = 0;
  int exit_code_ = -1;
};

// A loopback port nobody listens on at the moment of the call.
uint16_t free_loopback_port();

// Calls `probe` until it returns true or `timeout` passes; true when it did.
bool eventually(std::chrono::milliseconds timeout, const std::function<bool()>& probe);

// Writes `bytes` on a fresh connection and returns everything read until the server closes
// it (or `timeout_ms` passes).
std::string raw_exchange(uint16_t port, const std::string& bytes, int64_t timeout_ms = 10000);

// URL-encodes a path segment or a query value.
std::string url_encode(const std::string& text);

}  // namespace queen::test
