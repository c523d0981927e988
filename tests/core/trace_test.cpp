// Traces (POST /api/v1/traces and its queries) in the core: recorded on a stored message as a
// logged effect, so they survive a restart, and answered oldest first, by message, by name,
// and as per-name counts.
#include <gtest/gtest.h>

#include "tests/core/mem_env.h"

namespace queen::testing {
namespace {

Hash128 txn_hash_of(const std::string& txn) {
  XXH128_hash_t h = XXH3_128bits(txn.data(), txn.size());
  return Hash128{h.low64, h.high64};
}

TraceRecordCmd trace_on(PartitionId pid, const std::string& txn, const std::string& data,
                        std::vector<std::string> names, uint64_t seed) {
  TraceRecordCmd c;
  c.partition_id = pid;
  c.transaction_id = txn;
  c.txn_hash = txn_hash_of(txn);
  c.trace_id = make_uuid_v7(1000 + seed, seed, seed);
  c.data = data;
  c.event_type = "step";
  c.group = "workers";
  c.names = std::move(names);
  return c;
}

TraceQueryCmd query(TraceQueryKind kind) {
  TraceQueryCmd q;
  q.kind = kind;
  return q;
}

TraceQueryCmd of_message(PartitionId pid, const std::string& txn) {
  TraceQueryCmd q = query(TraceQueryKind::message);
  q.partition_id = pid;
  q.transaction_id = txn;
  return q;
}

TEST(Traces, RecordedOnAMessageAndReadBackOldestFirst) {
  Harness h;
  h.push("orders", "p", {"o-1", "o-2"});
  PartitionId pid = h.node().store().partition("orders", "p")->id;
  auto first = h.call<TraceReply>(trace_on(pid, "o-1", "{\"step\":1}", {"checkout"}, 1));
  EXPECT_FALSE(first.recorded.is_nil());
  h.call<TraceReply>(trace_on(pid, "o-1", "{\"step\":2}", {"checkout", "payment"}, 2));
  h.call<TraceReply>(trace_on(pid, "o-2", "{\"step\":1}", {"checkout"}, 3));

  TraceQueryCmd q = of_message(pid, "o-1");
  auto of_o1 = h.call<TraceReply>(q);
  ASSERT_EQ(of_o1.traces.size(), 2u);
  EXPECT_EQ(of_o1.traces[0].id, first.recorded);
  EXPECT_EQ(of_o1.traces[0].data, "{\"step\":1}");
  EXPECT_EQ(of_o1.traces[1].names, (std::vector<std::string>{"checkout", "payment"}));
  EXPECT_EQ(of_o1.traces[1].group, "workers");
  EXPECT_LE(of_o1.traces[0].created_us, of_o1.traces[1].created_us);

  TraceQueryCmd by = query(TraceQueryKind::by_name);
  by.name = "checkout";
  by.offset = 1;
  by.limit = 1;
  auto page = h.call<TraceReply>(by);
  EXPECT_EQ(page.total, 3u);
  ASSERT_EQ(page.traces.size(), 1u);
  EXPECT_EQ(page.traces[0].data, "{\"step\":2}");
  EXPECT_EQ(page.traces[0].queue, "orders");
  EXPECT_EQ(page.traces[0].partition, "p");
  EXPECT_EQ(page.traces[0].payload, "{\"t\":\"o-1\"}");

  TraceQueryCmd names = query(TraceQueryKind::names);
  names.limit = 10;
  auto counts = h.call<TraceReply>(names);
  ASSERT_EQ(counts.names.size(), 2u);
  EXPECT_EQ(counts.names[0].name, "checkout");
  EXPECT_EQ(counts.names[0].traces, 3u);
  EXPECT_EQ(counts.names[0].messages, 2u);
  EXPECT_EQ(counts.names[1].name, "payment");
  EXPECT_EQ(counts.names[1].traces, 1u);
}

TEST(Traces, AnUnknownMessageIsRefusedAndRecordsNothing) {
  Harness h;
  h.push("orders", "p", {"o-1"});
  PartitionId pid = h.node().store().partition("orders", "p")->id;
  auto e = h.call<ErrorReply>(trace_on(pid, "nope", "1", {"x"}, 1));
  EXPECT_EQ(e.code, api::Errc::not_found);
  auto e2 = h.call<ErrorReply>(trace_on(PartitionId(pid.value + 100), "o-1", "1", {"x"}, 2));
  EXPECT_EQ(e2.code, api::Errc::not_found);
  EXPECT_TRUE(h.node().store().traces().empty());
}

TEST(Traces, SurviveARestart) {
  Harness h;
  h.push("orders", "p", {"o-1"});
  PartitionId pid = h.node().store().partition("orders", "p")->id;
  h.call<TraceReply>(trace_on(pid, "o-1", "{\"a\":true}", {"n"}, 1));
  h.env.crash();
  h.restart();
  TraceQueryCmd q = of_message(pid, "o-1");
  auto r = h.call<TraceReply>(q);
  ASSERT_EQ(r.traces.size(), 1u);
  EXPECT_EQ(r.traces[0].data, "{\"a\":true}");
  EXPECT_EQ(r.traces[0].event_type, "step");
}

TEST(Traces, TracesOlderThanTheRetentionAreDropped) {
  NodeConfig c;
  c.retention_interval_ms = 200;
  c.trace_retention_s = 2;
  Harness h(c);
  h.push("orders", "p", {"o-1"});
  PartitionId pid = h.node().store().partition("orders", "p")->id;
  h.call<TraceReply>(trace_on(pid, "o-1", "{\"step\":1}", {"old"}, 1));
  h.env.advance_ms(1500);
  h.call<TraceReply>(trace_on(pid, "o-1", "{\"step\":2}", {"new"}, 2));
  h.env.advance_ms(1000);  // the first is 2.5 s old, the second 1 s
  TraceQueryCmd q = of_message(pid, "o-1");
  auto left = h.call<TraceReply>(q);
  ASSERT_EQ(left.traces.size(), 1u);
  EXPECT_EQ(left.traces[0].data, "{\"step\":2}");
}

}  // namespace
}  // namespace queen::testing
