// Whole lists of partitions (a group's details without a limit, the lagging list, a queue's
// whole detail) are read a slice at a time: other requests are answered between the slices,
// and the list, once answered, names every partition once, in id order, with sums over all.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <set>
#include <string>

#include "core/consume/engine.h"
#include "tests/core/mem_env.h"

namespace queen::testing {
namespace {

constexpr uint32_t kSlice = 3;
constexpr size_t kPartitions = 10;

NodeConfig sliced(uint32_t reads_max = 8) {
  NodeConfig cfg;
  cfg.list_slice_partitions = kSlice;
  cfg.list_reads_max = reads_max;
  return cfg;
}

// Queue q with kPartitions partitions p0..p9 of two messages each; group g has consumed and
// acknowledged the first message of p0..p4.
void fill(Harness& h) {
  for (size_t i = 0; i < kPartitions; ++i) {
    std::string p = "p" + std::to_string(i);
    h.push("q", p, {p + "a", p + "b"});
  }
  for (size_t i = 0; i < kPartitions / 2; ++i) {
    PopReply r = h.pop("q", "g", 1, "p" + std::to_string(i));
    ASSERT_EQ(r.messages.size(), 1u);
    ASSERT_TRUE(h.ack(r.messages[0], "g", AckStatus::completed, r.lease_id).success);
  }
}

std::vector<PartitionId> queue_partitions(Harness& h, const std::string& q) {
  return h.node().store().queue(q)->partitions;
}

TEST(WholeLists, AGroupsDetailsAreReadASliceAtATimeWithOtherRequestsAnsweredBetween) {
  Harness h(sliced());
  fill(h);
  ReplyHandle list = h.send(GroupDetailsCmd{"g"});
  EXPECT_FALSE(h.take(list).has_value()) << "more partitions than a slice: not read at once";
  ReplyHandle other = h.send(QueueListCmd{});
  EXPECT_TRUE(h.take(other).has_value()) << "answered while the list is being read";
  // A partition made after the list started, beyond where it stands, is listed too.
  h.send(h.push_cmd("q", "p10", {"p10a"}));
  h.env.run();
  // 11 partitions, 3 a slice: the request's own slice and at least 3 more.
  EXPECT_GE(h.node().stats().list_slices, 3u);

  GroupsReply r = h.take_as<GroupsReply>(list);
  ASSERT_EQ(r.groups.size(), 1u);
  const GroupView& v = r.groups[0];
  std::vector<PartitionId> listed;
  for (const GroupPartitionView& p : v.partitions) listed.push_back(p.partition_id);
  EXPECT_EQ(listed, queue_partitions(h, "q"));  // each once, in id order
  ASSERT_EQ(v.partitions.size(), kPartitions + 1);
  uint64_t lag = 0;
  for (const GroupPartitionView& p : v.partitions) {
    lag += p.offset_lag;
    // p10 holds one message; g consumed one of the two of p0..p4.
    uint64_t expected = p.partition == "p10" || p.partition < "p5" ? 1 : 2;
    EXPECT_EQ(p.offset_lag, expected) << p.partition;
  }
  EXPECT_EQ(v.total_lag, lag);
  EXPECT_EQ(v.total_lag, 5u * 1 + 5u * 2 + 1u);
  EXPECT_EQ(v.members, kPartitions / 2);  // partitions with a cursor row
}

TEST(WholeLists, TheLaggingListIsReadASliceAtATimeAndHoldsOnlyTheLaggingPartitions) {
  Harness h(sliced());
  fill(h);
  h.env.advance_ms(2000);
  h.push("q", "fresh", {"f1"});  // lags by less than a second
  GroupListCmd c;
  c.lagging_min_s = 1;
  ReplyHandle list = h.send(c);
  EXPECT_FALSE(h.take(list).has_value());
  h.env.run();
  GroupsReply r = h.take_as<GroupsReply>(list);
  EXPECT_TRUE(r.lagging);
  std::set<std::string> lagging;
  for (const GroupView& v : r.groups)
    for (const GroupPartitionView& p : v.partitions) {
      EXPECT_GE(p.time_lag_s, 2) << p.partition;
      lagging.insert(v.group + "/" + p.partition);
    }
  std::set<std::string> expected;
  for (size_t i = 0; i < kPartitions; ++i) expected.insert("g/p" + std::to_string(i));
  EXPECT_EQ(lagging, expected);
}

TEST(WholeLists, AQueuesWholeDetailIsReadASliceAtATimeAndSummed) {
  Harness h(sliced());
  fill(h);
  ReplyHandle list = h.send(QueueGetCmd{"q"});
  EXPECT_FALSE(h.take(list).has_value());
  h.env.run();
  QueuesReply r = h.take_as<QueuesReply>(list);
  ASSERT_EQ(r.queues.size(), 1u);
  const QueueView& v = r.queues[0];
  std::vector<PartitionId> listed;
  uint64_t messages = 0;
  for (const PartitionStatsView& p : v.partitions) {
    listed.push_back(p.id);
    messages += p.total;
    EXPECT_NE(p.oldest_us, 0) << p.name;
    EXPECT_GE(p.newest_us, p.oldest_us) << p.name;
  }
  EXPECT_EQ(listed, queue_partitions(h, "q"));
  EXPECT_EQ(messages, 2 * kPartitions);
  EXPECT_EQ(v.messages, messages);
  EXPECT_EQ(v.partition_count, kPartitions);
}

TEST(WholeLists, AtMostTheBoundAreReadAtOnceAndAFurtherOneIsAnsweredOverloaded) {
  Harness h(sliced(/*reads_max=*/1));
  fill(h);
  ReplyHandle first = h.send(QueueGetCmd{"q"});
  ReplyHandle second = h.send(GroupDetailsCmd{"g"});
  std::optional<Reply> refused = h.take(second);
  ASSERT_TRUE(refused.has_value()) << "answered at once";
  const auto* e = std::get_if<ErrorReply>(&refused->body);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->code, api::Errc::overloaded);
  EXPECT_GT(e->retry_after_s, 0);
  h.env.run();
  EXPECT_EQ(h.take_as<QueuesReply>(first).queues.at(0).partitions.size(), kPartitions);
  // A list within one slice is answered at once, however many are being read.
  Harness small(sliced(/*reads_max=*/1));
  small.push("q", "only", {"m"});
  small.send(QueueGetCmd{"q"});
  EXPECT_TRUE(small.take(small.send(QueueGetCmd{"q"})).has_value());
}

TEST(WholeLists, AListPastItsDeadlineOrCancelledIsDropped) {
  Harness h(sliced());
  fill(h);
  ReplyHandle late = h.send(GroupDetailsCmd{"g"}, /*timeout_ms=*/-1);
  ReplyHandle gone = h.send(QueueGetCmd{"q"});
  h.env.perform(h.node().on_cancel(gone));
  h.env.run();
  std::optional<Reply> r = h.take(late);
  ASSERT_TRUE(r.has_value());
  const auto* e = std::get_if<ErrorReply>(&r->body);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->code, api::Errc::timeout);
  EXPECT_FALSE(h.take(gone).has_value()) << "a cancelled list is not answered";
  // The node goes on: the next list is read whole.
  ReplyHandle next = h.send(QueueGetCmd{"q"});
  h.env.run();
  EXPECT_EQ(h.take_as<QueuesReply>(next).queues.at(0).partitions.size(), kPartitions);
}

