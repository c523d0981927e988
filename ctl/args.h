// queenctl's command line: options anywhere (`--name value`, `--name=value`, flags), the rest
// positional; QUEEN_URL and QUEEN_TOKEN as defaults for --url and --token.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace queen::ctl {

struct Args {
  std::vector<std::string> positional;  // the command first
  std::map<std::string, std::string> options;
  std::set<std::string> flags;

  bool flag(const std::string& name) const { return flags.count(name) > 0; }
  std::optional<std::string> option(const std::string& name) const;
  std::string option_or(const std::string& name, const std::string& fallback) const;
};

// nullopt with `error` set on an unknown option or one missing its value.
std::optional<Args> parse_args(int argc, char** argv, std::string* error);

// A positive integer option, or `fallback` when absent; nullopt with `error` when malformed.
std::optional<int64_t> int_option(const Args& a, const std::string& name, int64_t fallback,
                                  std::string* error);

}  // namespace queen::ctl
