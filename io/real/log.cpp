#include "io/real/log.h"

#include <cctype>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <mutex>

namespace queen::real {
namespace {

std::mutex g_mutex;
LogOptions g_options;

std::string timestamp_text() {
  auto now = std::chrono::system_clock::now();
  int64_t us =
      std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count();
  time_t secs = static_cast<time_t>(us / 1000000);
  struct tm tm_utc;
  gmtime_r(&secs, &tm_utc);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%06dZ", tm_utc.tm_year + 1900,
                tm_utc.tm_mon + 1, tm_utc.tm_mday, tm_utc.tm_hour, tm_utc.tm_min, tm_utc.tm_sec,
                static_cast<int>(us % 1000000));
  return buf;
}

void append_json_string(std::string* out, std::string_view s) {
  out->push_back('"');
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out->push_back('\\');
      out->push_back(c);
    } else if (u < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", u);
      out->append(buf);
    } else {
      out->push_back(c);
    }
  }
  out->push_back('"');
}

}  // namespace

void log_configure(LogOptions options) {
  std::lock_guard lock(g_mutex);
  g_options = options;
}

bool log_enabled(LogLevel level) {
  return static_cast<int>(level) >= static_cast<int>(g_options.level_min);
}

void log_line(LogLevel level, std::string_view component, std::string_view message) {
  if (!log_enabled(level)) return;
  std::string line;
  line.reserve(message.size() + 80);
  if (g_options.json) {
    line += "{\"ts\":";
    append_json_string(&line, timestamp_text());
    line += ",\"level\":";
    append_json_string(&line, log_level_name(level));
    line += ",\"component\":";
    append_json_string(&line, component);
    line += ",\"msg\":";
    append_json_string(&line, message);
    line += "}\n";
  } else {
    line += timestamp_text();
    line += ' ';
    line += log_level_name(level);
    line += ' ';
    line += component;
    line += ": ";
    line += message;
    line += '\n';
  }
  std::lock_guard lock(g_mutex);
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
}

bool parse_log_level(std::string_view text, LogLevel* out) {
  std::string lower;
  for (char c : text)
    lower.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  if (lower == "debug" || lower == "trace") {
    *out = LogLevel::debug;
  } else if (lower == "info") {
    *out = LogLevel::info;
  } else if (lower == "warn" || lower == "warning") {
    *out = LogLevel::warn;
  } else if (lower == "error") {
    *out = LogLevel::error;
  } else {
    return false;
  }
  return true;
}

}  // namespace queen::real
