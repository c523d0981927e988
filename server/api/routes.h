// The route table of the HTTP API: one row per method and path pattern, holding what the
// edge needs to know of it before and after the node: the access level a JWT must reach,
// whether it grows storage (the disk gate), its body limit, its parser and its renderer.
// Auth (server/auth.h), the disk gate and the HTTP layer read the row; nothing parses a body
// twice.
//
// Contract:
// - Patterns are literal segments, `:name` (one non-empty segment) and a final `*name` (the
//   non-empty rest, slashes kept); parameters are percent-decoded, a bad escape is a 400.
// - The first row whose method and pattern match wins. A path no row matches is a 404
//   no_such_route and needs admin access; OPTIONS on any path is a 204 (the CORS headers
//   are the HTTP layer's).
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "server/api/api.h"
#include "server/auth.h"

namespace queen::server {

// Whether a route adds to storage, so a full disk refuses it with 507 storage_full.
enum class Growth : uint8_t {
  none,
  always,      // refused before its body is read
  by_command,  // refused once parsed, if the command writes (admission.h: grows_storage)
};

// The server's QUEEN_MAX_BODY_BYTES, for the routes that carry messages.
constexpr uint64_t kBodyServerMax = 0;
// Every other route: a small JSON object, if any.
constexpr uint64_t kBodyBytesSmallMax = 64 * 1024;

using RouteParser = Parsed (*)(const RouteCall&);

struct Route {
  std::string_view method;
  std::string_view pattern;
  Access access = Access::admin;
  Growth grows = Growth::none;
  uint64_t body_bytes_max = kBodyBytesSmallMax;  // kBodyServerMax: the server's limit
  RouteParser parse = nullptr;
  RenderAs render = RenderAs::standard;  // the parser may choose another (Parsed::render)
};

std::span<const Route> route_table();

// The row for `method` and `path` (no query string); nullptr when none matches.
const Route* find_route(std::string_view method, std::string_view path);

// The level a request needs when JWT is on: its row's, admin when no row matches.
Access access_for(std::string_view method, std::string_view path);

// The parsed request, and the row that parsed it (nullptr: no route, or OPTIONS).
struct Routed {
  Parsed parsed;
  const Route* route = nullptr;
};
Routed route(std::string_view method, std::string_view target, std::string_view body,
             const EdgeSettings& settings, IdSource& ids);
Parsed route_request(std::string_view method, std::string_view target, std::string_view body,
                     const EdgeSettings& settings, IdSource& ids);

}  // namespace queen::server
