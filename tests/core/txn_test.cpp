// Transactions: one entry that acks the input, pushes the output, writes KV and sets timers,
// all or nothing, also across crashes.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include "tests/core/mem_env.h"

namespace queen::testing {
namespace {

TxnOperation ack_op(const PopMessage& m, const std::string& group, std::optional<LeaseId> lease) {
  TxnOperation op;
  op.is_ack = true;
  op.ack = TxnAck{m.transaction_id, hash_of(m.transaction_id), m.partition_id, lease,
                  AckStatus::completed, "", group};
  return op;
}

TxnOperation push_op(Harness& h, const std::string& queue, const std::string& txn) {
  TxnOperation op;
  op.items = h.push_cmd(queue, "Default", {txn}).items;
  return op;
}

KvOp kv_put(const std::string& key, const std::string& value) {
  KvOp op;
  op.op = KvOpKind::put;
  op.ns = "steps";
  op.key = key;
  op.value = value;
  op.forever = true;
  return op;
}

bool kv_has(Harness& h, const std::string& key) {
  return h.node().store().kv_row({"steps", key}) != nullptr;
}

uint64_t depth(Harness& h, const std::string& queue) {
  const PartitionState* p = h.node().store().partition(queue, "Default");
  return p ? p->next_offset.value : 0;
}

TEST(Transaction, CommitAcksTheInputPushesTheOutputAndWritesKv) {
  Harness h;
  h.push("in", "Default", {"order-1"});
  PopReply in = h.pop("in", "billing", 1);
  ASSERT_EQ(in.messages.size(), 1u);
  TxnCmd t;
  t.operations = {ack_op(in.messages[0], "billing", in.lease_id), push_op(h, "out", "receipt-1")};
  t.kv = {kv_put("order-1", "{\"status\":\"paid\"}")};
  TxnReply r = h.call<TxnReply>(t);
  ASSERT_TRUE(r.success) << r.error;
  ASSERT_EQ(r.results.size(), 3u);
  EXPECT_EQ(r.results[0].type, TxnResultType::ack);
  EXPECT_TRUE(r.results[0].ack.success);
  EXPECT_EQ(r.results[1].type, TxnResultType::push);
  EXPECT_EQ(r.results[1].pushes.at(0).offset, Offset(0));
  EXPECT_EQ(r.results[2].type, TxnResultType::kv);
  EXPECT_EQ(r.results[2].index, 2u);
  EXPECT_TRUE(kv_has(h, "order-1"));
  EXPECT_EQ(depth(h, "out"), 1u);
  EXPECT_TRUE(h.pop("in", "billing", 1).messages.empty());
  h.env.crash();
  h.restart();
  EXPECT_TRUE(h.pop("in", "billing", 1).messages.empty());
  EXPECT_EQ(depth(h, "out"), 1u);
}

TEST(Transaction, ExpiredLeaseRollsBackEverything) {
  Harness h;
  configure(h, "in", {.lease_time_s = 1});
  h.push("in", "Default", {"a"});
  PopReply in = h.pop("in", "g", 1);
  h.env.advance_ms(1100);
  TxnCmd t;
  t.operations = {ack_op(in.messages[0], "g", in.lease_id), push_op(h, "out", "r")};
  t.kv = {kv_put("a", "1")};
  TxnReply r = h.call<TxnReply>(t);
  EXPECT_FALSE(r.success);
  EXPECT_EQ(r.reason, "rejected_ack");
  EXPECT_TRUE(r.results.empty());
  EXPECT_EQ(depth(h, "out"), 0u);
  EXPECT_FALSE(kv_has(h, "a"));
  EXPECT_EQ(h.pop("in", "g", 1).messages.size(), 1u);  // the input is still there
}

TEST(Transaction, DuplicatePushRollsBackAndTheFirstCommitStands) {
  Harness h;
  h.push("in", "Default", {"a", "b"});
  PopReply in = h.pop("in", "g", 2);
  TxnCmd t1;
  t1.operations = {ack_op(in.messages[0], "g", in.lease_id), push_op(h, "out", "det-1")};
  ASSERT_TRUE(h.call<TxnReply>(t1).success);
  TxnCmd t2;
  t2.operations = {ack_op(in.messages[1], "g", in.lease_id), push_op(h, "out", "det-1")};
  TxnReply r = h.call<TxnReply>(t2);
  EXPECT_FALSE(r.success);
  EXPECT_EQ(r.reason, "duplicate");
  EXPECT_EQ(r.error.rfind("QDUP", 0), 0u);
  // The second ack did not apply: message b is still leased, ackable.
  EXPECT_TRUE(h.ack(in.messages[1], "g", AckStatus::completed, in.lease_id).success);
  EXPECT_EQ(depth(h, "out"), 1u);
}

TEST(Transaction, InCallRepeatIsADuplicateInsideTheCommit) {
  Harness h;
  TxnCmd t;
  t.operations = {push_op(h, "out", "same"), push_op(h, "out", "same")};
  TxnReply r = h.call<TxnReply>(t);
  ASSERT_TRUE(r.success);
  EXPECT_EQ(r.results[1].pushes.at(0).status, PushStatus::duplicate);
  EXPECT_EQ(depth(h, "out"), 1u);
}

TEST(Transaction, KvPreconditionRollsBackWithTheFailedIndex) {
  Harness h;
  h.call<KvReply>(KvCmd{{kv_put("gate", "1")}});
  KvOp once;
  once.op = KvOpKind::put_if_absent;
  once.ns = "steps";
  once.key = "gate";
  once.ttl_s = 60;
  once.required = true;
  TxnCmd t;
  t.operations = {push_op(h, "out", "x")};
  t.kv = {kv_put("other", "1"), once};
  TxnReply r = h.call<TxnReply>(t);
  EXPECT_FALSE(r.success);
  EXPECT_EQ(r.reason, "kv_precondition");
  EXPECT_EQ(r.failed_index, 2u);  // flat: the pushed item, kv[0], then kv[1]
  EXPECT_EQ(r.kv_reason, "exists");
  EXPECT_EQ(depth(h, "out"), 0u);
  EXPECT_FALSE(kv_has(h, "other"));
}

TEST(Transaction, PositionsMoveTheGroupCursor) {
  Harness h;
  h.push("in", "Default", {"a", "b", "c"});
  TxnCmd t;
  t.positions = {PositionOp{"in", "g", "Default", Offset(1)}};
  ASSERT_TRUE(h.call<TxnReply>(t).success);
  PopReply r = h.pop("in", "g", 5);
  ASSERT_EQ(r.messages.size(), 1u);
  EXPECT_EQ(r.messages[0].transaction_id, "c");
  TxnCmd missing;
  missing.positions = {PositionOp{"nope", "g", "Default", Offset(1)}};
  EXPECT_EQ(h.call<TxnReply>(missing).reason, "queue_not_found");
}

TEST(Transaction, CrashBetweenItsLogSyncsLeavesNothingBehind) {
  Harness h;
  h.push("in", "Default", {"a"});
  h.push("out", "Default", {"seed"});
  PopReply in = h.pop("in", "g", 1);
  h.env.hold_syncs = true;
  TxnCmd t;
  t.operations = {ack_op(in.messages[0], "g", in.lease_id), push_op(h, "out", "r"),
                  push_op(h, "in", "next")};
  ReplyHandle hd = h.send(t);
  h.env.run();
  ASSERT_GE(h.env.pending_syncs.size(), 2u);
  auto first = h.env.pending_syncs.front();  // one log's sync lands, the other's does not
  h.env.synced[first.first] = h.env.files[first.first].size();
  h.env.crash();
  h.env.hold_syncs = false;
  h.restart();
  EXPECT_FALSE(h.take(hd).has_value());
  EXPECT_EQ(depth(h, "out"), 1u);
  EXPECT_EQ(depth(h, "in"), 1u);
  // The input's lease survived the crash (its pop was answered), and the ack did not apply.
  EXPECT_TRUE(h.ack(in.messages[0], "g", AckStatus::completed, in.lease_id).success);
}

// Random steps of a worker (push inputs, pop, commit a transaction that acks one input and
// pushes one output with a deterministic transactionId and writes a KV marker), with lease
// expiries and crashes that may cut entries in flight. After every restart each transaction
// is all or nothing, no input is acked twice, and KV versions only grow.
RC_GTEST_PROP(TransactionProperty, AllOrNothingAcrossCrashes, ()) {
  Harness h;
  configure(h, "in", {.lease_time_s = 2});
  int inputs = 0;
  uint64_t max_version = 0;
  std::set<std::string> answered;  // txns answered success
  auto steps = *rc::gen::container<std::vector<int>>(rc::gen::inRange(0, 6));
  for (int step : steps) {
    if (step == 0) {
      h.push("in", "Default", {"in-" + std::to_string(inputs++)});
    } else if (step == 1) {
      h.env.advance_ms(2100);
    } else if (step == 2) {
      h.env.hold_syncs = *rc::gen::arbitrary<bool>();
      PopCmd pc;
      pc.queue = "in";
      pc.group = "w";
      pc.subscription_mode = SubscriptionMode::all;
      ReplyHandle ph = h.send(pc);
      h.env.advance_ms(6);
      h.env.hold_syncs = false;
      h.env.run();
      auto r = h.take(ph);
      if (!r) continue;
      auto& pop = std::get<PopReply>(r->body);
      if (pop.messages.empty()) continue;
      const PopMessage& m = pop.messages[0];
      TxnCmd t;
      t.operations = {ack_op(m, "w", pop.lease_id), push_op(h, "out", "out-" + m.transaction_id)};
      t.kv = {kv_put(m.transaction_id, "1")};
      h.env.hold_syncs = *rc::gen::arbitrary<bool>();
      ReplyHandle th = h.send(t);
      h.env.run();
      if (h.env.hold_syncs && !h.env.pending_syncs.empty() && *rc::gen::arbitrary<bool>()) {
        auto s = h.env.pending_syncs.front();
        h.env.synced[s.first] = h.env.files[s.first].size();
      }
      if (auto tr = h.take(th); tr && std::get<TxnReply>(tr->body).success)
        answered.insert(m.transaction_id);
    } else {
      h.env.crash();
      h.env.hold_syncs = false;
      h.restart();
    }
    h.env.hold_syncs = false;
    h.env.run();
    // Check: every transaction visible entirely or not at all.
    const PartitionState* out = h.node().store().partition("out", "Default");
    std::map<std::string, int> outputs;
    if (out) {
      auto msgs = h.node().read_messages(out->id, Offset(0), 100000);
      RC_ASSERT(msgs.ok());
      for (const auto& m : msgs.value()) ++outputs[m.transaction_id];
    }
    for (int i = 0; i < inputs; ++i) {
      std::string in = "in-" + std::to_string(i);
      int outs = outputs["out-" + in];
      RC_ASSERT(outs <= 1);                               // no step applied twice
      RC_ASSERT((outs == 1) == kv_has(h, in));            // output and KV together
      if (answered.contains(in)) RC_ASSERT(outs == 1);    // an answered commit stays
    }
    for (const auto& [key, row] : h.node().store().kv())
      max_version = std::max(max_version, row.version);
    RC_ASSERT(h.node().store().kv_version() >= max_version);
  }
}

}  // namespace
}  // namespace queen::testing
