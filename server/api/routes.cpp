// The route table (server/api/routes.h): its rows, the matcher and the dispatch.
#include "server/api/routes.h"

#include <array>
#include <optional>
#include <string>
#include <vector>

#include "server/api/common.h"
#include "server/console.h"

namespace queen::server {
namespace {

using A = Access;
using G = Growth;
constexpr uint64_t kServer = kBodyServerMax;
constexpr uint64_t kSmall = kBodyBytesSmallMax;

// The parser of a row that reads only the body.
template <Parsed (*F)(std::string_view, const EdgeSettings&, IdSource&)>
Parsed body_parser(const RouteCall& c) {
  return F(c.body, c.settings, c.ids);
}

// The parser of a row that reads nothing of the request (an empty body is as good as any).
template <Parsed (*F)(const EdgeSettings&, IdSource&)>
Parsed bare_parser(const RouteCall& c) {
  return F(c.settings, c.ids);
}

template <Parsed (*F)(const QueryParams&, const EdgeSettings&, IdSource&)>
Parsed query_parser(const RouteCall& c) {
  return F(c.query, c.settings, c.ids);
}

// The parser of a row whose two path parameters name a message (partitionId, transactionId).
template <Parsed (*F)(const std::string&, const std::string&, const EdgeSettings&, IdSource&)>
Parsed message_parser(const RouteCall& c) {
  return F(c.params.at(0), c.params.at(1), c.settings, c.ids);
}

Parsed console(const RouteCall& c) {
  return answer_now(console_page(c.settings.console_dir));
}
Parsed metrics_json(const RouteCall& c) {
  return parse_metrics(c.settings, c.ids, RenderAs::metrics_json);
}
Parsed metrics_text(const RouteCall& c) {
  return parse_metrics(c.settings, c.ids);
}
Parsed maintenance(const RouteCall& c) {
  return parse_maintenance(c.method, false, c.body, c.settings, c.ids);
}
Parsed maintenance_pop(const RouteCall& c) {
  return parse_maintenance(c.method, true, c.body, c.settings, c.ids);
}
template <char W>
Parsed membership(const RouteCall& c) {
  static constexpr std::string_view kWhat[] = {"membership", "learners", "promote", "voters",
                                               "members"};
  std::string none;
  return parse_membership(c.method, kWhat[W - '0'], c.params.empty() ? none : c.params.at(0),
                          c.body, c.query, c.settings, c.ids);
}
Parsed pop_queue(const RouteCall& c) {
  return parse_pop(c.params.at(0), std::nullopt, c.query, c.settings, c.ids);
}
Parsed pop_partition(const RouteCall& c) {
  return parse_pop(c.params.at(0), c.params.at(1), c.query, c.settings, c.ids);
}
Parsed lease_extend(const RouteCall& c) {
  return parse_lease_extend(c.params.at(0), c.body, c.settings, c.ids);
}
Parsed dlq_replay(const RouteCall& c) {
  return parse_dlq_replay(c.params.at(0), c.settings, c.ids);
}
Parsed kv_single(const RouteCall& c) {
  return parse_kv_single(c.method, c.params.at(0), c.params.at(1), c.has_query, c.body, c.settings,
                         c.ids);
}
Parsed timer_list(const RouteCall& c) {
  return parse_timer_query(c.params.at(0), std::nullopt, c.query, c.settings, c.ids);
}
Parsed timer_peek(const RouteCall& c) {
  return parse_timer_query(c.params.at(0), c.params.at(1), c.query, c.settings, c.ids);
}
Parsed timer_delete(const RouteCall& c) {
  return parse_timer_delete(c.params.at(0), c.params.at(1), c.query, c.settings, c.ids);
}
Parsed queue_list(const RouteCall& c) {
  return parse_queue_route(c.method, "", c.query, c.settings, c.ids);
}
Parsed queue_one(const RouteCall& c) {
  return parse_queue_route(c.method, c.params.at(0), c.query, c.settings, c.ids);
}
Parsed namespaces(const RouteCall& c) {
  return parse_queue_rollup(RenderAs::namespaces, c.settings, c.ids);
}
Parsed tasks(const RouteCall& c) {
  return parse_queue_rollup(RenderAs::tasks, c.settings, c.ids);
}
// The status family: one parser; `R` names the route (server/api/status.cpp).
template <const char* R>
Parsed status(const RouteCall& c) {
  std::string none;
  return parse_status(R, c.params.empty() ? none : c.params.at(0), c.query, c.settings, c.ids);
}
constexpr char kStatus[] = "status";
constexpr char kStatusQueues[] = "status/queues";
constexpr char kStatusQueue[] = "status/queue";
constexpr char kStatusMessages[] = "status/queues/messages";
constexpr char kStatusAnalytics[] = "status/analytics";
constexpr char kStatusBuffers[] = "status/buffers";
constexpr char kOverview[] = "resources/overview";
constexpr char kSystemMetrics[] = "analytics/system-metrics";
constexpr char kWorkerMetrics[] = "analytics/worker-metrics";
constexpr char kQueueLag[] = "analytics/queue-lag";
constexpr char kQueueOps[] = "analytics/queue-ops";
constexpr char kStatsRefresh[] = "stats/refresh";
constexpr char kRetention[] = "analytics/retention";
constexpr char kParked[] = "analytics/queue-parked-replicas";
constexpr char kPostgres[] = "analytics/postgres-stats";

Parsed trace_names(const RouteCall& c) {
  return parse_trace_query(TraceQueryKind::names, c.params, c.query, c.settings, c.ids);
}
Parsed trace_by_name(const RouteCall& c) {
  return parse_trace_query(TraceQueryKind::by_name, c.params, c.query, c.settings, c.ids);
}
Parsed trace_message(const RouteCall& c) {
  return parse_trace_query(TraceQueryKind::message, c.params, c.query, c.settings, c.ids);
}

// Read by the 2.x clients and the reference; the first match wins, so a literal segment
// comes before a parameter in the same place.
constexpr auto kRoutes = std::to_array<Route>({
    // system
    {"GET", "/", A::read_only, G::none, kSmall, console},
    {"GET", "/health", A::read_only, G::none, kSmall, bare_parser<parse_health>},
    {"GET", "/metrics", A::read_only, G::none, kSmall, metrics_json, RenderAs::metrics_json},
    {"GET", "/metrics/prometheus", A::read_only, G::none, kSmall, metrics_text},
    {"GET", "/api/v1/system/maintenance", A::admin, G::none, kSmall, maintenance},
    {"POST", "/api/v1/system/maintenance", A::admin, G::none, kSmall, maintenance},
    {"GET", "/api/v1/system/maintenance/pop", A::admin, G::none, kSmall, maintenance_pop},
    {"POST", "/api/v1/system/maintenance/pop", A::admin, G::none, kSmall, maintenance_pop},
    {"GET", "/api/v1/system/raft/membership", A::admin, G::none, kSmall, membership<'0'>},
    {"POST", "/api/v1/system/raft/learners", A::admin, G::none, kSmall, membership<'1'>},
    {"POST", "/api/v1/system/raft/promote", A::admin, G::none, kSmall, membership<'2'>},
    {"PUT", "/api/v1/system/raft/voters", A::admin, G::none, kSmall, membership<'3'>},
    {"DELETE", "/api/v1/system/raft/members/:id", A::admin, G::none, kSmall, membership<'4'>},
    // push, pop, ack, transactions, leases
    {"POST", "/api/v1/push", A::write_only, G::always, kServer, body_parser<parse_push>},
    {"GET", "/api/v1/pop", A::read_write, G::none, kSmall, query_parser<parse_discovery_pop>},
    {"GET", "/api/v1/pop/queue/:queue", A::read_write, G::none, kSmall, pop_queue},
    {"GET", "/api/v1/pop/queue/:queue/partition/:partition", A::read_write, G::none, kSmall,
     pop_partition},
    {"POST", "/api/v1/ack", A::read_write, G::none, kServer, body_parser<parse_ack>},
    {"POST", "/api/v1/ack/batch", A::read_write, G::none, kServer, body_parser<parse_ack_batch>},
    {"POST", "/api/v1/transaction", A::read_write, G::by_command, kServer,
     body_parser<parse_transaction>},
    {"POST", "/api/v1/lease/:leaseId/extend", A::read_write, G::none, kSmall, lease_extend},
    // reads by offset: no lease, no cursor
    {"POST", "/api/v1/fetch", A::read_only, G::none, kSmall, body_parser<parse_fetch>},
    {"POST", "/api/v1/fetch/offsets", A::read_only, G::none, kSmall,
     body_parser<parse_fetch_offsets>},
    {"POST", "/api/v1/partitions/changed", A::read_only, G::none, kSmall,
     body_parser<parse_partitions_changed>},
    // KV, locks, timers
    {"POST", "/api/v1/kv", A::read_write, G::by_command, kServer, body_parser<parse_kv>},
    {"GET", "/api/v1/kv/:ns/:key", A::read_only, G::none, kSmall, kv_single},
    {"PUT", "/api/v1/kv/:ns/:key", A::read_write, G::always, kServer, kv_single},
    {"DELETE", "/api/v1/kv/:ns/:key", A::read_write, G::none, kSmall, kv_single},
    {"POST", "/api/v1/locks", A::read_write, G::none, kServer, body_parser<parse_locks>},
    {"POST", "/api/v1/timers", A::write_only, G::by_command, kServer, body_parser<parse_timers>},
    {"GET", "/api/v1/timers/:queue", A::read_only, G::none, kSmall, timer_list},
    {"GET", "/api/v1/timers/:queue/*timerKey", A::read_only, G::none, kSmall, timer_peek},
    {"DELETE", "/api/v1/timers/:queue/*timerKey", A::read_write, G::none, kSmall, timer_delete},
    // queues
    {"POST", "/api/v1/configure", A::read_write, G::none, kSmall, body_parser<parse_configure>},
    {"GET", "/api/v1/resources/queues", A::read_only, G::none, kSmall, queue_list},
    {"GET", "/api/v1/resources/queues/:queue", A::read_only, G::none, kSmall, queue_one},
    {"DELETE", "/api/v1/resources/queues/:queue", A::admin, G::none, kSmall, queue_one},
    {"GET", "/api/v1/resources/overview", A::read_only, G::none, kSmall, status<kOverview>},
    {"GET", "/api/v1/resources/namespaces", A::read_only, G::none, kSmall, namespaces},
    {"GET", "/api/v1/resources/tasks", A::read_only, G::none, kSmall, tasks},
    // consumer groups
    {"GET", "/api/v1/status", A::read_only, G::none, kSmall, status<kStatus>},
    {"GET", "/api/v1/status/queues", A::read_only, G::none, kSmall, status<kStatusQueues>},
    {"GET", "/api/v1/status/queues/:queue", A::read_only, G::none, kSmall, status<kStatusQueue>},
    {"GET", "/api/v1/status/queues/:queue/messages", A::read_only, G::none, kSmall,
     status<kStatusMessages>},
    {"GET", "/api/v1/status/analytics", A::read_only, G::none, kSmall, status<kStatusAnalytics>},
    {"GET", "/api/v1/status/buffers", A::read_only, G::none, kSmall, status<kStatusBuffers>},
    {"GET", "/api/v1/analytics/system-metrics", A::read_only, G::none, kSmall,
     status<kSystemMetrics>},
    {"GET", "/api/v1/analytics/worker-metrics", A::read_only, G::none, kSmall,
     status<kWorkerMetrics>},
    {"GET", "/api/v1/analytics/queue-lag", A::read_only, G::none, kSmall, status<kQueueLag>},
    {"GET", "/api/v1/analytics/queue-ops", A::read_only, G::none, kSmall, status<kQueueOps>},
    {"POST", "/api/v1/stats/refresh", A::admin, G::none, kSmall, status<kStatsRefresh>},
    {"GET", "/api/v1/analytics/retention", A::read_only, G::none, kSmall, status<kRetention>},
    {"GET", "/api/v1/analytics/queue-parked-replicas", A::read_only, G::none, kSmall,
     status<kParked>},
    {"GET", "/api/v1/analytics/postgres-stats", A::read_only, G::none, kSmall, status<kPostgres>},

    {"GET", "/api/v1/consumer-groups", A::read_only, G::none, kSmall, parse_group_list},
    {"GET", "/api/v1/consumer-groups/lagging", A::read_only, G::none, kSmall, parse_group_lagging},
    {"GET", "/api/v1/consumer-groups/:group", A::read_only, G::none, kSmall, parse_group_details},
    {"DELETE", "/api/v1/consumer-groups/:group", A::admin, G::none, kSmall, parse_group_delete},
    {"DELETE", "/api/v1/consumer-groups/:group/queues/:queue", A::admin, G::none, kSmall,
     parse_group_delete},
    {"POST", "/api/v1/consumer-groups/:group/subscription", A::read_write, G::none, kSmall,
     parse_group_subscription},
    {"POST", "/api/v1/consumer-groups/:group/queues/:queue/seek", A::read_write, G::none, kSmall,
     parse_group_seek},
    {"POST", "/api/v1/consumer-groups/:group/queues/:queue/partitions/:partition/seek",
     A::read_write, G::none, kSmall, parse_partition_seek},
    // dead letters and messages
    {"GET", "/api/v1/dlq", A::read_only, G::none, kSmall, query_parser<parse_dlq_query>},
    {"POST", "/api/v1/dlq/:id/replay", A::read_write, G::none, kSmall, dlq_replay},
    {"GET", "/api/v1/messages", A::read_only, G::none, kSmall, query_parser<parse_message_browse>},
    {"GET", "/api/v1/messages/:partitionId/:transactionId", A::read_only, G::none, kSmall,
     message_parser<parse_message_get>},
    {"DELETE", "/api/v1/messages/:partitionId/:transactionId", A::admin, G::none, kSmall,
     message_parser<parse_message_delete>},
    {"POST", "/api/v1/messages/:partitionId/:transactionId/retry", A::read_write, G::none, kSmall,
     message_parser<parse_message_retry>},
    // traces
    {"POST", "/api/v1/traces", A::read_write, G::none, kServer, body_parser<parse_trace_record>},
    {"GET", "/api/v1/traces/names", A::read_only, G::none, kSmall, trace_names},
    {"GET", "/api/v1/traces/by-name/:name", A::read_only, G::none, kSmall, trace_by_name},
    {"GET", "/api/v1/traces/:partitionId/:transactionId", A::read_only, G::none, kSmall,
     trace_message},
});

// The next segment of `path` after position `*at` (which sits on a '/'); false at the end.
bool next_segment(std::string_view path, size_t* at, std::string_view* seg) {
  if (*at >= path.size() || path[*at] != '/') return false;
  size_t start = *at + 1;
  size_t slash = path.find('/', start);
  if (slash == std::string_view::npos) slash = path.size();
  *seg = path.substr(start, slash - start);
  *at = slash;
  return true;
}

enum class Match : uint8_t { no, yes, bad_escape };

// Matches `path` against `pattern`; on a match `params` holds the decoded parameters.
Match match(std::string_view pattern, std::string_view path, std::vector<std::string>* params) {
  size_t p_at = 0, at = 0;
  std::string_view want, seg;
  bool bad = false;
  auto take = [&](std::string_view raw) {
    auto decoded = percent_decode(raw, /*plus_is_space=*/false);
    if (!decoded) bad = true;
    if (params) params->push_back(decoded.value_or(""));
  };
  while (next_segment(pattern, &p_at, &want)) {
    if (want[0] == '*') {  // the rest of the path, at least one character
      if (at >= path.size() || at + 1 >= path.size()) return Match::no;
      take(path.substr(at + 1));
      return bad ? Match::bad_escape : Match::yes;
    }
    if (!next_segment(path, &at, &seg)) return Match::no;
    if (want[0] == ':') {
      if (seg.empty()) return Match::no;
      take(seg);
    } else if (want != seg) {
      return Match::no;
    }
  }
  if (at != path.size()) return Match::no;
  return bad ? Match::bad_escape : Match::yes;
}

const Route* find(std::string_view method, std::string_view path, std::vector<std::string>* params,
                  Match* how) {
  for (const Route& r : kRoutes) {
    if (r.method != method) continue;
    if (params) params->clear();
    Match m = match(r.pattern, path, params);
    if (m == Match::no) continue;
    *how = m;
    return &r;
  }
  *how = Match::no;
  return nullptr;
}

Parsed no_route(std::string_view method, std::string_view path) {
  std::string shown = valid_utf8(path) ? std::string(path) : "<path that is not UTF-8>";
  return answer_now(
      error_answer(404, "no_such_route", "no route for " + std::string(method) + " " + shown));
}

}  // namespace

std::span<const Route> route_table() {
  return kRoutes;
}

const Route* find_route(std::string_view method, std::string_view path) {
  Match how;
  return find(method, path, nullptr, &how);
}

Access access_for(std::string_view method, std::string_view path) {
  const Route* r = find_route(method, path);
  return r ? r->access : Access::admin;
}

Routed route(std::string_view method, std::string_view target, std::string_view body,
             const EdgeSettings& settings, IdSource& ids) {
  size_t question = target.find('?');
  std::string_view path = target.substr(0, question);
  std::string_view raw_query =
      question == std::string_view::npos ? std::string_view() : target.substr(question + 1);
  if (method == "OPTIONS") return {answer_now(HttpAnswer{204, "", 0}), nullptr};
  auto query = parse_query(raw_query);
  if (!query) return {answer_now(error_answer(400, "bad_request", "bad query string encoding"))};
  std::vector<std::string> params;
  Match how;
  const Route* r = find(method, path, &params, &how);
  if (!r) return {no_route(method, path)};
  if (how == Match::bad_escape)
    return {answer_now(error_answer(400, "bad_request", "bad percent-encoding in path")), r};
  RouteCall call{method, params, *query, question != std::string_view::npos, body, settings, ids};
  Routed out{r->parse(call), r};
  if (out.parsed.command && out.parsed.render == RenderAs::standard) out.parsed.render = r->render;
  return out;
}

Parsed route_request(std::string_view method, std::string_view target, std::string_view body,
                     const EdgeSettings& settings, IdSource& ids) {
  return route(method, target, body, settings, ids).parsed;
}

}  // namespace queen::server
