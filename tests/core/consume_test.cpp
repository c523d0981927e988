// The rest of consumption: multi-partition and discovery pops, conflation, delays, lease
// extension, seeks, group deletion, DLQ replay, queue deletion, message reads.
#include <gtest/gtest.h>

#include <map>

#include "core/consume/engine.h"
#include "core/state/checkpoint.h"
#include "tests/core/mem_env.h"

namespace queen::testing {
namespace {

PopCmd pop_cmd(const std::string& queue, const std::string& group, uint32_t batch) {
  PopCmd c;
  c.queue = queue;
  c.group = group;
  c.batch = batch;
  c.subscription_mode = SubscriptionMode::all;
  return c;
}

TEST(Consume, MultiPartitionPopSharesOneLeaseAndCapsTheBatch) {
  Harness h;
  h.push("q", "a", {"a1", "a2"});
  h.push("q", "b", {"b1", "b2"});
  h.push("q", "c", {"c1"});
  PopCmd c = pop_cmd("q", "g", 3);
  c.partitions = 3;
  PopReply r = h.call<PopReply>(c);
  ASSERT_EQ(r.messages.size(), 3u);
  EXPECT_EQ(r.partitions_claimed, 2u);
  for (const auto& m : r.messages) EXPECT_EQ(m.lease_id, r.lease_id);
  for (const auto& m : r.messages)
    EXPECT_TRUE(h.ack(m, "g", AckStatus::completed, r.lease_id).success);
}

TEST(Consume, DiscoveryPopFindsAQueueOfTheNamespace) {
  Harness h;
  h.push("shop.orders", "Default", {"o1"});
  h.push("other.x", "Default", {"x1"});
  PopCmd c = pop_cmd("", "g", 5);
  c.ns = "shop";
  PopReply r = h.call<PopReply>(c);
  ASSERT_EQ(r.messages.size(), 1u);
  EXPECT_EQ(r.messages[0].queue, "shop.orders");
}

TEST(Consume, ConflationDeliversOnlyTheNewest) {
  Harness h;
  h.push("prices", "AAPL", {"p1", "p2", "p3"});
  PopCmd c = pop_cmd("prices", "g", 10);
  c.conflation = true;
  PopReply r = h.call<PopReply>(c);
  ASSERT_EQ(r.messages.size(), 1u);
  EXPECT_EQ(r.messages[0].transaction_id, "p3");
  h.ack(r.messages[0], "g", AckStatus::completed, r.lease_id);
  EXPECT_TRUE(h.call<PopReply>(pop_cmd("prices", "g", 10)).messages.empty());
}

TEST(Consume, DelayedProcessingHidesMessagesUntilTheirDelayEnds) {
  Harness h;
  QueueOptionsPatch p;
  p.delayed_processing_s = 2;
  configure(h, "later", p);
  h.push("later", "Default", {"m"});
  EXPECT_TRUE(h.call<PopReply>(pop_cmd("later", "g", 1)).messages.empty());
  PopCmd wait = pop_cmd("later", "g", 1);
  wait.wait = true;
  ReplyHandle poll = h.send(wait, 10000);
  h.env.advance_ms(1500);
  EXPECT_FALSE(h.take(poll).has_value());
  h.env.advance_ms(600);
  auto r = h.take(poll);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(std::get<PopReply>(r->body).messages.size(), 1u);
}

TEST(Consume, WindowBufferWaitsForAQuietPartition) {
  Harness h;
  QueueOptionsPatch p;
  p.window_buffer_s = 1;
  configure(h, "deb", p);
  h.push("deb", "Default", {"a"});
  h.env.advance_ms(600);
  h.push("deb", "Default", {"b"});
  h.env.advance_ms(600);
  EXPECT_TRUE(h.call<PopReply>(pop_cmd("deb", "g", 5)).messages.empty());
  h.env.advance_ms(500);
  EXPECT_EQ(h.call<PopReply>(pop_cmd("deb", "g", 5)).messages.size(), 2u);
}

TEST(Consume, LeaseExtensionKeepsTheBatchPastItsFirstExpiry) {
  Harness h;
  QueueOptionsPatch p;
  p.lease_time_s = 1;
  configure(h, "q", p);
  h.push("q", "Default", {"a"});
  PopReply r = h.call<PopReply>(pop_cmd("q", "g", 1));
  h.env.advance_ms(800);
  LeaseExtendReply ext = h.call<LeaseExtendReply>(LeaseExtendCmd{r.lease_id, 5});
  EXPECT_TRUE(ext.success);
  h.env.advance_ms(1000);
  EXPECT_TRUE(h.call<PopReply>(pop_cmd("q", "g", 1)).messages.empty());
  EXPECT_TRUE(h.ack(r.messages[0], "g", AckStatus::completed, r.lease_id).success);
  EXPECT_EQ(h.node().leases_held(), 0u);  // the ack released it
  h.env.advance_ms(5000);
  LeaseExtendReply gone = h.call<LeaseExtendReply>(LeaseExtendCmd{r.lease_id, 5});
  EXPECT_FALSE(gone.success);
}

// A lease nobody acks is dropped once it expires, and one that was extended is kept (and can
// be extended again) past the time it first had.
TEST(Consume, ExpiredLeasesAreDroppedAndExtendedOnesKept) {
  Harness h;
  QueueOptionsPatch p;
  p.lease_time_s = 1;
  configure(h, "q", p);
  h.push("q", "a", {"a1"});
  h.push("q", "b", {"b1"});
  PopReply kept = h.call<PopReply>(pop_cmd("q", "g", 1));
  PopReply left = h.call<PopReply>(pop_cmd("q", "g", 1));
  ASSERT_EQ(kept.messages.size(), 1u);
  ASSERT_EQ(left.messages.size(), 1u);
  EXPECT_EQ(h.node().leases_held(), 2u);
  h.env.advance_ms(800);
  ASSERT_TRUE(h.call<LeaseExtendReply>(LeaseExtendCmd{kept.lease_id, 3}).success);
  h.env.advance_ms(1500);  // past both first expiries
  EXPECT_EQ(h.node().leases_held(), 1u);
  EXPECT_FALSE(h.call<LeaseExtendReply>(LeaseExtendCmd{left.lease_id, 3}).success);
  EXPECT_TRUE(h.call<LeaseExtendReply>(LeaseExtendCmd{kept.lease_id, 3}).success);
  EXPECT_TRUE(h.ack(kept.messages[0], "g", AckStatus::completed, kept.lease_id).success);
  EXPECT_EQ(h.node().leases_held(), 0u);
}

TEST(Consume, FailedAckBelowTheCursorIsRefused) {
  Harness h;
  h.push("q", "Default", {"a"});
  PopReply r = h.call<PopReply>(pop_cmd("q", "g", 1));
  h.ack(r.messages[0], "g", AckStatus::completed, r.lease_id);
  h.push("q", "Default", {"b"});
  PopReply next = h.call<PopReply>(pop_cmd("q", "g", 1));  // a new lease drops a's state
  AckResult late = h.ack(r.messages[0], "g", AckStatus::failed, std::nullopt);
  EXPECT_FALSE(late.success);
  EXPECT_NE(late.error.find("already committed"), std::string::npos);
  AckResult noop = h.ack(r.messages[0], "g", AckStatus::completed, std::nullopt);
  EXPECT_TRUE(noop.success);
  EXPECT_TRUE(noop.noop);
  (void)next;
}

TEST(Consume, SeekToEndAndToATime) {
  Harness h;
  h.push("q", "Default", {"old"});
  int64_t between = h.env.now;
  h.env.advance_ms(10);
  h.push("q", "Default", {"new"});
  GroupChangeReply end = h.call<GroupChangeReply>(SeekCmd{"g", "q", "", true, 0});
  EXPECT_EQ(end.partitions, 1u);
  EXPECT_TRUE(h.call<PopReply>(pop_cmd("q", "g", 5)).messages.empty());
  h.call<GroupChangeReply>(SeekCmd{"g", "q", "", false, between});
  PopReply r = h.call<PopReply>(pop_cmd("q", "g", 5));
  ASSERT_EQ(r.messages.size(), 1u);
  EXPECT_EQ(r.messages[0].transaction_id, "new");
}

TEST(Consume, DeletedGroupStartsOverAndGroupsReportLag) {
  Harness h;
  h.push("q", "Default", {"a", "b"});
  PopReply r = h.call<PopReply>(pop_cmd("q", "g", 1));
  h.ack(r.messages[0], "g", AckStatus::completed, r.lease_id);
  GroupsReply gs = h.call<GroupsReply>(GroupDetailsCmd{"g"});
  ASSERT_EQ(gs.groups.size(), 1u);
  EXPECT_EQ(gs.groups[0].total_lag, 1u);
  ASSERT_EQ(gs.groups[0].partitions.size(), 1u);
  EXPECT_EQ(gs.groups[0].partitions[0].cursor, Offset(1));
  GroupChangeReply d = h.call<GroupChangeReply>(GroupDeleteCmd{"g", "", true});
  EXPECT_EQ(d.partitions, 1u);
  EXPECT_TRUE(d.metadata_deleted);
  h.env.crash();
  h.restart();
  EXPECT_EQ(h.node().store().cursor("g", PartitionId(1)), nullptr);
  EXPECT_EQ(h.call<PopReply>(pop_cmd("q", "g", 5)).messages.size(), 2u);
}

// A queue's and a group's whole details list partitions in the order they were made (id
// order; the edge lists them by name, tests/server/admin_test.cpp); after a restart (the
// name table rebuilt) each name still finds its partition.
TEST(Consume, DetailsListPartitionsInIdOrderAndNamesSurviveARestart) {
  Harness h;
  for (const char* name : {"b", "c", "a"}) h.push("q", name, {std::string("m-") + name});
  h.call<PopReply>(pop_cmd("q", "g", 10));
  auto names_of_queue = [&] {
    std::vector<std::string> out;
    QueuesReply r = h.call<QueuesReply>(QueueGetCmd{"q"});
    for (const auto& p : r.queues.at(0).partitions) out.push_back(p.name);
    return out;
  };
  auto names_of_group = [&] {
    std::vector<std::string> out;
    GroupsReply r = h.call<GroupsReply>(GroupDetailsCmd{"g"});
    for (const auto& p : r.groups.at(0).partitions) out.push_back(p.partition);
    return out;
  };
  const std::vector<std::string> made{"b", "c", "a"};
  EXPECT_EQ(names_of_queue(), made);
  EXPECT_EQ(names_of_group(), made);
  h.env.crash();
  h.restart();
  EXPECT_EQ(names_of_queue(), made);
  for (const char* name : {"a", "b", "c"}) {
    const PartitionState* p = h.node().store().partition("q", name);
    ASSERT_NE(p, nullptr) << name;
    EXPECT_EQ(p->name, name);
  }
  h.push("q", "a", {"again"});  // into the same partition, not a new one
  EXPECT_EQ(h.node().store().partition("q", "a")->next_offset, Offset(2));
  EXPECT_EQ(h.node().store().queue("q")->partitions.size(), 3u);
}

// A page of a queue's partitions is taken by name from partitions made in any order, its
// search counts what it matched, and the page carries the queue's sums rather than the page's.
TEST(Consume, AQueuePageIsTakenByNameAndCarriesTheQueuesSums) {
  Harness h;
  std::vector<std::string> names;
  for (int i = 0; i < 40; ++i) names.push_back("p" + std::to_string((i * 17) % 40));
  for (const std::string& name : names) h.push("q", name, {"m-" + name});
  h.push("q", "p7", {"m-p7-again"});
  std::vector<std::string> sorted = names;
  std::sort(sorted.begin(), sorted.end());
  auto page = [&](uint64_t offset, uint64_t limit, const std::string& search) {
    QueuesReply r = h.call<QueuesReply>(QueueGetCmd{"q", offset, limit, search});
    return r.queues.at(0);
  };
  std::vector<std::string> seen;
  for (uint64_t offset = 0; offset < 40; offset += 15) {
    QueueView v = page(offset, 15, "");
    EXPECT_EQ(v.partitions_matched, 40u);
    EXPECT_EQ(v.messages, 41u) << "the queue's sums, not the page's";
    EXPECT_EQ(v.pending, 41u);
    for (const PartitionStatsView& p : v.partitions) seen.push_back(p.name);
  }
  EXPECT_EQ(seen, sorted);
  QueueView p7 = page(0, 15, "p7");
  ASSERT_EQ(p7.partitions.size(), 1u);
  EXPECT_EQ(p7.partitions_matched, 1u);
  EXPECT_EQ(p7.partitions[0].total, 2u);
  QueueView ones = page(1, 3, "1");  // p1, p10..p19, p21, p31: 13 match, from the second
  EXPECT_EQ(ones.partitions_matched, 13u);
  ASSERT_EQ(ones.partitions.size(), 3u);
  EXPECT_EQ(ones.partitions[0].name, "p10");
  EXPECT_EQ(ones.partitions[2].name, "p12");
  EXPECT_TRUE(page(40, 15, "").partitions.empty());
}

// A queue's partitions each count their own dead letters (the queue-mode group's), in the
// whole queue detail and a page of it alike.
TEST(Consume, EachPartitionOfAQueueDetailCountsItsOwnDeadLetters) {
  Harness h;
  QueueOptionsPatch o;
  o.retry_limit = 0;
  configure(h, "q", o);
  h.push("q", "a", {"a1"});
  h.push("q", "b", {"b1", "b2", "b3"});
  h.push("q", "c", {"c1"});
  for (int i = 0; i < 2; ++i) {
    PopReply r = h.pop("q", kQueueModeGroup, 1, "b");
    ASSERT_EQ(r.messages.size(), 1u);
    EXPECT_TRUE(h.ack(r.messages[0], kQueueModeGroup, AckStatus::failed, r.lease_id).dlq);
  }
  PopReply r = h.pop("q", kQueueModeGroup, 1, "c");
  ASSERT_EQ(r.messages.size(), 1u);
  EXPECT_TRUE(h.ack(r.messages[0], kQueueModeGroup, AckStatus::failed, r.lease_id).dlq);
  auto dead_of = [](const QueueView& v) {
    std::map<std::string, uint64_t> dead;
    for (const PartitionStatsView& p : v.partitions) dead[p.name] = p.dead_letter;
    return dead;
  };
  std::map<std::string, uint64_t> want{{"Default", 0}, {"a", 0}, {"b", 2}, {"c", 1}};
  EXPECT_EQ(dead_of(h.call<QueuesReply>(QueueGetCmd{"q"}).queues.at(0)), want);
  EXPECT_EQ(dead_of(h.call<QueuesReply>(QueueGetCmd{"q", 0, 10, ""}).queues.at(0)), want);
  EXPECT_EQ(dead_of(h.call<QueuesReply>(QueueGetCmd{"q", 2, 1, ""}).queues.at(0)),
            (std::map<std::string, uint64_t>{{"b", 2}}));
}

// A group's details a page at a time: by name from partitions made in any order, its search
// counted, and its lag over every partition of the queue, not the page's.
TEST(Consume, AGroupPageIsTakenByNameAndItsLagCountsEveryPartition) {
  Harness h;
  std::vector<std::string> names;
  for (int i = 0; i < 30; ++i) names.push_back("p" + std::to_string((i * 7) % 30));
  for (const std::string& name : names) h.push("q", name, {"m-" + name});
  h.push("other", "x", {"m-x"});
  h.call<PopReply>(pop_cmd("q", "g", 1));
  h.call<PopReply>(pop_cmd("other", "g", 1));
  std::vector<std::string> sorted = names;
  std::sort(sorted.begin(), sorted.end());
  auto page = [&](uint64_t offset, uint64_t limit, const std::string& search) {
    GroupsReply r = h.call<GroupsReply>(GroupDetailsCmd{"g", "q", offset, limit, search});
    EXPECT_EQ(r.groups.size(), 1u) << "only the queue named";
    return r.groups.at(0);
  };
  std::vector<std::string> seen;
  for (uint64_t offset = 0; offset < 30; offset += 12) {
    GroupView v = page(offset, 12, "");
    EXPECT_EQ(v.partitions_matched, 30u);
    EXPECT_EQ(v.total_lag, 30u) << "every partition's lag, the leased message's included";
    EXPECT_EQ(v.members, 1u);
    for (const GroupPartitionView& p : v.partitions) seen.push_back(p.partition);
  }
  EXPECT_EQ(seen, sorted);
  GroupView twos = page(0, 5, "2");  // p2, p12, p20..p29: 12 match
  EXPECT_EQ(twos.partitions_matched, 12u);
  ASSERT_EQ(twos.partitions.size(), 5u);
  EXPECT_EQ(twos.partitions[0].partition, "p12");
  EXPECT_EQ(twos.partitions[1].partition, "p2");
  EXPECT_EQ(h.call<GroupsReply>(GroupDetailsCmd{"g", "", 0, 100, ""}).groups.size(), 2u);
}

TEST(Consume, DlqReplayPushesTheMessageAgainOnce) {
  Harness h;
  QueueOptionsPatch p;
  p.retry_limit = 0;
  configure(h, "q", p);
  h.push("q", "Default", {"poison"});
  PopReply r = h.call<PopReply>(pop_cmd("q", "g", 1));
  EXPECT_TRUE(h.ack(r.messages[0], "g", AckStatus::failed, r.lease_id).dlq);
  DlqReply d = h.call<DlqReply>(DlqQueryCmd{"q", "", 10});
  ASSERT_EQ(d.records.size(), 1u);
  DlqReplayCmd replay{d.records[0].id, make_uuid_v7(1, 2, 3)};
  DlqReplayReply rr = h.call<DlqReplayReply>(replay);
  ASSERT_TRUE(rr.success) << rr.error;
  EXPECT_EQ(rr.push.offset, Offset(1));
  EXPECT_EQ(h.call<DlqReply>(DlqQueryCmd{"q", "", 10}).total, 0u);
  EXPECT_FALSE(h.call<DlqReplayReply>(replay).success);
  PopReply again = h.call<PopReply>(pop_cmd("q", "g", 1));
  ASSERT_EQ(again.messages.size(), 1u);
  EXPECT_EQ(again.messages[0].transaction_id, "dlq:" + std::to_string(d.records[0].id));
  EXPECT_EQ(again.messages[0].payload, "{\"t\":\"poison\"}");
}

// Deleting a queue drops the cursors of all its partitions and no other queue's.
TEST(Consume, DeletedQueueTakesItsCursorsAndLeavesTheOthers) {
  Harness h;
  for (const char* name : {"p1", "p2", "p3"}) {
    h.push("gone", name, {std::string("g-") + name});
    h.push("kept", name, {std::string("k-") + name});
  }
  for (const char* q : {"gone", "kept"}) {
    PopCmd c = pop_cmd(q, "g", 10);
    c.partitions = 3;
    ASSERT_EQ(h.call<PopReply>(c).messages.size(), 3u) << q;
  }
  ASSERT_EQ(h.node().store().cursors().size(), 6u);
  h.call<GroupChangeReply>(QueueDeleteCmd{"gone"});
  QueueId kept = h.node().store().queue("kept")->id;
  ASSERT_EQ(h.node().store().cursors().size(), 3u);
  h.node().store().cursors().for_each([&](const std::string&, PartitionId pid, const CursorRow&) {
    EXPECT_EQ(h.node().store().partition(pid)->queue, kept);
  });
}

TEST(Consume, DeletedQueueIsGoneAndItsNameCanBeUsedAgain) {
  Harness h;
  h.push("q", "Default", {"a"});
  h.call<PopReply>(pop_cmd("q", "g", 1));
  h.call<GroupChangeReply>(QueueDeleteCmd{"q"});
  EXPECT_EQ(h.node().store().queue("q"), nullptr);
  EXPECT_EQ(h.push("q", "Default", {"a"}).results[0].offset, Offset(0));
  h.env.crash();
  h.restart();
  ASSERT_NE(h.node().store().queue("q"), nullptr);
  EXPECT_EQ(h.node().store().queue("q")->id, QueueId(2));
  EXPECT_EQ(h.call<PopReply>(pop_cmd("q", "g", 5)).messages.size(), 1u);
}

TEST(Consume, MessageGetBrowseAndQueueListing) {
  Harness h;
  h.push("shop.q", "p1", {"a", "b"});
  h.push("shop.q", "p2", {"c"});
  MessageGetCmd get{PartitionId(1), "b", hash_of("b")};
  MessagesReply one = h.call<MessagesReply>(get);
  ASSERT_TRUE(one.found);
  EXPECT_EQ(one.messages[0].offset, Offset(1));
  MessageBrowseCmd browse;
  browse.queue = "shop.q";
  browse.limit = 2;
  MessagesReply newest = h.call<MessagesReply>(browse);
  ASSERT_EQ(newest.messages.size(), 2u);
  EXPECT_EQ(newest.messages[0].transaction_id, "c");
  QueuesReply qs = h.call<QueuesReply>(QueueListCmd{"shop", ""});
  ASSERT_EQ(qs.queues.size(), 1u);
  EXPECT_EQ(qs.queues[0].messages, 3u);
  EXPECT_EQ(qs.queues[0].pending, 3u);
  EXPECT_EQ(qs.queues[0].partition_count, 2u);
}

// The store keeps each queue's counts as messages come, are consumed in queue mode and go;
// a queue list reads them rather than walking the partitions, and a checkpoint's decode
// arrives at the same ones.
TEST(Consume, QueueCountsFollowPushesPopsAcksAndDeletes) {
  const std::string qm = "__QUEUE_MODE__";
  Harness h;
  PartitionId p1 = h.push("q", "p1", {"a", "b", "c", "d", "e"}).results[0].partition_id;
  PartitionId p2 = h.push("q", "p2", {"f", "g", "h"}).results[0].partition_id;
  h.push("r", "x", {"i", "j"});
  auto q_view = [&] {
    QueuesReply qs = h.call<QueuesReply>(QueueListCmd{});
    for (const QueueView& v : qs.queues)
      if (v.name == "q") return v;
    ADD_FAILURE() << "queue q is not listed";
    return QueueView{};
  };
  QueueView q = q_view();
  EXPECT_EQ(q.messages, 8u);
  EXPECT_EQ(q.pending, 8u);
  EXPECT_EQ(q.processing, 0u);

  PopReply r = h.pop("q", qm, 2, "p1");
  ASSERT_EQ(r.messages.size(), 2u);
  h.env.advance_ms(10);  // the lease's checkpoint commits
  q = q_view();
  EXPECT_EQ(q.pending, 8u);  // pending counts what is in processing too
  EXPECT_EQ(q.processing, 2u);
  EXPECT_TRUE(h.ack(r.messages[0], qm, AckStatus::completed, r.lease_id).success);
  EXPECT_TRUE(h.ack(r.messages[1], qm, AckStatus::completed, r.lease_id).success);
  h.env.advance_ms(10);
  q = q_view();
  EXPECT_EQ(q.messages, 8u);
  EXPECT_EQ(q.pending, 6u);
  EXPECT_EQ(q.processing, 0u);

  EXPECT_TRUE(h.call<MessageDeleteReply>(MessageDeleteCmd{p1, "e", hash_of("e")}).deleted);
  h.env.advance_ms(10);
  q = q_view();
  EXPECT_EQ(q.messages, 7u);  // c, d and p2's three
  EXPECT_EQ(q.pending, 5u);
  // r's counts go with it.
  QueueId r_id = h.node().store().queue(std::string("r"))->id;
  EXPECT_EQ(h.node().store().queue_counts(r_id).kept, 2u);
  h.call<GroupChangeReply>(QueueDeleteCmd{"r"});
  h.env.advance_ms(10);
  EXPECT_EQ(h.node().store().queue_counts(r_id), QueueCounts{});
  EXPECT_EQ(h.node().store().partition(p2)->kept(), 3u);

  const Store& s = h.node().store();
  Bytes b = encode_checkpoint(s, Term(1));
  auto c = decode_checkpoint(b.data(), b.size());
  ASSERT_TRUE(c.ok()) << c.error().message;
  QueueId id = s.queue(std::string("q"))->id;
  EXPECT_EQ(c.value().store.queue_counts(id), s.queue_counts(id));
  EXPECT_EQ(s.queue_counts(id).unconsumed, 5u);
}

}  // namespace
}  // namespace queen::testing

