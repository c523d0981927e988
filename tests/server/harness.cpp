#include "tests/server/harness.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

extern char** environ;

#ifndef QUEEN_BINARY
#error "QUEEN_BINARY must name the queen executable"
#endif

namespace queen::test {

namespace {

// The broker the tests start: QUEEN_TEST_BINARY when set (scripts/sanitize.sh points it at a
// ThreadSanitizer build), else the one built beside the tests.
const char* queen_binary() {
  const char* path = std::getenv("QUEEN_TEST_BINARY");
  return path != nullptr && *path != '\0' ? path : QUEEN_BINARY;
}

}  // namespace

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

// ---------- HttpResult ----------

json HttpResult::body_json() const {
  return json::parse(body, nullptr, /*allow_exceptions=*/false);
}

std::string HttpResult::header(const std::string& lower_name) const {
  auto it = headers.find(lower_name);
  return it == headers.end() ? "" : it->second;
}

// ---------- HttpClient ----------

struct HttpClient::Impl {
  uint16_t port;
  asio::io_context context;
  std::optional<beast::tcp_stream> stream;
  beast::flat_buffer buffer;

  // Runs the queued operations until they finish; the stream's expiry bounds them.
  void run() {
    context.restart();
    context.run();
  }

  void reset() {
    if (stream) {
      beast::error_code ignored;
      stream->socket().close(ignored);
    }
    stream.reset();
    buffer.clear();
  }

  bool connect(std::chrono::milliseconds timeout, std::string* error) {
    if (stream && stream->socket().is_open()) return true;
    stream.emplace(context);
    stream->expires_after(timeout);
    beast::error_code result;
    stream->async_connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port),
                          [&](beast::error_code ec) { result = ec; });
    run();
    if (result) {
      *error = "connect: " + result.message();
      reset();
      return false;
    }
    return true;
  }

  HttpResult exchange(http::request<http::string_body>& req, std::chrono::milliseconds timeout) {
    HttpResult out;
    stream->expires_after(timeout);
    http::response_parser<http::string_body> parser;
    parser.body_limit(1ull << 30);
    beast::error_code result;
    http::async_write(*stream, req, [&](beast::error_code ec, size_t) {
      if (ec) {
        result = ec;
        return;
      }
      http::async_read(*stream, buffer, parser,
                       [&](beast::error_code rec, size_t) { result = rec; });
    });
    run();
    if (result) {
      out.transport_error = result.message();
      reset();
      return out;
    }
    auto& res = parser.get();
    out.status = static_cast<int>(res.result_int());
    out.body = res.body();
    for (const auto& field : res) {
      std::string name(field.name_string());
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      out.headers[name] = std::string(field.value());
    }
    if (!res.keep_alive()) reset();
    return out;
  }
};

HttpClient::HttpClient(uint16_t port) : impl_(std::make_unique<Impl>()) {
  impl_->port = port;
}
HttpClient::~HttpClient() = default;

HttpResult HttpClient::request(const std::string& method, const std::string& target,
                               const std::string& body, int64_t timeout_ms,
                               const std::map<std::string, std::string>& headers) {
  auto timeout = std::chrono::milliseconds(timeout_ms);
  HttpResult failed;
  if (!impl_->connect(timeout, &failed.transport_error)) return failed;
  http::request<http::string_body> req;
  req.method_string(method);
  req.target(target);
  req.version(11);
  req.set(http::field::host, "127.0.0.1");
  req.keep_alive(true);
  if (!body.empty() || method == "POST") {
    req.set(http::field::content_type, "application/json");
    req.body() = body;
  }
  for (const auto& [name, value] : headers) req.set(name, value);
  req.prepare_payload();
  return impl_->exchange(req, timeout);
}

// ---------- TempDir ----------

TempDir::TempDir() {
  std::string pattern = (std::filesystem::temp_directory_path() / "queen-test-XXXXXX").string();
  char* made = ::mkdtemp(pattern.data());
  if (made == nullptr) std::abort();
  path_ = made;
}

TempDir::~TempDir() {
  std::error_code ignored;
  if (std::getenv("QUEEN_TEST_KEEP") == nullptr) std::filesystem::remove_all(path_, ignored);
}

// ---------- ServerProcess ----------

