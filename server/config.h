// The server's configuration, read once at start-up from environment variables with the
// reference's defaults (README.md lists them all). Booleans accept true/false, 1/0, yes/no
// and on/off; any other value is an error naming the variable, and the server refuses to
// start. A non-positive or unparsable engine number keeps its default.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "core/common/result.h"
#include "core/node/command.h"
#include "core/node/config.h"
#include "io/env.h"

namespace queen::server {

struct ServerConfig {
  uint16_t port = 6632;                    // PORT (0 = any free port)
  std::string bind_addr = "0.0.0.0";       // QUEEN_BIND_ADDR
  std::string data_dir = "./data/raft";    // QUEEN_RAFT_DIR
  uint64_t body_bytes_max = 64ull << 20;   // QUEEN_MAX_BODY_BYTES
  int64_t stmt_timeout_ms = 30000;         // QUEEN_STMT_TIMEOUT_MS
  int64_t pop_timeout_ms_default = 30000;  // POP_DEFAULT_TIMEOUT_MS / DEFAULT_TIMEOUT
  SubscriptionMode subscription_mode_default =
      SubscriptionMode::new_only;       // DEFAULT_SUBSCRIPTION_MODE
  size_t commands_queued_max = 16384;   // QUEEN_RAFT_COMMAND_QUEUE_DEPTH
  int http_threads = 2;                 // QUEEN_HTTP_THREADS
  LogLevel log_level = LogLevel::info;  // LOG_LEVEL
  bool log_json = false;                // QUEEN_LOG_JSON
  NodeConfig node;
};

// The longest any deadline may be (long poll, push, statement).
constexpr int64_t kTimeoutMsMax = 60000;

// Looks a variable up; nullopt when unset. Tests pass a map, main passes getenv.
using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;

Result<ServerConfig> load_config(const EnvLookup& lookup);
EnvLookup process_env();

// Boolean syntax of every flag: true/false, 1/0, yes/no, on/off (any case).
std::optional<bool> parse_bool(const std::string& text);

}  // namespace queen::server