namespace queen::testing {
namespace {

std::string numbered(size_t i) {
  std::string s = std::to_string(i);
  return "p" + std::string(6 - s.size(), '0') + s;
}

std::optional<GroupLagMetrics> metrics_lag(Harness& h, const std::string& group) {
  for (const GroupLagMetrics& g : h.call<MetricsReply>(MetricsCmd{}).groups)
    if (g.group == group) return g;
  return std::nullopt;
}

// A group on a queue of more partitions than a lag walk's slice: its first pop looks at the
// partitions only as far as it needs, and its lag is counted a slice at a time between
// requests, so no metrics answer waits for a walk over every partition.
TEST(Consume, AGroupOnAQueueLargerThanASliceIsCountedASliceAtATime) {
  Harness h;
  const size_t n = Engine::kLagWalkSlicePartitions + 100;
  for (size_t i = 0; i < n; i += 1000) {
    PushCmd c;
    for (size_t j = i; j < std::min(n, i + 1000); ++j)
      c.items.push_back(h.push_cmd("q", numbered(j), {"m" + std::to_string(j)}).items.at(0));
    ASSERT_EQ(h.call<PushReply>(c).results.size(), std::min(n, i + 1000) - i);
  }
  PopReply first = h.pop("q", "g", 1);
  ASSERT_EQ(first.messages.size(), 1u);
  EXPECT_EQ(first.messages[0].partition, numbered(0));  // the oldest partition first

  EXPECT_FALSE(metrics_lag(h, "g").has_value()) << "not walked yet: left out, not zero";
  GroupsReply listed = h.call<GroupsReply>(GroupListCmd{});  // counts it at the request
  ASSERT_EQ(listed.groups.size(), 1u);
  EXPECT_EQ(listed.groups[0].total_lag, n);  // the leased message is not consumed yet
  EXPECT_EQ(listed.groups[0].partitions_with_lag, n);
  EXPECT_EQ(listed.groups[0].members, 1u);

  h.ack(first.messages[0], "g", AckStatus::completed, first.lease_id);
  PopReply second = h.pop("q", "g", 1);
  ASSERT_EQ(second.messages.size(), 1u);
  EXPECT_EQ(second.messages[0].partition, numbered(1));
  h.ack(second.messages[0], "g", AckStatus::completed, second.lease_id);
  // Two walks of n / slice + 1 slices each at most, and the figures show the acks.
  size_t steps_max = 2 * (n / Engine::kLagWalkSlicePartitions + 2);
  std::optional<GroupLagMetrics> lag;
  for (size_t step = 0; step < steps_max; ++step) {
    lag = metrics_lag(h, "g");
    if (lag && lag->lag_messages == n - 2) break;
    h.env.advance_ms(Engine::kLagStepEveryMs);
  }
  ASSERT_TRUE(lag.has_value());
  EXPECT_EQ(lag->lag_messages, n - 2);
  EXPECT_EQ(lag->partitions_with_lag, n - 2);
}

// A cursor row nobody is changing is held once, by the store: after a group consumed every
// partition and its acks were answered (committed), the engine holds no row beside the
// store's, and the group's next pop reads its cursors there (it gets only what came after). A
// deleted group's rows are hidden at once, and the group starts over.
TEST(Consume, CommittedCursorRowsAreHeldOnceAndReadFromTheStore) {
  Harness h;
  constexpr size_t kPartitions = 40;
  for (size_t i = 0; i < kPartitions; ++i)
    h.push("q", "p" + std::to_string(i), {"m" + std::to_string(i)});
  size_t acked = 0;
  for (size_t round = 0; round < kPartitions && acked < kPartitions; ++round) {
    PopCmd c = pop_cmd("q", "g", 10);
    c.partitions = 8;
    PopReply r = h.call<PopReply>(c);
    for (const auto& m : r.messages)
      acked += h.ack(m, "g", AckStatus::completed, r.lease_id).success ? 1 : 0;
  }
  ASSERT_EQ(acked, kPartitions);
  EXPECT_EQ(h.node().store().cursors().size(), kPartitions);
  EXPECT_EQ(h.node().cursor_rows_held(), 0u);
  EXPECT_EQ(h.node().leases_held(), 0u);  // each ack released its lease

  PopCmd all = pop_cmd("q", "g", 100);
  all.partitions = Engine::kPopPartitionsMax;
  EXPECT_TRUE(h.call<PopReply>(all).messages.empty());
  h.push("q", "p7", {"late"});
  PopReply late = h.call<PopReply>(all);
  ASSERT_EQ(late.messages.size(), 1u);
  EXPECT_EQ(late.messages[0].transaction_id, "late");
  EXPECT_TRUE(h.ack(late.messages[0], "g", AckStatus::completed, late.lease_id).success);
  EXPECT_EQ(h.node().cursor_rows_held(), 0u);

  GroupChangeReply d = h.call<GroupChangeReply>(GroupDeleteCmd{"g", "", true});
  EXPECT_EQ(d.partitions, kPartitions);
  EXPECT_EQ(h.call<PopReply>(all).messages.size(), kPartitions + 1);
}

}  // namespace
}  // namespace queen::testing
