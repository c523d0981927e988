// queenctl: the broker's command-line client (ctl/commands.h lists what it does).
#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "ctl/commands.h"

int main(int argc, char** argv) {
  using namespace queen::ctl;
  std::string error;
  auto args = parse_args(argc, argv, &error);
  if (!args) {
    std::fprintf(stderr, "queenctl: %s\n", error.c_str());
    return kUsage;
  }
  if (args->flag("help") || args->positional.empty()) {
    std::cout << usage();
    return args->flag("help") ? kOk : kUsage;
  }
  const char* env_url = std::getenv("QUEEN_URL");
  const char* env_token = std::getenv("QUEEN_TOKEN");
  std::string url_text = args->option_or("url", env_url ? env_url : "http://127.0.0.1:6632");
  auto url = parse_url(url_text, &error);
  if (!url) {
    std::fprintf(stderr, "queenctl: %s\n", error.c_str());
    return kUsage;
  }
  auto timeout_ms = int_option(*args, "timeout-ms", 30000, &error);
  if (!timeout_ms) {
    std::fprintf(stderr, "queenctl: %s\n", error.c_str());
    return kUsage;
  }
  HttpClient http(*url, args->option_or("token", env_token ? env_token : ""), *timeout_ms);
  Ctl ctl{http, *args, args->flag("json")};
  return run_command(ctl);
}
