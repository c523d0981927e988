// Process-wide logging to stderr for the server and its environment. One line per call,
// written whole under a mutex so lines from the node thread, the disk writer and the edge
// threads never interleave. Plain text by default; one JSON object per line when
// QUEEN_LOG_JSON is on. Lines below the configured level are dropped before formatting.
#pragma once

#include <string>
#include <string_view>

#include "io/env.h"

namespace queen::real {

struct LogOptions {
  LogLevel level_min = LogLevel::info;
  bool json = false;
};

// Sets the level and format; call once at start-up, before any thread logs.
void log_configure(LogOptions options);
bool log_enabled(LogLevel level);
// `component` names the writer ("node", "http", "disk", "main").
void log_line(LogLevel level, std::string_view component, std::string_view message);

// "debug" | "info" | "warn" | "warning" | "error" (any case); false when unknown.
bool parse_log_level(std::string_view text, LogLevel* out);

}  // namespace queen::real
