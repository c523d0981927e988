// Retention: retentionSeconds, completedRetentionSeconds and maxWaitTimeSeconds remove
// messages on every node through logged watermarks; readers, pops and lag skip them, dedup
// keeps their transactionIds for the window, and their log files are reclaimed.
#include <gtest/gtest.h>

#include "core/planner/retention.h"
#include "core/qlog/log.h"
#include "core/state/checkpoint.h"
#include "tests/core/mem_env.h"

namespace queen::testing {
namespace {

// retentionEnabled with retentionSeconds.
QueueOptionsPatch retained_for(int64_t seconds) {
  QueueOptionsPatch o;
  o.retention_enabled = true;
  o.retention_s = seconds;
  return o;
}

NodeConfig fast_retention() {
  NodeConfig c;
  c.retention_interval_ms = 200;
  return c;
}

const PartitionState& part(Harness& h, const std::string& q, const std::string& p = "p") {
  return *h.node().store().partition(q, p);
}

TEST(Retention, RetentionSecondsRemovesOldMessagesConsumedOrNot) {
  Harness h(fast_retention());
  configure(h, "q", retained_for(10));
  h.push("q", "p", {"a", "b"});
  h.env.advance_ms(6000);
  h.push("q", "p", {"c"});
  h.env.advance_ms(4500);  // a and b are 10.5 s old, c 4.5 s
  EXPECT_EQ(part(h, "q").log_start, Offset(2));
  auto msgs = h.node().read_messages(part(h, "q").id, Offset(0), 10);
  ASSERT_TRUE(msgs.ok());
  EXPECT_EQ(txns_of(msgs.value()), std::vector<std::string>{"c"});
  PopReply r = h.pop("q", "g", 10);
  EXPECT_EQ(txns_of(r.messages), std::vector<std::string>{"c"});
  QueuesReply list = h.call<QueuesReply>(QueueListCmd{});
  EXPECT_EQ(list.queues.at(0).messages, 1u);
}

TEST(Retention, OffByDefaultAndWithoutTheFlag) {
  Harness h(fast_retention());
  QueueOptionsPatch o;
  o.retention_s = 1;  // retentionEnabled stays false
  configure(h, "q", o);
  h.push("q", "p", {"a"});
  h.push("plain", "p", {"a"});
  h.env.advance_ms(3000);
  EXPECT_EQ(part(h, "q").log_start, Offset(0));
  EXPECT_EQ(part(h, "plain").log_start, Offset(0));
  EXPECT_EQ(h.pop("q", "g", 1).messages.size(), 1u);
}

TEST(Retention, CompletedRetentionWaitsForEveryGroupOfTheQueue) {
  Harness h(fast_retention());
  QueueOptionsPatch o;
  o.retention_enabled = true;
  o.completed_retention_s = 1;
  configure(h, "q", o);
  h.push("q", "p", {"a", "b", "c"});
  h.env.advance_ms(1500);
  EXPECT_EQ(part(h, "q").log_start, Offset(0));  // no group yet: nothing is completed
  PopReply one = h.pop("q", "g1", 3);
  for (const auto& m : one.messages) h.ack(m, "g1", AckStatus::completed, one.lease_id);
  PopReply two = h.pop("q", "g2", 1);
  h.ack(two.messages[0], "g2", AckStatus::completed, two.lease_id);
  h.env.advance_ms(500);
  EXPECT_EQ(part(h, "q").log_start, Offset(1));  // g2 consumed only a
  PopReply rest = h.pop("q", "g2", 5);
  EXPECT_EQ(txns_of(rest.messages), (std::vector<std::string>{"b", "c"}));
}

TEST(Retention, MaxWaitTimeEvictsWithoutRetentionEnabled) {
  Harness h(fast_retention());
  QueueOptionsPatch o;
  o.max_wait_time_s = 2;
  configure(h, "q", o);
  h.push("q", "p", {"old"});
  h.env.advance_ms(1500);
  h.push("q", "p", {"new"});
  h.env.advance_ms(1000);
  PopReply r = h.pop("q", "g", 5);
  EXPECT_EQ(txns_of(r.messages), std::vector<std::string>{"new"});
}

TEST(Retention, AGroupBehindContinuesAfterTheRemovedMessagesAndItsLagSkipsThem) {
  Harness h(fast_retention());
  configure(h, "q", retained_for(1));
  h.push("q", "p", {"a"});
  PopReply first = h.pop("q", "g", 1);
  h.ack(first.messages[0], "g", AckStatus::completed, first.lease_id);
  h.push("q", "p", {"b", "c"});
  h.env.advance_ms(1500);
  h.push("q", "p", {"d"});
  GroupsReply g = h.call<GroupsReply>(GroupDetailsCmd{"g"});
  ASSERT_EQ(g.groups.size(), 1u);
  EXPECT_EQ(g.groups[0].total_lag, 1u);
  EXPECT_EQ(txns_of(h.pop("q", "g", 5).messages), std::vector<std::string>{"d"});
}

TEST(Retention, ARemovedMessagesTransactionIdStaysInTheDedupWindow) {
  Harness h(fast_retention());
  configure(h, "q", retained_for(1));
  h.push("q", "p", {"a"});
  h.env.advance_ms(1500);
  ASSERT_EQ(part(h, "q").log_start, Offset(1));
  EXPECT_EQ(h.push("q", "p", {"a"}).results[0].status, PushStatus::duplicate);
  // Past the dedup window (and the 900 s floor) the row goes too.
  h.env.now += (kRowsWindowMinS + 3600) * 1'000'000ll;
  h.env.advance_ms(300);
  EXPECT_TRUE(part(h, "q").rows.empty());
  EXPECT_EQ(h.push("q", "p", {"a"}).results[0].status, PushStatus::queued);
}

// A single node's append rows keep their transactionId hashes only in their message records:
// a file whose messages retention removed stays while their rows are inside the dedup window.
TEST(Retention, LogFilesOfRemovedMessagesAreReclaimedAndARestartKeepsTheRest) {
  NodeConfig c = fast_retention();
  c.segment_bytes = 2048;
  c.durable_every_ms = 100;
  c.durable_every_bytes = 1;
  Harness h(c);
  configure(h, "q", retained_for(2));
  std::string big(600, 'x');
  for (int i = 0; i < 12; ++i) {
    h.push("q", "p", {"m" + std::to_string(i) + big});
    h.env.advance_ms(400);
  }
  ASSERT_GT(part(h, "q").log_start, Offset(1));
  EXPECT_TRUE(h.env.files.contains(log_file_name(LogId(1), 1)));
  EXPECT_EQ(h.push("q", "p", {"m0" + big}).results[0].status, PushStatus::duplicate);
  h.env.now += (kRowsWindowMinS + 3600) * 1'000'000ll;
  for (int i = 12; i < 16; ++i) {
    h.push("q", "p", {"m" + std::to_string(i) + big});
    h.env.advance_ms(400);
  }
  EXPECT_TRUE(h.node().store().file_refs().count({LogId(1), 1}) == 0);
  EXPECT_FALSE(h.env.files.contains(log_file_name(LogId(1), 1)));
  EXPECT_GT(h.node().stats().log_files_reclaimed, 0u);
  Offset start = part(h, "q").log_start;
  ASSERT_GT(start, Offset(0));
  auto before = h.node().read_messages(part(h, "q").id, Offset(0), 100);
  ASSERT_TRUE(before.ok());
  h.env.crash();
  h.restart();
  EXPECT_EQ(part(h, "q").log_start, start);
  auto after = h.node().read_messages(part(h, "q").id, Offset(0), 100);
  ASSERT_TRUE(after.ok()) << after.error().message;
  EXPECT_EQ(txns_of(after.value()), txns_of(before.value()));
}

TEST(Retention, AStepPassesAtMostTheBatchOfRowsAndTheNextStepsGoOn) {
  NodeConfig c;
  c.retention_interval_ms = 0;  // passes run by hand below
  Harness h(c);
  configure(h, "q", retained_for(1));
  size_t rows = kRetentionRowsPerStepMax + 200;
  // One row per push: each goes into its own entry.
  for (size_t k = 0; k < rows; ++k) h.push("q", "p", {"m" + std::to_string(k)});
  const Store& s = h.node().store();
  const PartitionState& p = part(h, "q");
  ASSERT_EQ(p.rows.size(), rows);
  int64_t later = h.env.now + 10'000'000ll;
  EffRetention e = retention_marks(s, *s.queue("q"), p, {}, later);
  EXPECT_EQ(e.log_start, Offset(kRetentionRowsPerStepMax));
  EXPECT_EQ(e.rows_start, Offset(0));  // the dedup window still holds every row
}

NodeConfig cleanup_config() {
  NodeConfig c;
  c.retention_interval_ms = 200;
  c.partition_cleanup_after_s = 10;
  return c;
}

TEST(PartitionCleanup, AnEmptyIdlePartitionGoesAndAPushUnderItsNameStartsAfresh) {
  Harness h(cleanup_config());
  QueueOptionsPatch o = retained_for(1);
  o.dedup_window_s = 0;
  configure(h, "q", o);
  h.push("q", "p", {"a"});
  h.push("plain", "p", {"kept"});
  PartitionId old = part(h, "q").id;
  PopReply r = h.pop("q", "g", 1);
  h.ack(r.messages[0], "g", AckStatus::completed, r.lease_id);
  h.env.advance_ms(1500);
  EXPECT_NE(h.node().store().partition("q", "p"), nullptr);  // its row is still in the window
  h.env.now += (kRowsWindowMinS + 60) * 1'000'000ll;
  h.env.advance_ms(500);
  EXPECT_EQ(h.node().store().partition("q", "p"), nullptr);
  EXPECT_EQ(h.node().store().partition(old), nullptr);
  EXPECT_EQ(h.node().store().cursor("g", old), nullptr);
  // A partition that still keeps a message stays, however idle.
  EXPECT_NE(h.node().store().partition("plain", "p"), nullptr);
  PushReply again = h.push("q", "p", {"b"});
  EXPECT_GT(again.results[0].partition_id, old);
  EXPECT_EQ(again.results[0].offset, Offset(0));
  EXPECT_EQ(txns_of(h.pop("q", "g", 5).messages), std::vector<std::string>{"b"});
}

TEST(PartitionCleanup, OffWhenTheIdleTimeIsZero) {
  NodeConfig c = cleanup_config();
  c.partition_cleanup_after_s = 0;
  Harness h(c);
  configure(h, "q", {});
  h.env.now += 100 * 86400 * 1'000'000ll;
  h.env.advance_ms(500);
  EXPECT_NE(h.node().store().partition("q", "Default"), nullptr);
}

}  // namespace
}  // namespace queen::testing
