// The checker flags definite contradictions between what clients were told and what the
// node did, and stays quiet when an outcome is unknown. Fed by hand-made answers here.
#include <gtest/gtest.h>

#include "sim/checker.h"

namespace queen::sim {
namespace {

AckItem ack_item(const std::string& txn, std::optional<LeaseId> lease) {
  AckItem it;
  it.transaction_id = txn;
  it.partition_id = PartitionId(1);
  it.lease_id = lease;
  it.group = "g1";
  return it;
}

AckContext ack_ctx(bool bogus) {
  AckContext ctx;
  ctx.offsets = {Offset(0)};
  ctx.bogus = {bogus};
  return ctx;
}

Reply ack_reply(bool success) {
  AckResult r;
  r.success = success;
  return Reply{AckReply{{r}}};
}

PopCmd pop_cmd() {
  PopCmd c;
  c.queue = "qa";
  c.group = "g1";
  return c;
}

class CheckerTest : public ::testing::Test {
 protected:
  CheckerTest()
      : world_(1, ClientNetFaults{}),
        params_(choose_params(1, 1, Mutant::none)),
        checker_(world_, params_) {
    world_.add_node(NodeSetup{});  // the checker reads node 0's clock; it need not run
  }

  PushCmd push(const std::string& txn) {
    PushItem it;
    it.queue = "qa";
    it.partition = "p0";
    it.transaction_id = txn;
    it.message_id = make_uuid_v7(1, txn.size(), next_id_++);
    it.payload = "{\"t\":\"" + txn + "\"}";
    return PushCmd{{it}};
  }
  Reply queued(const PushCmd& cmd, uint64_t offset) {
    PushResult r;
    r.message_id = cmd.items[0].message_id;
    r.queue = cmd.items[0].queue;
    r.partition = cmd.items[0].partition;
    r.partition_id = PartitionId(1);
    r.offset = Offset(offset);
    return Reply{PushReply{{r}}};
  }
  PopReply delivery(const PushCmd& cmd, uint64_t lease) {
    PopMessage m;
    m.queue = "qa";
    m.partition = "p0";
    m.partition_id = PartitionId(1);
    m.offset = Offset(0);
    m.transaction_id = cmd.items[0].transaction_id;
    m.message_id = cmd.items[0].message_id;
    m.payload = cmd.items[0].payload;
    PopReply r;
    r.queue = "qa";
    r.group = "g1";
    r.lease_id = LeaseId{make_uuid_v7(1, lease, lease)};
    r.messages.push_back(m);
    return r;
  }
  // Dispatches one empty world event, so that what follows happens strictly later.
  void tick() {
    world_.after(1, "tick", [] {});
    world_.step();
  }
  std::string first_violation() const {
    return world_.violations().empty() ? "" : world_.violations()[0].invariant;
  }

