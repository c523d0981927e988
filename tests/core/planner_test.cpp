// The planner through the node: implicit creation, gapless offsets, configure.
#include <gtest/gtest.h>

#include "tests/core/mem_env.h"

namespace queen::testing {
namespace {

TEST(Planner, FirstPushCreatesQueueAndPartitionWithOffsetsFromZero) {
  Harness h;
  PushReply r = h.push("orders.eu.billing", "customer-42", {"a", "b", "c"});
  ASSERT_EQ(r.results.size(), 3u);
  for (uint32_t i = 0; i < 3; ++i) {
    EXPECT_EQ(r.results[i].index, i);
    EXPECT_EQ(r.results[i].status, PushStatus::queued);
    EXPECT_EQ(r.results[i].offset, Offset(i));
  }
  const QueueState* q = h.node().store().queue("orders.eu.billing");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->options.lease_time_s, kPushCreatedLeaseTimeS);
  EXPECT_EQ(q->options.ns, "orders");
  EXPECT_EQ(q->options.task, "eu");
  EXPECT_EQ(h.node().store().partition("orders.eu.billing", "customer-42")->next_offset,
            Offset(3));
}

TEST(Planner, OffsetsAreGaplessPerPartitionAcrossPushesInOneEntry) {
  Harness h;
  // Several pushes planned before the flush share one entry; offsets continue.
  std::vector<ReplyHandle> hs;
  for (int i = 0; i < 5; ++i)
    hs.push_back(h.send(h.push_cmd("q", i % 2 ? "odd" : "even", {"t" + std::to_string(i)})));
  h.env.run();
  std::vector<uint64_t> even, odd;
  for (int i = 0; i < 5; ++i) {
    auto r = h.take(hs[i]);
    ASSERT_TRUE(r.has_value());
    auto& res = std::get<PushReply>(r->body).results.at(0);
    (i % 2 ? odd : even).push_back(res.offset.value);
  }
  EXPECT_EQ(even, (std::vector<uint64_t>{0, 1, 2}));
  EXPECT_EQ(odd, (std::vector<uint64_t>{0, 1}));
  EXPECT_EQ(h.node().stats().entries_committed, 1u);
}

TEST(Planner, DefaultPartitionAndSeparateQueuesCountSeparately) {
  Harness h;
  EXPECT_EQ(h.push("a", "Default", {"1"}).results[0].offset, Offset(0));
  EXPECT_EQ(h.push("b", "Default", {"1"}).results[0].offset, Offset(0));
  EXPECT_EQ(h.push("a", "Default", {"2"}).results[0].offset, Offset(1));
  EXPECT_NE(h.node().store().queue("a")->id, h.node().store().queue("b")->id);
}

TEST(Planner, ConfigureMergesByDefaultAndReplaceResets) {
  Harness h;
  ConfigureCmd c;
  c.queue = "jobs";
  c.patch.lease_time_s = 10;
  c.patch.retry_limit = 7;
  auto r1 = h.call<ConfigureReply>(c);
  EXPECT_EQ(r1.options.lease_time_s, 10);
  EXPECT_EQ(r1.options.retry_limit, 7);
  EXPECT_EQ(r1.options.dedup_window_s, 3600);
  ConfigureCmd merge;
  merge.queue = "jobs";
  merge.patch.retry_limit = 1;
  auto r2 = h.call<ConfigureReply>(merge);
  EXPECT_EQ(r2.options.lease_time_s, 10);
  EXPECT_EQ(r2.options.retry_limit, 1);
  ConfigureCmd replace;
  replace.queue = "jobs";
  replace.replace = true;
  replace.patch.retry_limit = 2;
  auto r3 = h.call<ConfigureReply>(replace);
  EXPECT_EQ(r3.options.lease_time_s, 300);
  EXPECT_EQ(r3.options.retry_limit, 2);
  EXPECT_EQ(h.node().store().queue("jobs")->options.retry_limit, 2);
  EXPECT_NE(h.node().store().partition("jobs", "Default"), nullptr);
}

TEST(Planner, PushIsAnsweredOnlyAfterEveryTouchedLogSynced) {
  Harness h;
  h.env.hold_syncs = true;
  PushCmd c = h.push_cmd("q1", "Default", {"x"});
  PushCmd c2 = h.push_cmd("q2", "Default", {"y"});
  c.items.push_back(c2.items[0]);
  ReplyHandle hd = h.send(c);
  h.env.run();
  EXPECT_FALSE(h.take(hd).has_value());
  EXPECT_EQ(h.env.pending_syncs.size(), 2u);  // one per touched log
  // Complete one of the two: still no answer.
  auto first = h.env.pending_syncs.front();
  h.env.pending_syncs.erase(h.env.pending_syncs.begin());
  h.env.perform(h.node().on_sync_done(first.second, true));
  EXPECT_FALSE(h.take(hd).has_value());
  h.env.hold_syncs = false;
  h.env.run();
  EXPECT_TRUE(h.take(hd).has_value());
}

TEST(Planner, FailedSyncStopsTheNode) {
  Harness h;
  h.env.hold_syncs = true;
  ReplyHandle hd = h.send(h.push_cmd("q", "Default", {"x"}));
  h.env.run();
  auto s = h.env.pending_syncs.front();
  h.env.perform(h.node().on_sync_done(s.second, false));
  EXPECT_TRUE(h.env.fatal_called);
  EXPECT_FALSE(h.node().serving());
  EXPECT_FALSE(h.take(hd).has_value());
}

}  // namespace
}  // namespace queen::testing
