#include "server/routes.h"

#include <optional>
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

constexpr std::string_view kKvPrefix = "/api/v1/kv/";
constexpr std::string_view kTimersPrefix = "/api/v1/timers/";

bool starts_with(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

// GET, PUT and DELETE /api/v1/kv/:ns/:key
Parsed route_kv_single(std::string_view method, std::string_view path, bool has_query,
                       std::string_view body, const EdgeSettings& settings, IdSource& ids) {
  auto segments = decoded_segments(path.substr(kKvPrefix.size()));
  if (!segments)
    return answer_now(error_answer(400, "bad_request", "bad percent-encoding in path"));
  const auto& s = *segments;
  if (s.size() != 2 || s[0].empty() || s[1].empty()) return no_route(method, path);
  return parse_kv_single(method, s[0], s[1], has_query, body, settings, ids);
}

// GET /api/v1/timers/:queue[/:timerKey] and DELETE /api/v1/timers/:queue/:timerKey
Parsed route_timers(std::string_view method, std::string_view path, const QueryParams& query,
                    const EdgeSettings& settings, IdSource& ids) {
  auto segments = decoded_segments(path.substr(kTimersPrefix.size()));
  if (!segments)
    return answer_now(error_answer(400, "bad_request", "bad percent-encoding in path"));
  const auto& s = *segments;
  if (s.empty() || s[0].empty()) return no_route(method, path);
  // The timer key is the rest of the path: clients leave its slashes literal.
  std::optional<std::string> key;
  for (size_t i = 1; i < s.size(); ++i) key = key ? *key + "/" + s[i] : s[i];
  if (key && key->empty()) return no_route(method, path);
  if (method == "DELETE") {
    if (!key) return no_route(method, path);
    return parse_timer_delete(s[0], *key, query, settings, ids);
  }
  return parse_timer_query(s[0], key, query, settings, ids);
}

constexpr std::string_view kGroupsPath = "/api/v1/consumer-groups";
constexpr std::string_view kQueuesPath = "/api/v1/resources/queues";
constexpr std::string_view kDlqPrefix = "/api/v1/dlq/";
constexpr std::string_view kReplaySuffix = "/replay";

// The segments after `base` ("" or "/a/b"); nullopt when the path is not under it.
std::optional<std::vector<std::string>> segments_after(std::string_view path, std::string_view base,
                                                       bool* bad) {
  if (!starts_with(path, base)) return std::nullopt;
  std::string_view rest = path.substr(base.size());
  if (rest.empty()) return std::vector<std::string>{};
  if (rest[0] != '/') return std::nullopt;
  auto s = decoded_segments(rest.substr(1));
  if (!s) *bad = true;
  return s ? s : std::vector<std::string>{};
}

// POST /api/v1/traces; GET .../names, .../by-name/:name, .../:partitionId/:transactionId.
Parsed route_traces(std::string_view method, std::string_view path,
                    const std::vector<std::string>& s, const QueryParams& query,
                    std::string_view body, const EdgeSettings& settings, IdSource& ids) {
  for (const auto& seg : s) {
    if (seg.empty()) return no_route(method, path);
  }
  if (method == "POST" && s.empty()) return parse_trace_record(body, settings, ids);
  if (method != "GET") return no_route(method, path);
  if (s.size() == 1 && s[0] == "names")
    return parse_trace_query(TraceQueryKind::names, s, query, settings, ids);
  if (s.size() == 2 && s[0] == "by-name") {
    return parse_trace_query(TraceQueryKind::by_name, {s[1]}, query, settings, ids);
  }
  if (s.size() == 2) return parse_trace_query(TraceQueryKind::message, s, query, settings, ids);
  return no_route(method, path);
}

// Consumer groups, DLQ replay and queue administration; nullopt when none matches.
std::optional<Parsed> route_admin(std::string_view method, std::string_view path,
                                  const QueryParams& query, std::string_view body,
                                  const EdgeSettings& settings, IdSource& ids) {
  bool bad = false;
  auto undecodable = [] {
    return answer_now(error_answer(400, "bad_request", "bad percent-encoding in path"));
  };
  if (auto s = segments_after(path, kGroupsPath, &bad)) {
    if (bad) return undecodable();
    for (const auto& seg : *s) {
      if (seg.empty()) return no_route(method, path);
    }
    if (s->empty() && method != "GET") return no_route(method, path);
    return parse_group_route(method, *s, query, body, settings, ids);
  }
  if (auto s = segments_after(path, kQueuesPath, &bad)) {
    if (bad) return undecodable();
    if (s->size() > 1 || (s->size() == 1 && (*s)[0].empty())) return no_route(method, path);
    if (method == "DELETE" && s->empty()) return no_route(method, path);
    if (method != "GET" && method != "DELETE") return no_route(method, path);
    return parse_queue_route(method, s->empty() ? "" : (*s)[0], query, settings, ids);
  }
  if (method == "GET") {
    if (auto s = segments_after(path, "/api/v1/messages", &bad)) {
      if (bad) return undecodable();
      if (s->empty()) return parse_message_browse(query, settings, ids);
      if (s->size() == 2 && !(*s)[0].empty() && !(*s)[1].empty()) {
        return parse_message_get((*s)[0], (*s)[1], settings, ids);
      }
      return no_route(method, path);
    }
    if (path == "/api/v1/resources/namespaces") {
      return parse_queue_rollup(RenderAs::namespaces, settings, ids);
    }
    if (path == "/api/v1/resources/tasks") {
      return parse_queue_rollup(RenderAs::tasks, settings, ids);
    }
  }
  if (method == "DELETE") {
    if (auto s = segments_after(path, "/api/v1/messages", &bad)) {
      if (bad) return undecodable();
      if (s->size() == 2 && !(*s)[0].empty() && !(*s)[1].empty()) {
        return parse_message_delete((*s)[0], (*s)[1], settings, ids);
      }
      return no_route(method, path);
    }
  }
  if (method == "POST") {
    if (auto s = segments_after(path, "/api/v1/messages", &bad)) {
      if (bad) return undecodable();
      if (s->size() == 3 && !(*s)[0].empty() && !(*s)[1].empty() && (*s)[2] == "retry")
        return parse_message_retry((*s)[0], (*s)[1], settings, ids);
      return no_route(method, path);
    }
  }
  if (auto s = segments_after(path, "/api/v1/traces", &bad)) {
    if (bad) return undecodable();
    return route_traces(method, path, *s, query, body, settings, ids);
  }
  if (method == "POST" && starts_with(path, kDlqPrefix) &&
      path.size() > kDlqPrefix.size() + kReplaySuffix.size() &&
      path.substr(path.size() - kReplaySuffix.size()) == kReplaySuffix) {
    std::string_view id =
        path.substr(kDlqPrefix.size(), path.size() - kDlqPrefix.size() - kReplaySuffix.size());
    return parse_dlq_replay(std::string(id), settings, ids);
  }
  return std::nullopt;
}

// The routes of KV, locks, timers and transactions; nullopt when none matches.
std::optional<Parsed> route_state(std::string_view method, std::string_view path, bool has_query,
                                  const QueryParams& query, std::string_view body,
                                  const EdgeSettings& settings, IdSource& ids) {
  if (method == "POST") {
    if (path == "/api/v1/transaction") return parse_transaction(body, settings, ids);
    if (path == "/api/v1/fetch") return parse_fetch(body, settings, ids);
    if (path == "/api/v1/fetch/offsets") return parse_fetch_offsets(body, settings, ids);
    if (path == "/api/v1/partitions/changed") return parse_partitions_changed(body, settings, ids);
    if (path == "/api/v1/kv") return parse_kv(body, settings, ids);
    if (path == "/api/v1/locks") return parse_locks(body, settings, ids);
    if (path == "/api/v1/timers") return parse_timers(body, settings, ids);
    return std::nullopt;
  }
  bool kv_method = method == "GET" || method == "PUT" || method == "DELETE";
  if (kv_method && starts_with(path, kKvPrefix)) {
    return route_kv_single(method, path, has_query, body, settings, ids);
  }
  if ((method == "GET" || method == "DELETE") && starts_with(path, kTimersPrefix)) {
    return route_timers(method, path, query, settings, ids);
  }
  return std::nullopt;
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
  bool has_query = question != std::string_view::npos;
  if (auto state = route_state(method, path, has_query, *query, body, settings, ids)) {
    return std::move(*state);
  }
  if (auto admin = route_admin(method, path, *query, body, settings, ids)) {
    return std::move(*admin);
  }

  if (method == "GET" || method == "POST") {
    if (path == "/api/v1/system/maintenance")
      return parse_maintenance(method, false, body, settings, ids);
    if (path == "/api/v1/system/maintenance/pop")
      return parse_maintenance(method, true, body, settings, ids);
  }
  if (method == "GET") {
    if (path == "/health") return parse_health(settings, ids);
    if (path == "/metrics/prometheus") return parse_metrics(settings, ids);
    if (path == "/metrics") return parse_metrics(settings, ids, RenderAs::metrics_json);
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
