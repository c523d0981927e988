// Message deletion as a logged effect (codec, store apply, delivery, reads, recovery) and the
// node's metrics snapshot (MetricsCmd) following pushes, pops, acks and deletes.
#include <gtest/gtest.h>

#include "tests/core/mem_env.h"

namespace queen::testing {
namespace {

MessageDeleteReply delete_message(Harness& h, PartitionId pid, const std::string& txn) {
  return h.call<MessageDeleteReply>(MessageDeleteCmd{pid, txn, hash_of(txn)});
}

MessagesReply get_message(Harness& h, PartitionId pid, const std::string& txn) {
  return h.call<MessagesReply>(MessageGetCmd{pid, txn, hash_of(txn)});
}

const QueueMetrics* queue_metrics(const MetricsReply& m, const std::string& queue) {
  for (const QueueMetrics& q : m.queues)
    if (q.queue == queue) return &q;
  return nullptr;
}

TEST(MessageDelete, EffectRoundTripsThroughTheEntryCodec) {
  Entry e;
  e.index = LogIndex(4);
  e.term = Term(2);
  e.now_us = 7;
  e.effects.push_back(EffMessageDelete{QueueId(3), PartitionId(9), Offset(41)});
  Bytes b = encode_entry(e);
  auto d = decode_entry(b.data(), b.size());
  ASSERT_TRUE(d.ok()) << d.error().message;
  EXPECT_EQ(d.value(), e);
  for (size_t n = 0; n < b.size(); ++n) EXPECT_FALSE(decode_entry(b.data(), n).ok()) << n;
}

TEST(MessageDelete, ApplyIsIdempotentAndIgnoresWhatDoesNotExist) {
  Store s;
  Entry e;
  e.index = LogIndex(1);
  e.effects.push_back(EffCreateQueue{QueueId(1), "q", QueueOptions{}});
  e.effects.push_back(EffCreatePartition{PartitionId(1), QueueId(1), "p"});
  EffAppend a;
  a.pid = PartitionId(1);
  a.queue = QueueId(1);
  a.base = Offset(0);
  a.count = 3;
  e.effects.push_back(a);
  e.effects.push_back(EffMessageDelete{QueueId(1), PartitionId(1), Offset(2)});
  e.effects.push_back(EffMessageDelete{QueueId(1), PartitionId(1), Offset(0)});
  e.effects.push_back(EffMessageDelete{QueueId(1), PartitionId(1), Offset(2)});  // again
  e.effects.push_back(EffMessageDelete{QueueId(1), PartitionId(1), Offset(3)});  // not there
  e.effects.push_back(EffMessageDelete{QueueId(1), PartitionId(8), Offset(0)});  // no partition
  ASSERT_TRUE(s.apply(e, {}).ok());
  const PartitionState* p = s.partition(PartitionId(1));
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->deleted, (CompactVector<Offset>{Offset(0), Offset(2)}));
  EXPECT_TRUE(p->is_deleted(Offset(0)));
  EXPECT_FALSE(p->is_deleted(Offset(1)));
  EXPECT_EQ(p->deleted_in(Offset(0), Offset(3)), 2u);
  EXPECT_EQ(p->deleted_in(Offset(1), Offset(2)), 0u);
  EXPECT_EQ(p->deleted_in(Offset(2), Offset(1)), 0u);
}

TEST(MessageDelete, NoGroupIsDeliveredItAndReadsSkipIt) {
  Harness h;
  PartitionId pid = h.push("q", "p", {"a", "b", "c"}).results[0].partition_id;
  MessageDeleteReply d = delete_message(h, pid, "b");
  EXPECT_TRUE(d.deleted);
  EXPECT_FALSE(delete_message(h, pid, "b").deleted);  // already gone
  EXPECT_FALSE(delete_message(h, pid, "zz").deleted);
  EXPECT_FALSE(delete_message(h, PartitionId(77), "a").deleted);
  PopReply g1 = h.pop("q", "g1", 10);
  EXPECT_EQ(txns_of(g1.messages), (std::vector<std::string>{"a", "c"}));
  // The batch completes without the deleted offset in its middle.
  EXPECT_FALSE(h.ack(g1.messages[0], "g1", AckStatus::completed, g1.lease_id).lease_released);
  EXPECT_TRUE(h.ack(g1.messages[1], "g1", AckStatus::completed, g1.lease_id).lease_released);
  EXPECT_EQ(h.node().store().cursor("g1", pid)->next, Offset(3));
  EXPECT_EQ(txns_of(h.pop("q", "g2", 10).messages), (std::vector<std::string>{"a", "c"}));
  EXPECT_FALSE(get_message(h, pid, "b").found);
  EXPECT_TRUE(get_message(h, pid, "c").found);
  MessageBrowseCmd browse;
  browse.queue = "q";
  EXPECT_EQ(txns_of(h.call<MessagesReply>(browse).messages), (std::vector<std::string>{"c", "a"}));
  QueuesReply qs = h.call<QueuesReply>(QueueListCmd{});
  ASSERT_EQ(qs.queues.size(), 1u);
  EXPECT_EQ(qs.queues[0].messages, 2u);  // b no longer counts
  EXPECT_EQ(qs.queues[0].pending, 2u);   // queue mode consumed nothing; b is gone
}

TEST(MessageDelete, TwoDeletesInFlightDeleteOnce) {
  Harness h;
  PartitionId pid = h.push("q", "p", {"a"}).results[0].partition_id;
  h.env.hold_syncs = true;  // the first delete stays planned, not applied
  ReplyHandle first = h.send(MessageDeleteCmd{pid, "a", hash_of("a")});
  h.env.run();
  ReplyHandle second = h.send(MessageDeleteCmd{pid, "a", hash_of("a")});
  h.env.hold_syncs = false;
  h.env.run();
  h.env.advance_ms(10);
  auto r1 = h.take(first), r2 = h.take(second);
  ASSERT_TRUE(r1 && r2);
  EXPECT_TRUE(std::get<MessageDeleteReply>(r1->body).deleted);
  EXPECT_FALSE(std::get<MessageDeleteReply>(r2->body).deleted);
  EXPECT_EQ(h.node().store().partition(pid)->deleted, (CompactVector<Offset>{Offset(0)}));
}

TEST(MessageDelete, ALeasedMessageIsNotDeliveredAgainAfterTheBatchComesBack) {
  Harness h;
  PartitionId pid = h.push("q", "p", {"a", "b"}).results[0].partition_id;
  PopReply r = h.pop("q", "g", 2);
  ASSERT_EQ(r.messages.size(), 2u);
  EXPECT_TRUE(delete_message(h, pid, "b").deleted);
  EXPECT_TRUE(h.ack(r.messages[0], "g", AckStatus::retry, r.lease_id).lease_released);
  PopReply again = h.pop("q", "g", 10);
  EXPECT_EQ(txns_of(again.messages), (std::vector<std::string>{"a"}));
  EXPECT_TRUE(h.ack(again.messages[0], "g", AckStatus::completed, again.lease_id).lease_released);
  EXPECT_TRUE(h.pop("q", "g", 10).messages.empty());
}

TEST(MessageDelete, ItsDeadLetterGoesWithIt) {
  Harness h;
  PartitionId pid = h.push("q", "p", {"a", "b"}).results[0].partition_id;
  PopReply r = h.pop("q", "g", 2);
  ASSERT_EQ(r.messages.size(), 2u);
  EXPECT_TRUE(h.ack(r.messages[0], "g", AckStatus::dlq, r.lease_id).dlq);
  ASSERT_EQ(h.call<DlqReply>(DlqQueryCmd{}).total, 1u);
  EXPECT_TRUE(delete_message(h, pid, "a").deleted);
  EXPECT_EQ(h.call<DlqReply>(DlqQueryCmd{}).total, 0u);
}

TEST(MessageDelete, RecoveryReplaysTheDelete) {
  Harness h;
  PartitionId pid = h.push("q", "p", {"a", "b", "c"}).results[0].partition_id;
  EXPECT_TRUE(delete_message(h, pid, "a").deleted);
  h.env.crash();
  h.restart();
  EXPECT_TRUE(h.node().store().partition(pid)->is_deleted(Offset(0)));
  EXPECT_FALSE(get_message(h, pid, "a").found);
  EXPECT_EQ(txns_of(h.pop("q", "g", 10).messages), (std::vector<std::string>{"b", "c"}));
  EXPECT_FALSE(delete_message(h, pid, "a").deleted);
}

TEST(Metrics, DepthAndCountersFollowPushPopAckAndDelete) {
  Harness h;
  MetricsReply before = h.call<MetricsReply>(MetricsCmd{});
  EXPECT_EQ(before.role, "leader");
  EXPECT_TRUE(before.writable);
  EXPECT_EQ(before.queues.size(), 0u);
  PartitionId pid = h.push("ns.task.q", "p", {"a", "b", "c"}).results[0].partition_id;
  h.push("ns.task.q", "p", {"a"});  // a duplicate
  MetricsReply pushed = h.call<MetricsReply>(MetricsCmd{});
  const QueueMetrics* q = queue_metrics(pushed, "ns.task.q");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->depth, 3u);
  EXPECT_EQ(q->messages, 3u);
  EXPECT_EQ(q->partitions, 1u);
  EXPECT_EQ(q->ns, "ns");
  EXPECT_EQ(q->task, "task");
  EXPECT_EQ(pushed.traffic.push_requests, 2u);
  EXPECT_EQ(pushed.traffic.push_queued, 3u);
  EXPECT_EQ(pushed.traffic.push_duplicates, 1u);
  EXPECT_GT(pushed.entries_committed, before.entries_committed);
  EXPECT_GT(pushed.syncs, before.syncs);
  EXPECT_GE(pushed.commit_index, pushed.applied_index);
  EXPECT_GT(pushed.applied_index, before.applied_index);

