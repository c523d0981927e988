// What the checker's two files share (sim/checker.cpp: the answers as they come;
// sim/checker_final.cpp: the checks at the end of a run): the invariants' names as DESIGN.md
// numbers them, and the workload's queues and groups. Internal to sim/.
#pragma once

#include <cstdint>

#include "core/api/replies.h"

namespace queen::sim::checking {

constexpr const char* kInv1 = "1 answered pushes survive";
constexpr const char* kInv2 = "2 gapless offsets, applied once";
constexpr const char* kInv3 = "3 a transactionId stored once, a request id answered once";
constexpr const char* kInv6T = "6 a transaction is all or nothing";
constexpr const char* kInv4 = "4 delivery order, no redelivery after ack, DLQ exactly once";
constexpr const char* kInv5 = "5 at most one live lease per group and partition";
constexpr const char* kInv6 = "6 a push request is all or nothing";
constexpr const char* kInv7 = "7 answers mean what they say";
constexpr uint32_t kReadPageMax = 1000;
// A request id retried this close to the end of its window may find its record swept.
constexpr int64_t kRequestWindowMarginUs = 10'000'000;
const char* const kGroups[] = {"g1", "__QUEUE_MODE__"};
constexpr const char* kWorkerGroup = "wk";
constexpr const char* kWorkerInput = "qa";
constexpr const char* kWorkerOutput = "wout";
constexpr const char* kWorkerNs = "wk";
constexpr const char* kWorkerTimers = "wtimer";
// The operator's own objects (sim/workload_ops.cpp): a queue it makes, pushes its own
// messages to (read, traced and deleted again) and deletes, and a group it seeks, subscribes,
// moves inside transactions and deletes. The checker leaves both aside.
constexpr const char* kOpsQueue = "ops-tmp";
constexpr const char* kOpsGroup = "ops-seek";

inline unsigned long long ull(uint64_t v) {
  return static_cast<unsigned long long>(v);
}

inline bool refused_valid_request(const Reply& reply) {
  const auto* e = std::get_if<ErrorReply>(&reply.body);
  return e != nullptr && api::is_refusal(e->code);
}

}  // namespace queen::sim::checking
