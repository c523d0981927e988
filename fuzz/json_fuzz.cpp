// Fuzz target: every JSON command parser of server/api/api.h (push, ack, ack batch, configure,
// lease extend, transaction, KV, single-key KV, locks, timers) on the input as a body, and
// the query-string parsers (pop, discovery pop, DLQ, timer delete and query) on it as a
// query string. None may throw or crash; each yields a command or a well-formed answer. The
// push body scanner (server/json_scan.h) never takes a value nlohmann/json refuses.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/common/assert.h"
#include "fuzz/fuzz_edge.h"
#include "server/json_scan.h"

namespace {

using namespace queen;
using namespace queen::server;

void parse_bodies(std::string_view body, const EdgeSettings& s, fuzz::FixedIds& ids) {
  fuzz::check_parsed(parse_push(body, s, ids));
  fuzz::check_parsed(parse_ack(body, s, ids));
  fuzz::check_parsed(parse_ack_batch(body, s, ids));
  fuzz::check_parsed(parse_configure(body, s, ids));
  fuzz::check_parsed(parse_lease_extend("0190a0b0-0000-7000-8000-000000000001", body, s, ids));
  fuzz::check_parsed(parse_transaction(body, s, ids));
  fuzz::check_parsed(parse_kv(body, s, ids));
  fuzz::check_parsed(parse_kv_single("PUT", "ns", "key", false, body, s, ids));
  fuzz::check_parsed(parse_locks(body, s, ids));
  fuzz::check_parsed(parse_timers(body, s, ids));
  fuzz::check_parsed(parse_trace_record(body, s, ids));
}

void parse_queries(std::string_view text, const EdgeSettings& s, fuzz::FixedIds& ids) {
  auto query = parse_query(text);
  if (!query) return;
  fuzz::check_parsed(parse_pop("q", std::nullopt, *query, s, ids));
  fuzz::check_parsed(parse_pop("q", std::string("p"), *query, s, ids));
  fuzz::check_parsed(parse_discovery_pop(*query, s, ids));
  fuzz::check_parsed(parse_dlq_query(*query, s, ids));
  fuzz::check_parsed(parse_trace_query(TraceQueryKind::names, {}, *query, s, ids));
  fuzz::check_parsed(parse_trace_query(TraceQueryKind::by_name, {"n"}, *query, s, ids));
  fuzz::check_parsed(parse_timer_delete("q", "k", *query, s, ids));
  fuzz::check_parsed(parse_timer_query("q", std::nullopt, *query, s, ids));
}

void scan_agrees(std::string_view text) {
  JsonScan s(text, kJsonDepthMax);
  std::string_view raw;
  if (!s.value(&raw) || !s.at_end()) return;
  QUEEN_ASSERT(json_depth(text, kJsonDepthMax) <= kJsonDepthMax && nlohmann::json::accept(text),
               "the scanner took a value nlohmann/json refuses");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  EdgeSettings settings;
  fuzz::FixedIds ids;
  parse_bodies(text, settings, ids);
  parse_queries(text, settings, ids);
  scan_agrees(text);
  (void)json_depth(text, kJsonDepthMax);
  (void)utf8_lossy(text);
  return 0;
}
