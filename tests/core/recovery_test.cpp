// Crash recovery: every answered write is back, torn tails are cut, entries incomplete in any
// log they touch are never replayed.
#include <gtest/gtest.h>

#include "core/qlog/log.h"
#include "tests/core/mem_env.h"

namespace queen::testing {
namespace {

TEST(Recovery, RestartKeepsQueuesOffsetsPayloadsAndCursors) {
  Harness h;
  h.push("q", "p", {"a", "b", "c"});
  PopReply r = h.pop("q", "g", 1);
  h.ack(r.messages[0], "g", AckStatus::completed, r.lease_id);
  h.env.crash();
  h.restart();
  const PartitionState* p = h.node().store().partition("q", "p");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->next_offset, Offset(3));
  auto msgs = h.node().read_messages(p->id, Offset(0), 10);
  ASSERT_TRUE(msgs.ok());
  ASSERT_EQ(msgs.value().size(), 3u);
  EXPECT_EQ(msgs.value()[1].payload, "{\"t\":\"b\"}");
  EXPECT_EQ(h.node().store().cursor("g", p->id)->next, Offset(1));
  PopReply after = h.pop("q", "g", 5);
  ASSERT_EQ(after.messages.size(), 2u);
  EXPECT_EQ(after.messages[0].transaction_id, "b");
  // New pushes continue the offsets.
  EXPECT_EQ(h.push("q", "p", {"d"}).results[0].offset, Offset(3));
}

TEST(Recovery, LeaseSurvivesARestartUntilItExpires) {
  Harness h;
  h.push("q", "p", {"a"});
  PopReply r = h.pop("q", "g", 1);
  ASSERT_EQ(r.messages.size(), 1u);
  h.env.crash();
  h.restart();
  EXPECT_TRUE(h.pop("q", "g", 1).messages.empty());
  EXPECT_TRUE(h.ack(r.messages[0], "g", AckStatus::completed, r.lease_id).success);
}

TEST(Recovery, UnsyncedEntryIsDroppedAndNeverAnswered) {
  Harness h;
  h.push("q", "p", {"a"});
  h.env.hold_syncs = true;
  ReplyHandle hd = h.send(h.push_cmd("q", "p", {"b"}));
  h.env.run();
  EXPECT_FALSE(h.take(hd).has_value());
  h.env.crash();
  h.env.hold_syncs = false;
  h.restart();
  EXPECT_EQ(h.node().store().partition("q", "p")->next_offset, Offset(1));
  EXPECT_EQ(h.push("q", "p", {"c"}).results[0].offset, Offset(1));
}

TEST(Recovery, TornTailIsCutAndLaterWritesContinueCleanly) {
  Harness h;
  h.push("q", "p", {"a"});
  std::string file = log_file_name(LogId(1), 1);
  ASSERT_TRUE(h.env.files.contains(file));
  size_t good = h.env.files[file].size();
  h.env.files[file].insert(h.env.files[file].end(), {1, 2, 3, 4, 5, 6, 7});
  h.restart();
  EXPECT_EQ(h.env.files[file].size(), good);
  EXPECT_EQ(h.node().stats().torn_tails_cut, 1u);
  EXPECT_EQ(h.push("q", "p", {"b"}).results[0].offset, Offset(1));
  h.restart();
  EXPECT_EQ(h.node().store().partition("q", "p")->next_offset, Offset(2));
}

TEST(Recovery, EntryMissingFromOneOfItsLogsIsNotReplayedAndIsCutEverywhere) {
  Harness h;
  h.push("a", "Default", {"x"});
  h.push("b", "Default", {"y"});
  h.env.hold_syncs = true;
  PushCmd c = h.push_cmd("a", "Default", {"a2"});
  c.items.push_back(h.push_cmd("b", "Default", {"b2"}).items[0]);
  h.send(c);
  h.env.run();
  // Log a's sync lands; log b's write is lost with the crash.
  auto s = h.env.pending_syncs.front();
  h.env.synced[s.first] = h.env.files[s.first].size();
  h.env.crash();
  h.env.hold_syncs = false;
  h.restart();
  EXPECT_EQ(h.node().store().partition("a", "Default")->next_offset, Offset(1));
  EXPECT_EQ(h.node().store().partition("b", "Default")->next_offset, Offset(1));
  // The surviving half was cut: a later restart does not see it either.
  h.push("b", "Default", {"b3"});
  h.restart();
  EXPECT_EQ(h.node().store().partition("a", "Default")->next_offset, Offset(1));
  EXPECT_EQ(h.node().store().partition("b", "Default")->next_offset, Offset(2));
}

TEST(Recovery, LogsRollAtTheSegmentSize) {
  NodeConfig cfg;
  cfg.segment_bytes = 512;
  Harness h(cfg);
  for (int i = 0; i < 20; ++i) h.push("q", "p", {"m" + std::to_string(i)});
  EXPECT_TRUE(h.env.files.contains(log_file_name(LogId(1), 2)));
  h.restart();
  auto msgs = h.node().read_messages(h.node().store().partition("q", "p")->id, Offset(0), 100);
  ASSERT_TRUE(msgs.ok());
  ASSERT_EQ(msgs.value().size(), 20u);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(msgs.value()[i].transaction_id, "m" + std::to_string(i));
}

TEST(Recovery, ReportsProgressForALargeLog) {
  Harness h;
  std::vector<std::string> txns;
  for (int i = 0; i < 200; ++i) txns.push_back("t" + std::to_string(i));
  for (int i = 0; i < 10; ++i) h.push("q", "p", txns);
  h.env.logs.clear();
  h.restart();
  ASSERT_FALSE(h.env.logs.empty());
  EXPECT_NE(h.env.logs.front().find("recovery: scanning"), std::string::npos);
  EXPECT_NE(h.env.logs.back().find("replayed"), std::string::npos);
}

TEST(Recovery, ARequestIdRetriedAfterARestartGetsTheRecordedAnswer) {
  Harness h;
  RequestId request = make_uuid_v7(1, 2, 3);
  auto send = [&](const std::string& txn) {
    ReplyHandle handle = 1000 + h.env.replies.size() + h.env.now % 1000;
    h.node().on_command(
        handle, CommandEnvelope{request, h.env.now / 1000 + 30000, h.push_cmd("q", "p", {txn})});
    h.env.run();
    h.env.advance_ms(10);
    auto r = h.take(handle);
    QUEEN_ASSERT(r.has_value(), "no reply");
    return std::get<PushReply>(r->body);
  };
  PushReply first = send("a");
  h.env.crash();
  h.restart();
  PushReply again = send("a");
  ASSERT_EQ(again.results.size(), 1u);
  EXPECT_EQ(again.results[0].status, PushStatus::queued);
  EXPECT_EQ(again.results[0].message_id, first.results[0].message_id);
  EXPECT_EQ(again.results[0].offset, first.results[0].offset);
  EXPECT_EQ(h.node().store().partition("q", "p")->next_offset, Offset(1));
}

// A KV incr is not idempotent: a retry planned afresh would count twice. Its logged outcome
// answers the retry after a restart with the first value and version, and counts once.
TEST(Recovery, AKvIncrRetriedAfterARestartGetsTheRecordedAnswerAndCountsOnce) {
  Harness h;
  RequestId request = make_uuid_v7(4, 5, 6);
  KvOp inc;
  inc.op = KvOpKind::incr;
  inc.ns = "counters";
  inc.key = "visits";
  inc.forever = true;
  auto send = [&](const RequestId& id) {
    ReplyHandle handle = 2000 + h.env.replies.size() + h.env.now % 1000;
    h.node().on_command(handle, CommandEnvelope{id, h.env.now / 1000 + 30000, KvCmd{{inc}}});
    h.env.run();
    h.env.advance_ms(10);
    auto r = h.take(handle);
    QUEEN_ASSERT(r.has_value(), "no reply");
    return std::get<KvReply>(r->body);
  };
  KvReply first = send(request);
  ASSERT_EQ(first.results.size(), 1u);
  ASSERT_TRUE(first.results[0].applied);
  EXPECT_EQ(first.results[0].row.value, "1");
  h.env.crash();
  h.restart();
  KvReply again = send(request);
  ASSERT_EQ(again.results.size(), 1u);
  EXPECT_EQ(again.results[0].row.value, "1");
  EXPECT_EQ(again.results[0].row.version, first.results[0].row.version);
  // A new request id counts again: the counter moved once for the first id.
  EXPECT_EQ(send(make_uuid_v7(4, 5, 7)).results[0].row.value, "2");
}

}  // namespace
}  // namespace queen::testing
