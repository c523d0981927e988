// queenctl's commands: each reads its arguments, speaks the node's public HTTP API and prints
// a table (or with --json the node's answers, one JSON document per line), returning an exit
// code from ctl/output.h.
#pragma once

#include <string>

#include "ctl/args.h"
#include "ctl/http_client.h"
#include "ctl/output.h"

namespace queen::ctl {

struct Ctl {
  HttpClient& http;
  const Args& args;
  bool as_json = false;
};

// The command named by args.positional[0]; kUsage for an unknown one.
int run_command(Ctl& c);
// The usage text (queenctl --help).
std::string usage();

}  // namespace queen::ctl
