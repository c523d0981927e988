#include "server/config.h"

#include <boost/asio/ip/address.hpp>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <set>
#include <string_view>

#include <unistd.h>  // environ

#include "core/qlog/log.h"
#include "io/real/log.h"
#include "server/auth.h"

namespace queen::server {
namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::optional<std::string> non_empty(const EnvLookup& lookup, const std::string& name) {
  auto v = lookup(name);
  if (!v || v->empty()) return std::nullopt;
  return v;
}

std::optional<int64_t> parse_i64(const std::string& text) {
  int64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return v;
}

// A number of at least `min`; a smaller or unparsable value keeps the default (with a warning
// saying what was expected).
template <class T>
void read_at_least(const EnvLookup& lookup, const std::string& name, int64_t min,
                   const char* expected, T* field) {
  auto text = non_empty(lookup, name);
  if (!text) return;
  auto v = parse_i64(*text);
  if (!v || *v < min) {
    real::log_line(LogLevel::warn, "config", name + "=" + *text + " ignored: not " + expected);
    return;
  }
  *field = static_cast<T>(*v);
}

// Engine numbers: a non-positive or unparsable value keeps the default.
template <class T>
void read_positive(const EnvLookup& lookup, const std::string& name, T* field) {
  read_at_least(lookup, name, 1, "a positive integer", field);
}

// Counts where 0 has a meaning of its own: a negative or unparsable value keeps the default.
template <class T>
void read_count(const EnvLookup& lookup, const std::string& name, T* field) {
  read_at_least(lookup, name, 0, "a count (0 or more)", field);
}

Status read_bool(const EnvLookup& lookup, const std::string& name, bool* field) {
  auto text = non_empty(lookup, name);
  if (!text) return ok_status();
  auto v = parse_bool(*text);
  if (!v) {
    return make_error(Errc::bad_request,
                      name + "=" + *text + " is not a boolean (true/false, 1/0, yes/no, on/off)");
  }
  *field = *v;
  return ok_status();
}

Status read_port(const EnvLookup& lookup, ServerConfig* config) {
  auto text = non_empty(lookup, "PORT");
  if (!text) return ok_status();
  auto v = parse_i64(*text);
  if (!v || *v < 0 || *v > 65535) {
    return make_error(Errc::bad_request, "PORT=" + *text + " is not a port number");
  }
  config->port = static_cast<uint16_t>(*v);
  return ok_status();
}

Status read_bind_addr(const EnvLookup& lookup, ServerConfig* config) {
  auto text = non_empty(lookup, "QUEEN_BIND_ADDR");
  if (!text) return ok_status();
  std::string host = *text == "localhost" ? "127.0.0.1" : *text;
  boost::system::error_code ec;
  boost::asio::ip::make_address(host, ec);
  if (ec) {
    return make_error(Errc::bad_request,
                      "QUEEN_BIND_ADDR=" + *text + " is not an IP address (a host only, no port)");
  }
  config->bind_addr = host;
  return ok_status();
}

Status read_log(const EnvLookup& lookup, ServerConfig* config) {
  if (auto text = non_empty(lookup, "LOG_LEVEL")) {
    if (!real::parse_log_level(*text, &config->log_level)) {
      return make_error(Errc::bad_request,
                        "LOG_LEVEL=" + *text + " is not one of debug, info, warn, error");
    }
  }
  return read_bool(lookup, "QUEEN_LOG_JSON", &config->log_json);
}

void read_timeouts(const EnvLookup& lookup, ServerConfig* config) {
  read_positive(lookup, "QUEEN_STMT_TIMEOUT_MS", &config->stmt_timeout_ms);
  if (non_empty(lookup, "POP_DEFAULT_TIMEOUT_MS")) {
    read_positive(lookup, "POP_DEFAULT_TIMEOUT_MS", &config->pop_timeout_ms_default);
  } else {
    read_positive(lookup, "DEFAULT_TIMEOUT", &config->pop_timeout_ms_default);
  }
  config->stmt_timeout_ms = std::min(config->stmt_timeout_ms, kTimeoutMsMax);
  config->pop_timeout_ms_default = std::min(config->pop_timeout_ms_default, kTimeoutMsMax);
}

void read_subscription_mode(const EnvLookup& lookup, ServerConfig* config) {
  auto text = non_empty(lookup, "DEFAULT_SUBSCRIPTION_MODE");
  if (!text) return;
  std::string v = lower(*text);
  bool is_new = v == "new" || v == "new-only" || v == "new_only" || v == "newonly";
  config->subscription_mode_default = is_new ? SubscriptionMode::new_only : SubscriptionMode::all;
}

// QUEEN_QLOG_SHARDS: 0 (one log per queue, the default) to kSharedLogsMax. Unlike the
// reference, where the layout is fixed when the data folder is created, a change takes
// effect at the next start (recovery reads every log the folder holds).
Status read_qlog_shards(const EnvLookup& lookup, NodeConfig* node) {
  auto text = non_empty(lookup, "QUEEN_QLOG_SHARDS");
  if (!text) return ok_status();
  auto v = parse_i64(*text);
  if (!v || *v < 0 || *v > static_cast<int64_t>(kSharedLogsMax)) {
    return make_error(Errc::bad_request, "QUEEN_QLOG_SHARDS=" + *text +
                                             " is not a number from 0 to " +
                                             std::to_string(kSharedLogsMax));
  }
  node->qlog_shards = static_cast<uint32_t>(*v);
  return ok_status();
}

// A number of MiB from 0 (meaning `zero_means`) to `mib_max`, as bytes; an error that names the
// variable otherwise.
Status read_mib(const EnvLookup& lookup, const std::string& name, int64_t mib_max,
                const std::string& zero_means, uint64_t* bytes) {
  auto text = non_empty(lookup, name);
  if (!text) return ok_status();
  auto v = parse_i64(*text);
  if (!v || *v < 0 || *v > mib_max) {
    return make_error(Errc::bad_request, name + "=" + *text + " is not a number of MiB from 0 (" +
                                             zero_means + ") to " + std::to_string(mib_max));
  }
  *bytes = static_cast<uint64_t>(*v) << 20;
  return ok_status();
}

// QUEEN_RAFT_DEDUP_FRONT_MB: the dedup rings' bound, 0 for none; QUEEN_RAFT_RINGS_FILE_MIN_MB:
// the rings a store checkpoint writes a rings file for (up to 1 TiB each).
Status read_dedup_rings(const EnvLookup& lookup, NodeConfig* node) {
  constexpr int64_t kMibMax = int64_t{1} << 20;
  if (auto st = read_mib(lookup, "QUEEN_RAFT_DEDUP_FRONT_MB", kMibMax, "no bound",
                         &node->dedup_front_bytes_max);
      !st.ok())
    return st;
  return read_mib(lookup, "QUEEN_RAFT_RINGS_FILE_MIN_MB", kMibMax, "any size",
                  &node->rings_file_bytes_min);
}

Status read_engine(const EnvLookup& lookup, NodeConfig* node) {
  read_positive(lookup, "QUEEN_CONSUME_CHECKPOINT_MS", &node->checkpoint_ms);
  read_positive(lookup, "QUEEN_RAFT_PIPELINE", &node->pipeline_max);
  read_positive(lookup, "QUEEN_RAFT_BATCH_MAX_CMDS", &node->batch_cmds_max);
  read_positive(lookup, "QUEEN_RAFT_BATCH_MAX_BYTES", &node->batch_bytes_max);
  read_positive(lookup, "QUEEN_RAFT_SEGMENT_BYTES", &node->segment_bytes);
  if (auto st = read_qlog_shards(lookup, node); !st.ok()) return st;
  uint64_t row_hash_cache_mb = 0;
  read_positive(lookup, "QUEEN_ROW_HASH_CACHE_MB", &row_hash_cache_mb);
  if (row_hash_cache_mb > 0) node->row_hash_cache_bytes = row_hash_cache_mb << 20;
  if (auto st = read_dedup_rings(lookup, node); !st.ok()) return st;
  read_positive(lookup, "QUEEN_RAFT_DURABLE_EVERY_MS", &node->durable_every_ms);
  read_positive(lookup, "QUEEN_RAFT_DURABLE_EVERY_BYTES", &node->durable_every_bytes);
  read_positive(lookup, "RETENTION_INTERVAL", &node->retention_interval_ms);
  read_positive(lookup, "QUEEN_RAFT_RETENTION_VISIT", &node->retention_visit_max);
  read_positive(lookup, "QUEEN_LIST_SLICE_PARTITIONS", &node->list_slice_partitions);
  read_positive(lookup, "QUEEN_RAFT_TXN_WINDOW_MIN_S", &node->rows_window_min_s);
  read_positive(lookup, "QUEEN_RAFT_TRACE_RETENTION_S", &node->trace_retention_s);
  int64_t purge_hold_s = 0;
  read_positive(lookup, "QUEEN_RAFT_PURGE_HOLD_S", &purge_hold_s);
  if (purge_hold_s > 0) node->raft_purge_hold_ms = purge_hold_s * 1000;
  int64_t cleanup_days = 0;
  read_positive(lookup, "PARTITION_CLEANUP_DAYS", &cleanup_days);
  if (cleanup_days > 0) node->partition_cleanup_after_s = cleanup_days * 86400;
  if (auto on = non_empty(lookup, "QUEEN_PARTITION_CLEANUP_ENABLED"); on && *on == "false")
    node->partition_cleanup_after_s = 0;
  read_positive(lookup, "QUEEN_RAFT_POP_REPLY_MARGIN_MS", &node->pop_reply_margin_ms);
  read_positive(lookup, "QUEEN_RAFT_KV_SWEEP_MS", &node->kv_sweep_ms);
  int64_t window_s = 0;
  read_positive(lookup, "QUEEN_RAFT_REQUEST_ID_WINDOW_S", &window_s);
  if (window_s > 0) node->request_id_window_ms = window_s * 1000;
  // 0 is meaningful here: timers never fire.
  if (auto tick = non_empty(lookup, "QUEEN_RAFT_TIMER_TICK_MS")) {
    auto v = parse_i64(*tick);
    if (v && *v >= 0) {
      node->timer_tick_ms = *v;
    } else {
      real::log_line(LogLevel::warn, "config",
                     "QUEEN_RAFT_TIMER_TICK_MS=" + *tick + " ignored: not a non-negative integer");
    }
  }
  return read_bool(lookup, "QUEEN_CONSUME_FAST", &node->consume_fast);
}

// QUEEN_RAFT_ADMIT_MAX_MB: 0 is meaningful (admission off); unset keeps the reference's
// default of max(128 MiB, (pipeline + 2) x batch bytes).
void read_admission(const EnvLookup& lookup, ServerConfig* config) {
  const NodeConfig& node = config->node;
  uint64_t derived = (static_cast<uint64_t>(node.pipeline_max) + 2) * node.batch_bytes_max;
  config->admit_bytes_max = std::max(kAdmitBytesFloor, derived);
  if (auto text = non_empty(lookup, "QUEEN_RAFT_ADMIT_MAX_MB")) {
    auto v = parse_i64(*text);
    if (v && *v >= 0) {
      config->admit_bytes_max = static_cast<uint64_t>(*v) << 20;
    } else {
      real::log_line(LogLevel::warn, "config",
                     "QUEEN_RAFT_ADMIT_MAX_MB=" + *text + " ignored: not a non-negative integer");
    }
  }
  read_positive(lookup, "QUEEN_RAFT_ADMIT_HOLD_MS", &config->admit_hold_ms);
  read_positive(lookup, "QUEEN_RAFT_ADMIT_FWD_HOLD_MS", &config->admit_fwd_hold_ms);
}

void read_edge_limits(const EnvLookup& lookup, ServerConfig* config) {
  read_positive(lookup, "QUEEN_HTTP_HEADER_TIMEOUT_MS", &config->header_timeout_ms);
  read_positive(lookup, "QUEEN_HTTP_BODY_TIMEOUT_MS", &config->body_timeout_ms);
  read_positive(lookup, "QUEEN_HTTP_BODY_MIN_BYTES_PER_S", &config->body_min_bytes_per_s);
  read_positive(lookup, "QUEEN_HTTP_IDLE_TIMEOUT_MS", &config->idle_timeout_ms);
  read_admission(lookup, config);
  read_positive(lookup, "QUEEN_RAFT_DISK_HIGH_PCT", &config->disk_high_pct);
  read_positive(lookup, "QUEEN_RAFT_DISK_LOW_PCT", &config->disk_low_pct);
  config->disk_low_pct = std::min(config->disk_low_pct, config->disk_high_pct);
  read_positive(lookup, "QUEEN_RAFT_DISK_CHECK_MS", &config->disk_check_ms);
  read_positive(lookup, "QUEEN_RAFT_SLOW_COMMAND_MS", &config->slow_command_ms);
  config->disk_check_ms = std::clamp(config->disk_check_ms, kDiskCheckMsMin, kDiskCheckMsMax);
  if (auto file = non_empty(lookup, "QUEEN_TEST_DISK_PCT_FILE")) config->test_disk_pct_file = *file;
  read_positive(lookup, "QUEEN_TEST_PUSH_DELAY_MS", &config->test_push_delay_ms);
}

// The reference broker logs a warning for a malformed key and stores payloads in the clear;
// here a malformed key stops the node, which cannot then store what it was told to encrypt.
// The message says what is wrong with the value, never the value.
Status read_encryption_key(const EnvLookup& lookup, ServerConfig* config) {
  auto text = non_empty(lookup, "QUEEN_ENCRYPTION_KEY");
  if (!text) return ok_status();
  auto key = real::parse_payload_key(*text);
  if (!key) {
    return make_error(Errc::bad_request,
                      "QUEEN_ENCRYPTION_KEY must be 64 hex characters (an "
                      "AES-256 key); the value given has " +
                          std::to_string(text->size()) + " characters");
  }
  config->encryption_key = *key;
  return ok_status();
}

}  // namespace

