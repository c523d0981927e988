// The route table of the HTTP API: method and target in, a parsed request out (a command
// for the node or an answer to send now). Unknown methods and paths are 404 no_such_route;
// OPTIONS on any path is a 204 (the CORS headers are added by the HTTP layer).
#pragma once

#include <string_view>

#include "server/codec.h"

namespace queen::server {

Parsed route_request(std::string_view method, std::string_view target, std::string_view body,
                     const EdgeSettings& settings, IdSource& ids);

}  // namespace queen::server