namespace {

uint16_t free_port() {
  asio::io_context context;
  tcp::acceptor acceptor(context, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  return acceptor.local_endpoint().port();
}

}  // namespace

// Distinct within the process: the kernel may hand a just-closed port out again, and a
// cluster test picks six at once.
uint16_t free_loopback_port() {
  static std::mutex mutex;
  static std::set<uint16_t> given;
  std::lock_guard lock(mutex);
  for (int attempt = 0; attempt < 1000; ++attempt) {
    uint16_t port = free_port();
    if (given.insert(port).second) return port;
  }
  return free_port();
}

ServerProcess::ServerProcess(std::string data_dir, std::string log_path,
                             std::map<std::string, std::string> env)
    : data_dir_(std::move(data_dir)), log_path_(std::move(log_path)), env_(std::move(env)) {}

ServerProcess::~ServerProcess() {
  kill9();
}

bool ServerProcess::spawn(uint16_t port) {
  std::map<std::string, std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string kv(*e);
    size_t eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  env["PORT"] = std::to_string(port);
  env["QUEEN_BIND_ADDR"] = "127.0.0.1";
  env["QUEEN_RAFT_DIR"] = data_dir_;
  env["LOG_LEVEL"] = "warn";
  for (const auto& [k, v] : env_) env[k] = v;
  // Everything the child needs is prepared before fork: the parent may have threads.
  std::vector<std::string> entries;
  for (const auto& [k, v] : env) entries.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (auto& e : entries) envp.push_back(e.data());
  envp.push_back(nullptr);
  const char* binary = queen_binary();
  char* argv[] = {const_cast<char*>(binary), nullptr};
  int fd = ::open(log_path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  pid_t pid = ::fork();
  if (pid < 0) {
    if (fd >= 0) ::close(fd);
    return false;
  }
  if (pid == 0) {
    if (fd >= 0) {
      ::dup2(fd, STDERR_FILENO);
      ::dup2(fd, STDOUT_FILENO);
    }
    ::execve(binary, argv, envp.data());
    ::_exit(127);
  }
  if (fd >= 0) ::close(fd);
  pid_ = pid;
  port_ = port;
  return true;
}

bool ServerProcess::start(std::string* error) {
  constexpr int kAttemptsMax = 3;
  for (int attempt = 0; attempt < kAttemptsMax; ++attempt) {
    if (!spawn(fixed_port_ != 0 ? fixed_port_ : free_port())) {
      *error = "fork failed";
      return false;
    }
    bool up = eventually(std::chrono::seconds(20), [&] {
      if (!running()) return true;  // exited: stop polling
      HttpClient client(port_);
      int status = client.get("/health", 1000).status;
      return status == 200 || (fixed_port_ != 0 && status != 0);
    });
    if (up && running()) return true;
    kill9();
  }
  *error = "queen did not come up; log tail:\n" + log_tail();
  return false;
}

bool ServerProcess::running() {
  if (pid_ <= 0) return false;
  int status = 0;
  pid_t r = ::waitpid(pid_, &status, WNOHANG);
  if (r == pid_) {
    pid_ = -1;
    exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return false;
  }
  return true;
}

void ServerProcess::kill9() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  int status = 0;
  ::waitpid(pid_, &status, 0);
  pid_ = -1;
}

int ServerProcess::stop() {
  if (pid_ <= 0) return -1;
  ::kill(pid_, SIGTERM);
  int status = 0;
  bool exited = eventually(std::chrono::seconds(10), [&] {
    pid_t r = ::waitpid(pid_, &status, WNOHANG);
    return r == pid_;
  });
  if (!exited) {
    kill9();
    return -1;
  }
  pid_ = -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string ServerProcess::log_tail(size_t bytes) const {
  std::ifstream in(log_path_, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string all = ss.str();
  return all.size() > bytes ? all.substr(all.size() - bytes) : all;
}

// ---------- helpers ----------

bool eventually(std::chrono::milliseconds timeout, const std::function<bool()>& probe) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  auto pause = std::chrono::milliseconds(1);
  while (std::chrono::steady_clock::now() < deadline) {
    if (probe()) return true;
    // Back off between probes so polling does not spin; the deadline bounds the wait.
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(50));
  }
  return probe();
}

std::string raw_exchange(uint16_t port, const std::string& bytes, int64_t timeout_ms) {
  asio::io_context context;
  beast::tcp_stream stream(context);
  stream.expires_after(std::chrono::milliseconds(timeout_ms));
  std::string out;
  std::array<char, 4096> buf;
  std::function<void(beast::error_code, size_t)> on_read = [&](beast::error_code ec, size_t n) {
    out.append(buf.data(), n);
    if (!ec) stream.async_read_some(asio::buffer(buf), on_read);
  };
  stream.async_connect(
      tcp::endpoint(asio::ip::make_address("127.0.0.1"), port), [&](beast::error_code ec) {
        if (ec) return;
        asio::async_write(stream, asio::buffer(bytes), [&](beast::error_code wec, size_t) {
          if (!wec) stream.async_read_some(asio::buffer(buf), on_read);
        });
      });
  context.run();
  return out;
}

std::string url_encode(const std::string& text) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

}  // namespace queen::test