std::optional<bool> parse_bool(const std::string& text) {
  std::string v = lower(text);
  if (v == "true" || v == "1" || v == "yes" || v == "on") return true;
  if (v == "false" || v == "0" || v == "no" || v == "off") return false;
  return std::nullopt;
}

Result<ServerConfig> load_config(const EnvLookup& lookup) {
  ServerConfig config;
  for (Status s :
       {read_port(lookup, &config), read_bind_addr(lookup, &config), read_log(lookup, &config),
        read_engine(lookup, &config.node), read_encryption_key(lookup, &config)}) {
    if (!s) return s.error();
  }
  auto cluster = load_cluster_config(lookup, &config.node);
  if (!cluster) return cluster.error();
  config.cluster = std::move(cluster.value());
  config.node.keep_request_outcomes = config.cluster.has_value();
  auto auth = load_authenticator(lookup);
  if (!auth) return auth.error();
  config.auth = std::move(auth.value());
  if (auto dir = non_empty(lookup, "QUEEN_RAFT_DIR")) config.data_dir = *dir;
  if (auto dir = non_empty(lookup, "QUEEN_CONSOLE_DIR")) config.console_dir = *dir;
  read_positive(lookup, "QUEEN_MAX_BODY_BYTES", &config.body_bytes_max);
  read_positive(lookup, "QUEEN_RAFT_COMMAND_QUEUE_DEPTH", &config.commands_queued_max);
  read_positive(lookup, "QUEEN_START_ARENA_MIN_MB", &config.start_arena_min_mb);
  read_count(lookup, "QUEEN_HTTP_THREADS", &config.http_threads);
  read_count(lookup, "QUEEN_HTTP_NODE_BUSY_MAX", &config.http_node_busy_max);
  read_positive(lookup, "QUEEN_HTTP_RENDER_APART_ROWS", &config.render_apart_rows);
  read_positive(lookup, "QUEEN_STATUS_SAMPLE_MS", &config.status_sample_ms);
  config.status_sample_ms = std::clamp<int64_t>(config.status_sample_ms, 100, 60000);
  config.http_threads = std::clamp(config.http_threads, 0, 64);
  config.http_node_busy_max = std::clamp(config.http_node_busy_max, 0, 100000);
  read_timeouts(lookup, &config);
  config.node.forward_timeout_ms = config.stmt_timeout_ms;
  read_edge_limits(lookup, &config);
  read_subscription_mode(lookup, &config);
  return config;
}