  PopReply r = h.pop("ns.task.q", "__QUEUE_MODE__", 1);
  ASSERT_EQ(r.messages.size(), 1u);
  EXPECT_TRUE(h.ack(r.messages[0], "__QUEUE_MODE__", AckStatus::completed, r.lease_id).success);
  EXPECT_TRUE(h.pop("nothing", "g", 1).messages.empty());
  EXPECT_TRUE(delete_message(h, pid, "c").deleted);
  MetricsReply after = h.call<MetricsReply>(MetricsCmd{});
  q = queue_metrics(after, "ns.task.q");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->depth, 1u);  // a acked, c deleted: b is left
  EXPECT_EQ(q->deleted, 1u);
  EXPECT_EQ(after.traffic.pop_delivered, 1u);
  EXPECT_EQ(after.traffic.pop_empty, 1u);
  EXPECT_EQ(after.traffic.pop_messages, 1u);
  EXPECT_EQ(after.traffic.ack_success, 1u);
  EXPECT_EQ(after.traffic.messages_deleted, 1u);
  EXPECT_GT(after.checkpoints, 0u);
  ASSERT_TRUE(after.groups_known);
  ASSERT_EQ(after.groups.size(), 1u);  // the group of the pop on a missing queue has no queue
  EXPECT_EQ(after.groups[0].queue, "ns.task.q");
  EXPECT_EQ(after.groups[0].group, "__QUEUE_MODE__");
}

TEST(Metrics, ErrorAnswersAreCountedByCode) {
  Harness h;
  h.call<ErrorReply>(QueueGetCmd{"missing"});
  h.call<ErrorReply>(QueueGetCmd{"missing"});
  MetricsReply m = h.call<MetricsReply>(MetricsCmd{});
  EXPECT_EQ(m.traffic.errors[api::Errc::queue_not_found], 2u);
}

}  // namespace
}  // namespace queen::testing
