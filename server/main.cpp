// queen: one broker node. Reads its configuration from the environment (README.md), recovers
// its data folder, then serves the HTTP API until SIGINT or SIGTERM. Exit code 1 on a fatal
// boot error (bad configuration, data that cannot be trusted, a port that cannot be bound)
// and on a failed fsync.
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#ifdef QUEEN_MIMALLOC
#include <mimalloc.h>
#endif

#include "core/node/node.h"
#include "io/real/driver.h"
#include "io/real/log.h"
#include "server/config.h"
#include "server/http_server.h"

namespace {

int fail(const std::string& message) {
  queen::real::log_line(queen::LogLevel::error, "main", message);
  return 1;
}

// Every connection is a descriptor: serve as many as the hard limit allows.
void raise_open_files_limit() {
  struct rlimit limit {};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= limit.rlim_max) return;
  limit.rlim_cur = limit.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &limit);
}

std::optional<queen::server::ForwardOptions> forward_options(
    const queen::server::ServerConfig& config) {
  if (!config.cluster) return std::nullopt;
  queen::server::ForwardOptions f;
  f.self_id = config.cluster->node_id;
  f.offload = config.cluster->client_offload;
  f.timeout_ms = config.stmt_timeout_ms;
  std::map<uint64_t, queen::server::HttpAddress> nodes;
  for (const auto& p : config.cluster->peers) nodes[p.id] = {p.http_host, p.http_port};
  f.nodes = std::make_shared<queen::server::HttpAddressBook>(std::move(nodes));
  return f;
}

queen::server::HttpServerOptions http_options(
    const queen::server::ServerConfig& config,
    std::optional<queen::server::ForwardOptions> forward) {
  return queen::server::HttpServerOptions{
      .bind_addr = config.bind_addr,
      .port = config.port,
      .body_bytes_max = config.body_bytes_max,
      .threads = config.http_threads,
      .node_busy_max = config.http_node_busy_max,
      .header_timeout_ms = config.header_timeout_ms,
      .body_timeout_ms = config.body_timeout_ms,
      .body_min_bytes_per_s = static_cast<uint64_t>(config.body_min_bytes_per_s),
      .idle_timeout_ms = config.idle_timeout_ms,
      .admit_bytes_max = config.admit_bytes_max,
      .admit_hold_ms = config.admit_hold_ms,
      .admit_fwd_hold_ms = config.admit_fwd_hold_ms,
      .disk = {.data_dir = config.data_dir,
               .high_pct = config.disk_high_pct,
               .low_pct = config.disk_low_pct,
               .test_pct_file = config.test_disk_pct_file},
      .disk_check_ms = config.disk_check_ms,
      .slow_command_ms = config.slow_command_ms,
      .status_sample_ms = config.status_sample_ms,
      .render_apart_rows = config.render_apart_rows,
      .settings = queen::server::edge_settings(config),
      .forward = std::move(forward)};
}

std::optional<queen::real::TransportOptions> transport_options(
    const queen::server::ServerConfig& config) {
  if (!config.cluster) return std::nullopt;
  const queen::server::ClusterConfig& c = *config.cluster;
  queen::real::TransportOptions t;
  t.self_id = c.node_id;
  t.listen_host = c.listen_host;
  t.listen_port = c.listen_port;
  t.token = c.token;
  t.cluster_id = c.cluster_id;
  t.tls_cert = c.tls_cert;
  t.tls_key = c.tls_key;
  t.tls_ca = c.tls_ca;
  t.header_timeout_ms = config.header_timeout_ms;
  t.forward_streams = c.forward_streams;
  for (const auto& p : c.peers)
    if (p.id != c.node_id) t.peers.push_back({p.id, p.raft_host, p.raft_port});
  return t;
}

// A graceful stop of a leader: the node waits for the acks it took to commit (at most
// NodeConfig::hand_over_ack_wait_ms), then hands leadership to the most caught-up voter; the
// process waits at most kHandOverWaitMs more until another node has taken over.
constexpr int64_t kHandOverWaitMs = 3000;