TEST(WholeLists, AQueueDeletedWhileItIsListedIsAnsweredWithWhatWasRead) {
  Harness h(sliced());
  fill(h);
  ReplyHandle list = h.send(QueueGetCmd{"q"});
  h.send(QueueDeleteCmd{"q"});
  h.env.run();
  QueuesReply r = h.take_as<QueuesReply>(list);
  ASSERT_EQ(r.queues.size(), 1u);
  EXPECT_EQ(r.queues[0].partitions.size(), kSlice);  // the first slice, read at the request
  EXPECT_EQ(h.node().store().queue("q"), nullptr);
}

// A lagging list's rows as Engine::list_partitions grows them, over `total` partitions of
// which those with lags(i) lag: the rows moved by its growths and its capacity at the end.
struct Grown {
  size_t rows = 0, moved = 0, capacity = 0;
};
template <class Lags>
Grown grow_lagging_list(size_t total, Lags lags) {
  Grown g;
  for (size_t read = 0; read < total; ++read) {
    if (!lags(read)) continue;
    if (g.rows == g.capacity) {
      g.moved += g.rows;
      size_t next = Engine::lagging_rows_ahead(g.rows, read, total);
      RC_ASSERT(next > g.rows);
      g.capacity = next;
    }
    ++g.rows;
  }
  return g;
}

RC_GTEST_PROP(WholeLists, ALaggingListNeverReservesPastItsQueueAndMovesItsRowsOnceIfLagIsEven, ()) {
  size_t total = *rc::gen::inRange<size_t>(1, 1u << 20);
  // Any lag pattern: never more rows reserved than the queue has partitions.
  auto bits = *rc::gen::container<std::vector<bool>>(rc::gen::arbitrary<bool>());
  auto start = *rc::gen::inRange<size_t>(0, total);
  Grown any = grow_lagging_list(
      total, [&](size_t i) { return i >= start && !bits.empty() && bits[i % bits.size()]; });
  RC_ASSERT(any.capacity <= total);
  // Every k-th partition lags: the rows move while they are a sample's worth, not after.
  size_t k = *rc::gen::inRange<size_t>(1, 64);
  Grown even = grow_lagging_list(total, [&](size_t i) { return i % k == 0; });
  RC_ASSERT(even.capacity <= total);
  RC_ASSERT(even.moved <= 4 * Engine::kLaggingSamplePartitions);
}

}  // namespace
}  // namespace queen::testing