EnvLookup process_env() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  };
}

std::vector<std::string> process_env_names() {
  std::vector<std::string> names;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string_view entry(*e);
    names.emplace_back(entry.substr(0, entry.find('=')));
  }
  return names;
}

EnvLookup recording(EnvLookup inner, std::map<std::string, std::string>* read) {
  return [inner = std::move(inner), read](const std::string& name) {
    std::optional<std::string> v = inner(name);
    if (v) (*read)[name] = *v;
    return v;
  };
}

namespace {

// A value that must not reach a log: tokens, secrets, keys and passwords.
bool secret(const std::string& name) {
  for (const char* word : {"TOKEN", "SECRET", "KEY", "PASSWORD"})
    if (name.find(word) != std::string::npos) return true;
  return false;
}

}  // namespace

ConfigReport config_report(const std::map<std::string, std::string>& read,
                           const std::vector<std::string>& set_names) {
  ConfigReport r;
  for (const auto& [name, value] : read)
    r.read.push_back(name + "=" + (secret(name) && !value.empty() ? "****" : value));
  std::set<std::string> unknown;
  for (const std::string& name : set_names)
    if (name.rfind("QUEEN_", 0) == 0 && read.count(name) == 0) unknown.insert(name);
  r.unknown.assign(unknown.begin(), unknown.end());
  return r;
}

}  // namespace queen::server