void hand_over(queen::real::NodeDriver& driver, int64_t ack_wait_ms) {
  if (!driver.hand_over()) return;
  for (int64_t waited = 0; waited < ack_wait_ms + kHandOverWaitMs; waited += 10) {
    bool leading = true;
    driver.run_on_node(
        [&](queen::Node& node) { leading = std::string_view(node.raft_view().role) == "leader"; });
    if (!leading) {
      queen::real::log_line(queen::LogLevel::info, "main", "leadership handed over");
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  queen::real::log_line(queen::LogLevel::warn, "main", "no voter took over leadership in time");
}

// A graceful stop writes a store checkpoint holding everything applied, so the next start
// replays no log; it waits at most this long (a checkpoint of 10M partitions takes seconds).
constexpr int64_t kStopCheckpointWaitMs = 60000;

void checkpoint_before_stop(queen::real::NodeDriver& driver) {
  using queen::LogLevel;
  queen::real::log_line(LogLevel::info, "main", "writing a store checkpoint before stopping");
  if (driver.checkpoint_before_stop(kStopCheckpointWaitMs)) {
    queen::real::log_line(LogLevel::info, "main", "store checkpoint holds everything applied");
  } else {
    queen::real::log_line(LogLevel::warn, "main",
                          "stopping before the store checkpoint was written: the next start "
                          "replays the log after the last one");
  }
}

// Every variable the start read, with its value (secrets masked), and a warning for each
// QUEEN_* variable set that no setting reads.
void log_configuration(const queen::server::ConfigReport& report) {
  using queen::LogLevel;
  for (const std::string& line : report.read) queen::real::log_line(LogLevel::info, "config", line);
  for (const std::string& name : report.unknown) {
    queen::real::log_line(LogLevel::warn, "config",
                          name +
                              " is set but no setting reads it (misspelled, or not a "
                              "setting of this broker): ignored");
  }
}

// mimalloc takes a large start-up load's memory as an arena (io/real/start_arena.h); the
// system allocator (and a sanitizer's) cannot, so the load faults its pages in itself.
queen::real::StartArena::Adopt start_memory_adopter() {
#ifdef QUEEN_MIMALLOC
  return [](void* start, uint64_t bytes) {
    return mi_manage_os_memory(start, bytes, /*is_committed=*/true, /*is_large=*/false,
                               /*is_zero=*/true, /*numa_node=*/-1);
  };
#else
  return {};
#endif
}

}  // namespace

int main() {
  using namespace queen;
  std::map<std::string, std::string> read;
  auto loaded = server::load_config(server::recording(server::process_env(), &read));
  if (!loaded) return fail("configuration: " + loaded.error().message);
  server::ServerConfig& config = loaded.value();
  raise_open_files_limit();
  real::log_configure({.level_min = config.log_level, .json = config.log_json});
  log_configuration(server::config_report(read, server::process_env_names()));
  real::log_line(LogLevel::info, "main",
                 std::string("queen ") + server::kVersion + ", data folder " + config.data_dir);

  if (config.cluster) {
    Status pinned = server::pin_cluster_id(config.data_dir, &*config.cluster, &config.node);
    if (!pinned) return fail(pinned.error().message);
  }
  server::ReplyRouter router;
  real::NodeDriver driver(
      real::DriverOptions{.data_dir = config.data_dir,
                          .node = config.node,
                          .commands_queued_max = config.commands_queued_max,
                          .test_push_delay_ms = config.test_push_delay_ms,
                          .payload_key = config.encryption_key,
                          .transport = transport_options(config),
                          .adopt_start_memory = start_memory_adopter(),
                          .start_arena = {.checkpoint_bytes_min = config.start_arena_min_mb << 20}},
      router);
  auto forward = forward_options(config);
  if (forward) {  // members added later are reached too (a follower forwards to them)
    driver.set_members_listener(
        [book = forward->nodes](const std::vector<Member>& members) { book->update(members); });
  }
  server::HttpServer http(http_options(config, std::move(forward)), driver, router);
  if (auto handler = http.forward_handler()) driver.set_forward_handler(*handler);
  Status started = driver.start();
  if (!started)
    return fail("recovery of " + config.data_dir + " failed: " + started.error().message);

  Status listening = http.listen();
  if (!listening) return fail(listening.error().message);
  http.run();
  if (config.cluster) hand_over(driver, config.node.hand_over_ack_wait_ms);
  checkpoint_before_stop(driver);
  driver.stop();
  real::log_line(LogLevel::info, "main", "stopped");
  return 0;
}
