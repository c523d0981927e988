#include "ctl/args.h"

#include <charconv>

namespace queen::ctl {
namespace {

const std::set<std::string> kValued = {
    "url",  "token",  "group", "partition", "batch",      "limit",   "offset", "search",
    "file", "status", "error", "lease",     "timeout-ms", "count",   "queue",  "ttl",
    "id",   "raft",   "http",  "namespace", "task",       "interval"};
const std::set<std::string> kFlags = {"json", "wait", "ack", "follow",     "progress",
                                      "all",  "help", "yes", "no-progress"};

}  // namespace

std::optional<std::string> Args::option(const std::string& name) const {
  auto it = options.find(name);
  if (it == options.end()) return std::nullopt;
  return it->second;
}

std::string Args::option_or(const std::string& name, const std::string& fallback) const {
  return option(name).value_or(fallback);
}

std::optional<Args> parse_args(int argc, char** argv, std::string* error) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "-f") arg = "--follow";
    if (arg == "-h") arg = "--help";
    if (arg == "-" || arg.rfind("--", 0) != 0) {
      a.positional.push_back(arg);
      continue;
    }
    std::string name = arg.substr(2), value;
    size_t eq = name.find('=');
    bool inline_value = eq != std::string::npos;
    if (inline_value) value = name.substr(eq + 1), name = name.substr(0, eq);
    if (kFlags.count(name) && !inline_value) {
      a.flags.insert(name);
    } else if (kValued.count(name)) {
      if (!inline_value) {
        if (i + 1 >= argc) return *error = "--" + name + " needs a value", std::nullopt;
        value = argv[++i];
      }
      a.options[name] = value;
    } else {
      return *error = "unknown option --" + name + " (see queenctl --help)", std::nullopt;
    }
  }
  return a;
}

std::optional<int64_t> int_option(const Args& a, const std::string& name, int64_t fallback,
                                  std::string* error) {
  auto text = a.option(name);
  if (!text) return fallback;
  int64_t v = 0;
  auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), v);
  if (ec != std::errc() || end != text->data() + text->size() || v < 0) {
    *error = "--" + name + " must be a non-negative integer (got '" + *text + "')";
    return std::nullopt;
  }
  return v;
}

}  // namespace queen::ctl
