// queen: one broker node. Reads its configuration from the environment (README.md), recovers
// its data folder, then serves the HTTP API until SIGINT or SIGTERM. Exit code 1 on a fatal
// boot error (bad configuration, data that cannot be trusted, a port that cannot be bound)
// and on a failed fsync.
#include <sys/resource.h>

#include <cstdio>
#include <string>

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

queen::server::HttpServerOptions http_options(const queen::server::ServerConfig& config) {
  return queen::server::HttpServerOptions{.bind_addr = config.bind_addr,
                                          .port = config.port,
                                          .body_bytes_max = config.body_bytes_max,
                                          .threads = config.http_threads,
                                          .header_timeout_ms = config.header_timeout_ms,
                                          .body_timeout_ms = config.body_timeout_ms,
                                          .idle_timeout_ms = config.idle_timeout_ms,
                                          .admit_bytes_max = config.admit_bytes_max,
                                          .admit_hold_ms = config.admit_hold_ms,
                                          .disk = {.data_dir = config.data_dir,
                                                   .high_pct = config.disk_high_pct,
                                                   .low_pct = config.disk_low_pct,
                                                   .test_pct_file = config.test_disk_pct_file},
                                          .disk_check_ms = config.disk_check_ms,
                                          .settings = queen::server::edge_settings(config)};
}

}  // namespace

int main() {
  using namespace queen;
  auto loaded = server::load_config(server::process_env());
  if (!loaded) return fail("configuration: " + loaded.error().message);
  const server::ServerConfig& config = loaded.value();
  raise_open_files_limit();
  real::log_configure({.level_min = config.log_level, .json = config.log_json});
  real::log_line(LogLevel::info, "main",
                 std::string("queen ") + server::kVersion + ", data folder " + config.data_dir);

  server::ReplyRouter router;
  real::NodeDriver driver(real::DriverOptions{.data_dir = config.data_dir,
                                              .node = config.node,
                                              .commands_queued_max = config.commands_queued_max,
                                              .test_push_delay_ms = config.test_push_delay_ms},
                          router);
  Status started = driver.start();
  if (!started)
    return fail("recovery of " + config.data_dir + " failed: " + started.error().message);

  server::HttpServer http(http_options(config), driver, router);
  Status listening = http.listen();
  if (!listening) return fail(listening.error().message);
  http.run();
  driver.stop();
  real::log_line(LogLevel::info, "main", "stopped");
  return 0;
}
