// The wire format of the HTTP API: request bodies and query strings in, prepared commands
// out; typed replies in, status codes and JSON bodies out. No sockets here (http_server.h)
// and no routing (routes.h).
//
// Contract:
// - A parse either yields a command envelope for the node (ids minted, transactionIds hashed
//   with xxh3-128, payloads as compact JSON text, a deadline) or an answer to send at once
//   (400 naming the offending field, 413 name_too_long, an empty push's 201 []).
// - Malformed input of any size or shape gives a 400, never an exception past this module;
//   JSON nesting deeper than kJsonDepthMax is refused before it is parsed.
// - Rendering splices stored payloads raw; it never parses them again.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "core/node/command.h"
#include "server/config.h"

namespace queen::server {

constexpr size_t kJsonDepthMax = 256;
constexpr size_t kNameBytesMax = 447;  // queue + partition (or group)
constexpr size_t kTransactionIdBytesMax = 65535;
constexpr uint32_t kPopBatchMax = 10000;
constexpr uint32_t kPopBatchDefault = 200;
constexpr uint32_t kPopPartitionsMax = 64;
constexpr uint32_t kDlqLimitDefault = 100;
constexpr int64_t kLeaseExtendSecondsMax = 86400;
constexpr uint32_t kDlqLimitMax = 10000;
constexpr const char* kQueueModeGroup = "__QUEUE_MODE__";
constexpr const char* kVersion = "0.1.0";

// Time and randomness for the ids an edge thread mints.
class IdSource {
 public:
  virtual ~IdSource() = default;
  virtual int64_t now_ms() = 0;
  virtual uint64_t random_u64() = 0;
};

struct HttpAnswer {
  unsigned status = 200;
  std::string body;  // empty for 204
  int retry_after_s = 0;
};

// What the edge does with a request: hand `command` to the node, or send `answer` now.
struct Parsed {
  std::optional<CommandEnvelope> command;
  HttpAnswer answer;
};

// The per-server settings the parsers need.
struct EdgeSettings {
  int64_t stmt_timeout_ms = 30000;
  int64_t pop_timeout_ms_default = 30000;
  SubscriptionMode subscription_mode_default = SubscriptionMode::new_only;
};
EdgeSettings edge_settings(const ServerConfig& config);

// Decoded query parameters; the first occurrence of a name wins.
using QueryParams = std::map<std::string, std::string>;

Parsed parse_push(std::string_view body, const EdgeSettings& settings, IdSource& ids);
Parsed parse_pop(const std::string& queue, const std::optional<std::string>& partition,
                 const QueryParams& query, const EdgeSettings& settings, IdSource& ids);
// GET /api/v1/pop?namespace=&task=: the pop over every queue of a namespace and task.
Parsed parse_discovery_pop(const QueryParams& query, const EdgeSettings& settings, IdSource& ids);
Parsed parse_ack(std::string_view body, const EdgeSettings& settings, IdSource& ids);
Parsed parse_ack_batch(std::string_view body, const EdgeSettings& settings, IdSource& ids);
Parsed parse_configure(std::string_view body, const EdgeSettings& settings, IdSource& ids);
// POST /api/v1/lease/:leaseId/extend {"seconds"?: 60}
Parsed parse_lease_extend(const std::string& lease_id, std::string_view body,
                          const EdgeSettings& settings, IdSource& ids);
Parsed parse_dlq_query(const QueryParams& query, const EdgeSettings& settings, IdSource& ids);
Parsed parse_health(const EdgeSettings& settings, IdSource& ids);

HttpAnswer render_reply(const Reply& reply);
// {"error": message, "code": code} with `status`.
HttpAnswer error_answer(unsigned status, std::string_view code, std::string_view message);

// Helpers shared with the router and the tests.
std::optional<std::string> percent_decode(std::string_view text, bool plus_is_space);
std::optional<QueryParams> parse_query(std::string_view query);
bool valid_utf8(std::string_view text);
// `text` with every byte that is not part of a valid UTF-8 sequence replaced by '?'.
std::string utf8_lossy(std::string_view text);
std::string format_iso_us(int64_t unix_us);
std::optional<int64_t> parse_iso_us(std::string_view text);
Hash128 hash_transaction_id(std::string_view transaction_id);
// JSON nesting depth of `text` (brackets outside strings), capped at `limit` + 1.
size_t json_depth(std::string_view text, size_t limit);

}  // namespace queen::server