  SimWorld world_;
  RunParams params_;
  Checker checker_;
  uint64_t next_id_ = 1;
};

TEST_F(CheckerTest, TwoPushesAnsweredAtOneOffsetMeanOneWasLost) {
  PushCmd a = push("a"), b = push("b");
  checker_.push_submitted(1, a);
  checker_.push_submitted(2, b);
  checker_.push_answered(1, a, queued(a, 0));
  EXPECT_TRUE(world_.violations().empty());
  checker_.push_answered(2, b, queued(b, 0));
  EXPECT_EQ(first_violation(), "1 answered pushes survive");
}

TEST_F(CheckerTest, AnAckedMessageDeliveredAgainIsCaughtOnlyWhenThePopCameAfterTheAnswer) {
  PushCmd a = push("a");
  checker_.push_submitted(1, a);
  checker_.push_answered(1, a, queued(a, 0));
  PopReply first = delivery(a, 1);
  tick();
  int64_t t = world_.node_now_us(0);
  checker_.pop_submitted(10, pop_cmd(), t);
  checker_.pop_answered(10, pop_cmd(), Reply{first}, t, false);
  AckCmd ack{{ack_item("a", first.lease_id)}};
  tick();
  checker_.ack_submitted(11, ack, ack_ctx(false));
  tick();
  checker_.pop_submitted(12, pop_cmd(), t);  // sent before the ack's answer: may race it
  tick();
  checker_.ack_answered(11, ack, ack_ctx(false), ack_reply(true), false);
  checker_.pop_answered(12, pop_cmd(), Reply{delivery(a, 2)}, t, false);
  EXPECT_TRUE(world_.violations().empty()) << first_violation();
  tick();
  checker_.pop_submitted(13, pop_cmd(), t);  // sent after the answer: must not see it
  tick();
  checker_.pop_answered(13, pop_cmd(), Reply{delivery(a, 3)}, t, false);
  EXPECT_EQ(first_violation().substr(0, 2), "4 ");
}

TEST_F(CheckerTest, AnAckOnACertainlyExpiredLeaseMustNotSucceed) {
  PushCmd a = push("a");
  checker_.push_submitted(1, a);
  checker_.push_answered(1, a, queued(a, 0));
  PopReply r = delivery(a, 1);
  checker_.pop_submitted(10, pop_cmd(), world_.node_now_us(0));
  checker_.pop_answered(10, pop_cmd(), Reply{r}, world_.node_now_us(0), false);
  world_.after(params_.work.lease_time_s * 1'000'000 + 1, "past the lease", [] {});
  world_.step();
  AckCmd ack{{ack_item("a", r.lease_id)}};
  checker_.ack_submitted(11, ack, ack_ctx(false));
  checker_.ack_answered(11, ack, ack_ctx(false), ack_reply(true), false);
  EXPECT_EQ(first_violation().substr(0, 2), "5 ");
}

TEST_F(CheckerTest, AnAckOfAMessageNeverPushedMustNotSucceed) {
  AckCmd ack{{ack_item("never", std::nullopt)}};
  checker_.ack_submitted(1, ack, ack_ctx(true));
  checker_.ack_answered(1, ack, ack_ctx(true), ack_reply(false), false);
  EXPECT_TRUE(world_.violations().empty());
  checker_.ack_submitted(2, ack, ack_ctx(true));
  checker_.ack_answered(2, ack, ack_ctx(true), ack_reply(true), false);
  EXPECT_EQ(first_violation(), "7 answers mean what they say");
}

TEST_F(CheckerTest, ALostAnswerTellsTheClientNothing) {
  PushCmd a = push("a"), b = push("b");
  checker_.push_submitted(1, a);
  checker_.push_submitted(2, b);
  checker_.push_answered(1, a, queued(a, 0));
  AckCmd ack{{ack_item("never", std::nullopt)}};
  checker_.ack_submitted(3, ack, ack_ctx(true));
  checker_.ack_answered(3, ack, ack_ctx(true), ack_reply(true), /*lost=*/true);
  EXPECT_TRUE(world_.violations().empty());
}

// A retry with the same transactionId and a fresh message id: the duplicate must name the
// original message and its offset.
TEST_F(CheckerTest, ADuplicateMustCarryTheOriginalOffsetAndMessageId) {
  PushCmd a = push("a");
  PushCmd retry = a;
  retry.items[0].message_id = make_uuid_v7(1, 99, 99);
  checker_.push_submitted(1, a);
  checker_.push_submitted(2, retry);
  checker_.push_answered(1, a, queued(a, 0));
  Reply dup = queued(a, 0);
  std::get<PushReply>(dup.body).results[0].status = PushStatus::duplicate;
  checker_.push_answered(2, retry, dup);
  EXPECT_TRUE(world_.violations().empty());
  Reply wrong = queued(a, 3);
  std::get<PushReply>(wrong.body).results[0].status = PushStatus::duplicate;
  checker_.push_answered(2, retry, wrong);
  EXPECT_EQ(first_violation(), "3 a transactionId stored once, a request id answered once");
}

TEST_F(CheckerTest, ATransactionIdAnsweredQueuedTwiceIsStoredTwice) {
  PushCmd a = push("a");
  PushCmd retry = a;
  retry.items[0].message_id = make_uuid_v7(1, 99, 99);
  checker_.push_submitted(1, a);
  checker_.push_submitted(2, retry);
  checker_.push_answered(1, a, queued(a, 0));
  checker_.push_answered(2, retry, queued(retry, 1));
  EXPECT_EQ(first_violation(), "3 a transactionId stored once, a request id answered once");
}

// A request id answered twice (the first answer lost) must get the same outcome.
TEST_F(CheckerTest, ARequestIdRetriedGetsTheFirstOutcome) {
  PushCmd a = push("a");
  RequestId rid{make_uuid_v7(1, 7, 7)};
  checker_.push_submitted(1, a);
  checker_.push_answered(1, a, queued(a, 0), &rid, /*lost=*/true);
  checker_.push_answered(1, a, queued(a, 0), &rid, false);
  EXPECT_TRUE(world_.violations().empty());
  Reply dup = queued(a, 0);
  std::get<PushReply>(dup.body).results[0].status = PushStatus::duplicate;
  checker_.push_answered(1, a, dup, &rid, false);  // no restart in between
  EXPECT_EQ(first_violation(), "3 a transactionId stored once, a request id answered once");
}

}  // namespace
}  // namespace queen::sim
