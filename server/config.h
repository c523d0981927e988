// The server's configuration, read once at start-up from environment variables with the
// reference's defaults (README.md lists them all). Booleans accept true/false, 1/0, yes/no
// and on/off; any other value is an error naming the variable, and the server refuses to
// start. A non-positive or unparsable engine number keeps its default.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/api/replies.h"
#include "core/common/result.h"
#include "core/node/config.h"
#include "io/env.h"
#include "io/real/payload_cipher.h"
#include "server/cluster_config.h"

namespace queen::server {

class Authenticator;  // server/auth.h

struct ServerConfig {
  uint16_t port = 6632;                    // PORT (0 = any free port)
  std::string bind_addr = "0.0.0.0";       // QUEEN_BIND_ADDR
  std::string data_dir = "./data/raft";    // QUEEN_RAFT_DIR
  uint64_t body_bytes_max = 64ull << 20;   // QUEEN_MAX_BODY_BYTES
  int64_t stmt_timeout_ms = 30000;         // QUEEN_STMT_TIMEOUT_MS
  int64_t pop_timeout_ms_default = 30000;  // POP_DEFAULT_TIMEOUT_MS / DEFAULT_TIMEOUT
  SubscriptionMode subscription_mode_default =
      SubscriptionMode::new_only;      // DEFAULT_SUBSCRIPTION_MODE
  size_t commands_queued_max = 16384;  // QUEEN_RAFT_COMMAND_QUEUE_DEPTH
  // QUEEN_START_ARENA_MIN_MB: a start loading a checkpoint at least this large faults its
  // memory in on a helper thread (io/real/start_arena.h).
  uint64_t start_arena_min_mb = 256;
  int http_threads = 2;                // QUEEN_HTTP_THREADS (0: connections on the node thread)
  int http_node_busy_max = 12;         // QUEEN_HTTP_NODE_BUSY_MAX (0: edge threads only)
  int64_t header_timeout_ms = 10000;   // QUEEN_HTTP_HEADER_TIMEOUT_MS
  int64_t body_timeout_ms = 30000;     // QUEEN_HTTP_BODY_TIMEOUT_MS
  int64_t body_min_bytes_per_s = 16384;  // QUEEN_HTTP_BODY_MIN_BYTES_PER_S
  int64_t idle_timeout_ms = 120000;    // QUEEN_HTTP_IDLE_TIMEOUT_MS
  // QUEEN_RAFT_ADMIT_MAX_MB (0: off); unset: max(128 MiB, (pipeline + 2) x batch bytes).
  uint64_t admit_bytes_max = 0;
  int64_t admit_hold_ms = 15000;        // QUEEN_RAFT_ADMIT_HOLD_MS (jittered by +-25%)
  int64_t admit_fwd_hold_ms = 2000;     // QUEEN_RAFT_ADMIT_FWD_HOLD_MS
  int disk_high_pct = 85;               // QUEEN_RAFT_DISK_HIGH_PCT
  int disk_low_pct = 80;                // QUEEN_RAFT_DISK_LOW_PCT
  int64_t disk_check_ms = 100;          // QUEEN_RAFT_DISK_CHECK_MS (10-60000)
  int64_t slow_command_ms = 50;         // QUEEN_RAFT_SLOW_COMMAND_MS
  int64_t status_sample_ms = 5000;      // QUEEN_STATUS_SAMPLE_MS (100-60000)
  uint64_t render_apart_rows = 10000;   // QUEEN_HTTP_RENDER_APART_ROWS
  std::string test_disk_pct_file;       // QUEEN_TEST_DISK_PCT_FILE (tests only)
  int64_t test_push_delay_ms = 0;       // QUEEN_TEST_PUSH_DELAY_MS (tests only)
  LogLevel log_level = LogLevel::info;  // LOG_LEVEL
  bool log_json = false;                // QUEEN_LOG_JSON
  std::string console_dir;              // QUEEN_CONSOLE_DIR (empty: the compiled-in console)
  NodeConfig node;
  // QUEEN_ENCRYPTION_KEY: 64 hex characters, or the node refuses to start. Never logged.
  std::optional<real::PayloadKey> encryption_key;
  std::shared_ptr<const Authenticator> auth;  // JWT_* (server/auth.h); null: JWT off
  std::optional<ClusterConfig> cluster;       // QUEEN_RAFT_PEERS (server/cluster_config.h)
};

// The longest any deadline may be (long poll, push, statement).
constexpr int64_t kTimeoutMsMax = 60000;
constexpr uint64_t kAdmitBytesFloor = 128ull << 20;
constexpr int64_t kDiskCheckMsMin = 10;
constexpr int64_t kDiskCheckMsMax = 60000;

// Looks a variable up; nullopt when unset. Tests pass a map, main passes getenv.
using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;

Result<ServerConfig> load_config(const EnvLookup& lookup);
EnvLookup process_env();
// The names of the process's environment variables.
std::vector<std::string> process_env_names();

// Configuration honesty: `inner`, noting into `read` every variable looked up that is set
// (name → value). What a start read, and which QUEEN_* variables it was given that no
// setting reads (a misspelling, or a 2.x setting this broker does not have), are logged.
EnvLookup recording(EnvLookup inner, std::map<std::string, std::string>* read);
struct ConfigReport {
  std::vector<std::string> read;     // "NAME=value", secrets masked, by name
  std::vector<std::string> unknown;  // QUEEN_* names set and never read, by name
};
ConfigReport config_report(const std::map<std::string, std::string>& read,
                           const std::vector<std::string>& set_names);

// Boolean syntax of every flag: true/false, 1/0, yes/no, on/off (any case).
std::optional<bool> parse_bool(const std::string& text);

}  // namespace queen::server
