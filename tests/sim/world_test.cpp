// The simulated world: event order, node crashes and restarts over the real recovery path,
// pauses, lost replies, and the network between nodes.
#include <gtest/gtest.h>

#include <xxhash.h>

#include <vector>

#include "core/state/store.h"
#include "io/sim/network.h"
#include "io/sim/world.h"

namespace queen::sim {
namespace {

struct Sink : ClientSink {
  std::vector<ReplyHandle> sent, lost, delivered;
  void on_reply_sent(ReplyHandle h, const Reply&, bool was_lost) override {
    (was_lost ? lost : sent).push_back(h);
  }
  void on_reply(ReplyHandle h, const Reply&) override { delivered.push_back(h); }
};

CommandEnvelope push_one(SimWorld& w, const std::string& txn) {
  PushItem it;
  it.queue = "q";
  it.partition = "p";
  it.transaction_id = txn;
  XXH128_hash_t h = XXH3_128bits(txn.data(), txn.size());
  it.txn_hash = Hash128{h.low64, h.high64};
  it.message_id = make_uuid_v7(w.node_now_us(0) / 1000, txn.size(), 99);
  it.payload = "{}";
  CommandEnvelope env;
  env.request_id = RequestId{make_uuid_v7(w.node_now_us(0) / 1000, 1, txn.size())};
  env.deadline_ms = w.node_now_us(0) / 1000 + 5000;
  env.command = PushCmd{{it}};
  return env;
}

void run_for(SimWorld& w, int64_t us) {
  int64_t end = w.now_us() + us;
  while (w.now_us() < end && w.step()) {
  }
}

TEST(SimWorld, EventsRunInTimeThenSequenceOrder) {
  SimWorld w(1, ClientNetFaults{});
  std::vector<int> order;
  w.after(5, "e5", [&] { order.push_back(5); });
  w.after(3, "e3a", [&] { order.push_back(31); });
  w.after(3, "e3b", [&] { order.push_back(32); });
  w.after(1, "e1", [&] { order.push_back(1); });
  w.at(
      w.now_us() + 2, "guarded", [&] { order.push_back(2); }, EventTarget{}, [] { return false; });
  while (w.step()) {
  }
  EXPECT_EQ(order, (std::vector<int>{1, 31, 32, 5}));
  EXPECT_EQ(w.elapsed_us(), 5);
}

TEST(SimWorld, CrashDropsTheProcessAndRestartRecoversFromDisk) {
  SimWorld w(2, ClientNetFaults{});
  NodeSetup setup;
  setup.disk.crash_keep_per_mille = 0;
  setup.disk.crash_torn_per_mille = 0;
  w.add_node(setup);
  w.start_node(0);
  Sink sink;
  ASSERT_TRUE(w.submit(0, push_one(w, "a"), &sink));
  run_for(w, 1'000'000);
  ASSERT_EQ(sink.delivered.size(), 1u);
  ASSERT_TRUE(w.submit(0, push_one(w, "b"), &sink));  // in flight when the node dies
  w.crash_node(0, "test", /*restart=*/false);
  EXPECT_FALSE(w.up(0));
  EXPECT_EQ(w.node(0), nullptr);
  EXPECT_FALSE(w.submit(0, push_one(w, "c"), &sink)) << "a down node refuses connections";
  run_for(w, 1'000'000);
  EXPECT_EQ(sink.delivered.size(), 1u) << "the command sent to the dead process never answers";
  w.start_node(0);
  ASSERT_TRUE(w.up(0));
  const PartitionState* p = w.node(0)->store().partition("q", "p");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->next_offset.value, 1u) << "the answered push is back, the unanswered one is not";
  EXPECT_EQ(w.counters()["crashes"], 1u);
  EXPECT_EQ(w.incarnation(0), 2u);
}

TEST(SimWorld, APausedNodeRunsNothingUntilItResumes) {
  SimWorld w(3, ClientNetFaults{});
  w.add_node(NodeSetup{});
  w.start_node(0);
  run_for(w, 100'000);
  Sink sink;
  w.pause_node(0, 3'000'000);
  int64_t paused_at = w.now_us();
  ASSERT_TRUE(w.submit(0, push_one(w, "a"), &sink));
  run_for(w, 2'900'000);
  EXPECT_TRUE(sink.sent.empty());
  run_for(w, 1'000'000);
  ASSERT_EQ(sink.delivered.size(), 1u);
  EXPECT_GE(w.now_us() - paused_at, 3'000'000);
}

TEST(SimWorld, RepliesAreLostAtTheirRate) {
  SimWorld w(4, ClientNetFaults{.reply_loss_per_mille = 1000});
  w.add_node(NodeSetup{});
  w.start_node(0);
  Sink sink;
  ASSERT_TRUE(w.submit(0, push_one(w, "a"), &sink));
  run_for(w, 1'000'000);
  EXPECT_EQ(sink.lost.size(), 1u);
  EXPECT_TRUE(sink.delivered.empty());
  EXPECT_EQ(w.counters()["lost_replies"], 1u);
  EXPECT_EQ(w.node(0)->store().partition("q", "p")->next_offset.value, 1u)
      << "the command applied although its answer was lost";
}

TEST(SimNetwork, DeliversDropsDuplicatesAndRespectsCuts) {
  SimWorld w(5, ClientNetFaults{});
  w.add_node(NodeSetup{});
  w.add_node(NodeSetup{});
  w.start_node(0);
  w.start_node(1);
  std::vector<std::pair<int, int>> got;
  SimNetwork net(w, NetFaultRates{}, [&](int from, int to, const Bytes&) {
    got.push_back({from, to});
  });
  net.send(0, 1, Bytes{1});
  run_for(w, 100'000);
  ASSERT_EQ(got.size(), 1u);
  net.cut(0, 1);
  net.send(0, 1, Bytes{2});
  net.send(1, 0, Bytes{3});  // the cut is one way
  run_for(w, 100'000);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[1], (std::pair<int, int>{1, 0}));
  net.heal();
  net.set_rates(NetFaultRates{.dup_per_mille = 1000});
  net.send(0, 1, Bytes{4});
  run_for(w, 100'000);
  EXPECT_EQ(got.size(), 4u);
  net.set_rates(NetFaultRates{.drop_per_mille = 1000});
  net.send(0, 1, Bytes{5});
  run_for(w, 100'000);
  EXPECT_EQ(got.size(), 4u);
  EXPECT_EQ(net.in_flight(), 0u);
}

}  // namespace
}  // namespace queen::sim
