#include "server/routes.h"

#include <string>
#include <vector>

namespace queen::server {
namespace {

constexpr std::string_view kPopPrefix = "/api/v1/pop/queue/";
constexpr std::string_view kLeasePrefix = "/api/v1/lease/";
constexpr std::string_view kExtendSuffix = "/extend";

Parsed answer_now(HttpAnswer answer) {
  Parsed p;
  p.answer = std::move(answer);
  return p;
}

Parsed no_route(std::string_view method, std::string_view path) {
  std::string shown = valid_utf8(path) ? std::string(path) : "<path that is not UTF-8>";
  return answer_now(
      error_answer(404, "no_such_route", "no route for " + std::string(method) + " " + shown));
}

// Splits "a/b/c" into its percent-decoded segments; nullopt when one cannot be decoded.
std::optional<std::vector<std::string>> decoded_segments(std::string_view rest) {
  std::vector<std::string> out;
  while (true) {
    size_t slash = rest.find('/');
    auto seg = percent_decode(rest.substr(0, slash), /*plus_is_space=*/false);
    if (!seg) return std::nullopt;
    out.push_back(std::move(*seg));
    if (slash == std::string_view::npos) break;
    rest = rest.substr(slash + 1);
  }
  return out;
}

// GET /api/v1/pop/queue/:queue[/partition/:partition]
Parsed route_pop(std::string_view method, std::string_view path, const QueryParams& query,
                 const EdgeSettings& settings, IdSource& ids) {
  auto segments = decoded_segments(path.substr(kPopPrefix.size()));
  if (!segments)
    return answer_now(error_answer(400, "bad_request", "bad percent-encoding in path"));
  const auto& s = *segments;
  if (s.size() == 1 && !s[0].empty()) return parse_pop(s[0], std::nullopt, query, settings, ids);
  if (s.size() == 3 && !s[0].empty() && s[1] == "partition" && !s[2].empty()) {
    return parse_pop(s[0], s[2], query, settings, ids);
  }
  return no_route(method, path);
}

}  // namespace

Parsed route_request(std::string_view method, std::string_view target, std::string_view body,
                     const EdgeSettings& settings, IdSource& ids) {
  size_t question = target.find('?');
  std::string_view path = target.substr(0, question);
  std::string_view raw_query =
      question == std::string_view::npos ? std::string_view() : target.substr(question + 1);
  if (method == "OPTIONS") return answer_now(HttpAnswer{204, "", 0});
  auto query = parse_query(raw_query);
  if (!query) return answer_now(error_answer(400, "bad_request", "bad query string encoding"));

  if (method == "GET") {
    if (path == "/health") return parse_health(settings, ids);
    if (path.substr(0, kPopPrefix.size()) == kPopPrefix) {
      return route_pop(method, path, *query, settings, ids);
    }
    if (path == "/api/v1/dlq") return parse_dlq_query(*query, settings, ids);
    if (path == "/api/v1/pop") return parse_discovery_pop(*query, settings, ids);
  } else if (method == "POST") {
    if (path == "/api/v1/push") return parse_push(body, settings, ids);
    if (path == "/api/v1/ack") return parse_ack(body, settings, ids);
    if (path == "/api/v1/ack/batch") return parse_ack_batch(body, settings, ids);
    if (path == "/api/v1/configure") return parse_configure(body, settings, ids);
    if (path.size() > kLeasePrefix.size() + kExtendSuffix.size() &&
        path.substr(0, kLeasePrefix.size()) == kLeasePrefix &&
        path.substr(path.size() - kExtendSuffix.size()) == kExtendSuffix) {
      std::string_view id = path.substr(kLeasePrefix.size(),
                                        path.size() - kLeasePrefix.size() - kExtendSuffix.size());
      return parse_lease_extend(std::string(id), body, settings, ids);
    }
  }
  return no_route(method, path);
}

}  // namespace queen::server
