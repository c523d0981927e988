// The consumption engine through the node: claim order, leases, expiry, acks, retries, DLQ.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "core/consume/engine.h"
#include "tests/core/mem_env.h"

namespace queen::testing {
namespace {

void configure(Harness& h, const std::string& q, int64_t lease_s, int64_t retry_limit) {
  ConfigureCmd c;
  c.queue = q;
  c.patch.lease_time_s = lease_s;
  c.patch.retry_limit = retry_limit;
  h.call<ConfigureReply>(c);
}

TEST(Engine, ClaimsTheOldestClaimablePartitionFirst) {
  Harness h;
  h.push("q", "p1", {"a"});
  h.push("q", "p2", {"b"});
  h.push("q", "p3", {"c"});
  EXPECT_EQ(h.pop("q", "g", 10).messages.at(0).partition, "p1");
  EXPECT_EQ(h.pop("q", "g", 10).messages.at(0).partition, "p2");
  EXPECT_EQ(h.pop("q", "g", 10).messages.at(0).partition, "p3");
  PopReply none = h.pop("q", "g", 10);
  EXPECT_TRUE(none.messages.empty());
}

TEST(Engine, OneLiveLeasePerGroupAndPartitionButGroupsFanOut) {
  Harness h;
  h.push("q", "p", {"a", "b"});
  PopReply first = h.pop("q", "g1", 1);
  ASSERT_EQ(first.messages.size(), 1u);
  EXPECT_EQ(first.messages[0].offset, Offset(0));
  EXPECT_TRUE(h.pop("q", "g1", 1).messages.empty());  // leased to the first consumer
  PopReply other = h.pop("q", "g2", 5);               // another group reads everything
  EXPECT_EQ(other.messages.size(), 2u);
  PopReply held = h.pop("q", "g1", 1, "p");
  EXPECT_EQ(held.empty_reason, "lease_held");
}

TEST(Engine, CompletedAckMovesTheCursorAndReleasesTheLease) {
  Harness h;
  h.push("q", "p", {"a", "b", "c"});
  PopReply r = h.pop("q", "g", 2);
  ASSERT_EQ(r.messages.size(), 2u);
  AckResult a0 = h.ack(r.messages[0], "g", AckStatus::completed, r.lease_id);
  EXPECT_TRUE(a0.success);
  EXPECT_FALSE(a0.lease_released);
  AckResult a1 = h.ack(r.messages[1], "g", AckStatus::completed, r.lease_id);
  EXPECT_TRUE(a1.success);
  EXPECT_TRUE(a1.lease_released);
  PopReply next = h.pop("q", "g", 5);
  ASSERT_EQ(next.messages.size(), 1u);
  EXPECT_EQ(next.messages[0].transaction_id, "c");
  EXPECT_EQ(h.node().store().cursor("g", next.messages[0].partition_id)->next, Offset(2));
}

TEST(Engine, ExpiredLeasePutsTheBatchBack) {
  Harness h;
  configure(h, "q", 1, 3);
  h.push("q", "Default", {"a"});
  PopReply r = h.pop("q", "g", 1);
  ASSERT_EQ(r.messages.size(), 1u);
  h.env.advance_ms(1100);
  EXPECT_EQ(h.node().stats().lease_expiries, 1u);
  AckResult late = h.ack(r.messages[0], "g", AckStatus::completed, r.lease_id);
  EXPECT_FALSE(late.success);
  EXPECT_EQ(late.error, "Invalid or expired lease");
  PopReply again = h.pop("q", "g", 1);
  ASSERT_EQ(again.messages.size(), 1u);
  EXPECT_EQ(again.messages[0].transaction_id, "a");
  EXPECT_NE(again.lease_id, r.lease_id);
  EXPECT_EQ(r.messages[0].delivery_attempt, 1u);
  EXPECT_EQ(again.messages[0].delivery_attempt, 2u);  // an expired lease was an attempt
}

TEST(Engine, FailedAcksSpendTheRetryBudgetThenTheMessageGoesToTheDlqOnce) {
  Harness h;
  configure(h, "q", 30, 2);
  h.push("q", "Default", {"poison", "fine"});
  for (int attempt = 1; attempt <= 2; ++attempt) {
    PopReply r = h.pop("q", "g", 1);
    ASSERT_EQ(r.messages.size(), 1u);
    EXPECT_EQ(r.messages[0].delivery_attempt, static_cast<uint32_t>(attempt));
    AckResult a = h.ack(r.messages[0], "g", AckStatus::failed, r.lease_id);
    EXPECT_TRUE(a.success);
    EXPECT_TRUE(a.lease_released);
    EXPECT_FALSE(a.dlq);
  }
  PopReply last = h.pop("q", "g", 1);
  ASSERT_EQ(last.messages.size(), 1u);
  EXPECT_EQ(last.messages[0].delivery_attempt, 3u);
  AckResult dead = h.ack(last.messages[0], "g", AckStatus::failed, last.lease_id);
  EXPECT_TRUE(dead.success);
  EXPECT_TRUE(dead.dlq);
  // A repeat of the same ack is answered as the first one and adds nothing.
  AckResult repeat = h.ack(last.messages[0], "g", AckStatus::failed, last.lease_id);
  EXPECT_TRUE(repeat.success);
  EXPECT_TRUE(repeat.dlq);
  DlqReply d = h.call<DlqReply>(DlqQueryCmd{"q", "", 10});
  ASSERT_EQ(d.total, 1u);
  EXPECT_EQ(d.records[0].transaction_id, "poison");
  EXPECT_EQ(d.records[0].error, "boom");
  EXPECT_EQ(d.records[0].payload, "{\"t\":\"poison\"}");
  PopReply rest = h.pop("q", "g", 5);
  ASSERT_EQ(rest.messages.size(), 1u);
  EXPECT_EQ(rest.messages[0].transaction_id, "fine");
}

TEST(Engine, RepeatedCompletedAckIsAnsweredAsTheFirst) {
  Harness h;
  h.push("q", "Default", {"a"});
  PopReply r = h.pop("q", "g", 1);
  AckResult first = h.ack(r.messages[0], "g", AckStatus::completed, r.lease_id);
  AckResult second = h.ack(r.messages[0], "g", AckStatus::completed, r.lease_id);
  EXPECT_TRUE(first.success);
  EXPECT_TRUE(second.success);
  EXPECT_EQ(first.lease_released, second.lease_released);
  EXPECT_EQ(first.dlq, second.dlq);
}

TEST(Engine, AckOfAnUnknownTransactionIdNamesIt) {
  Harness h;
  h.push("q", "Default", {"a"});
  PopReply r = h.pop("q", "g", 1);
  PopMessage ghost = r.messages[0];
  ghost.transaction_id = "nope";
  AckResult a = h.ack(ghost, "g", AckStatus::completed, r.lease_id);
  EXPECT_FALSE(a.success);
  EXPECT_NE(a.error.find("nope"), std::string::npos);
}

// An ack reads only the rows near the group's cursor: its leased batch, then the messages
// ahead of the cursor, then a bounded stretch behind it (a repeat), never the whole
// partition from offset 0. The rows' hashes are in their records (a node of its own), and a
// restart empties the cache of them, so every row looked at is a read.
TEST(Engine, AnAckReadsOnlyRowsNearTheCursor) {
  Harness h;
  const uint64_t kRows = kAckScanRowsMax + 500;
  for (uint64_t i = 0; i < kRows; ++i) h.push("q", "Default", {"m" + std::to_string(i)});
  PopReply all = h.pop("q", "g", static_cast<uint32_t>(kRows));
  ASSERT_EQ(all.messages.size(), kRows);
  ASSERT_TRUE(h.ack(all.messages.back(), "g", AckStatus::completed, all.lease_id).success);
  h.push("q", "Default", {"late"});
  h.env.crash();
  h.restart();
  auto reads = [&] { return h.node().stats().row_hash_reads; };
  PopReply late = h.pop("q", "g", 1);
  ASSERT_EQ(late.messages.size(), 1u);
  uint64_t before = reads();
  TxnCmd t;
  TxnOperation op;
  op.is_ack = true;
  op.ack = TxnAck{"late",
                  hash_of("late"),
                  late.messages[0].partition_id,
                  late.lease_id,
                  AckStatus::completed,
                  "",
                  "g"};
  t.operations = {op};
  TxnReply r = h.call<TxnReply>(t);
  ASSERT_TRUE(r.success) << r.error;
  EXPECT_EQ(reads(), before);  // the popped row is cached
  PopMessage old = all.messages.back();
  AckResult repeat = h.ack(old, "g", AckStatus::completed, std::nullopt);
  EXPECT_TRUE(repeat.success);
  EXPECT_TRUE(repeat.noop);
  EXPECT_EQ(reads(), before + 1);  // the row just behind the cursor
  PopMessage ghost = late.messages[0];
  ghost.transaction_id = "never-pushed";
  AckResult a = h.ack(ghost, "g", AckStatus::completed, std::nullopt);
  EXPECT_FALSE(a.success);
  // It looked at kAckScanRowsMax rows behind the cursor, the two nearest already cached.
  EXPECT_EQ(reads(), before + 1 + kAckScanRowsMax - 2);
}

TEST(Engine, AckWithAForeignLeaseIsRejected) {
  Harness h;
  h.push("q", "Default", {"a"});
  PopReply r = h.pop("q", "g", 1);
  LeaseId other = r.lease_id;
  other.bytes[15] ^= 1;
  EXPECT_FALSE(h.ack(r.messages[0], "g", AckStatus::completed, other).success);
  EXPECT_TRUE(h.ack(r.messages[0], "g", AckStatus::completed, std::nullopt).success);
}

// Ack as commit: the failed ack stops the cursor, and the completed ack after it in the same
// call does not move past it: both messages come back.
TEST(Engine, BatchMixingFailedAndCompletedNeverSkipsTheFailedMessage) {
  Harness h;
  configure(h, "q", 30, 3);
  h.push("q", "Default", {"m0", "m1", "m2"});
  PopReply r = h.pop("q", "g", 3);
  ASSERT_EQ(r.messages.size(), 3u);
  AckCmd c;
  for (int i = 0; i < 3; ++i) {
    const auto& m = r.messages[i];
    c.items.push_back(AckItem{m.transaction_id, hash_of(m.transaction_id), m.partition_id,
                              r.lease_id, i == 1 ? AckStatus::failed : AckStatus::completed, "",
                              "g"});
  }
  AckReply ar = h.call<AckReply>(c);
  EXPECT_TRUE(ar.results[0].success);
  EXPECT_TRUE(ar.results[1].success);
  EXPECT_FALSE(ar.results[2].success);  // not committed: it comes back with m1
  EXPECT_NE(ar.results[2].error.find("not committed"), std::string::npos);
  PopReply again = h.pop("q", "g", 3);
  ASSERT_EQ(again.messages.size(), 2u);  // m0 is committed; m1 and m2 come back
  EXPECT_EQ(again.messages[0].transaction_id, "m1");
  EXPECT_EQ(again.messages[1].transaction_id, "m2");
  EXPECT_EQ(again.messages[0].delivery_attempt, 2u);
}

AckItem ack_item(const PopMessage& m, const PopReply& r, AckStatus status) {
  return AckItem{
      m.transaction_id, hash_of(m.transaction_id), m.partition_id, r.lease_id, status, "", "g"};
}

// With no dedup window a transactionId can name two messages of one leased batch: an ack of
// it means the first, whether it comes alone or in a run of acks of its partition (which
// looks in the batch's hashes sorted once).
TEST(Engine, AnAckOfATransactionIdTwiceInTheBatchMeansItsFirstMessage) {
  for (size_t run : {size_t{1}, kAckIndexedRunMin, kAckIndexedRunMin + 1}) {
    Harness h;
    configure(h, "q", QueueOptionsPatch{.lease_time_s = 30, .retry_limit = 3, .dedup_window_s = 0});
    h.push("q", "Default", {"x", "a", "b", "x", "c", "d"});
    PopReply r = h.pop("q", "g", 6);
    ASSERT_EQ(r.messages.size(), 6u);
    ASSERT_EQ(r.messages[3].transaction_id, "x");
    AckCmd c;
    c.items.push_back(ack_item(r.messages[3], r, AckStatus::failed));
    for (size_t i : {1, 2, 4, 5})
      if (c.items.size() < run) c.items.push_back(ack_item(r.messages[i], r, AckStatus::completed));
    AckReply ar = h.call<AckReply>(c);
    ASSERT_EQ(ar.results.size(), run);
    EXPECT_TRUE(ar.results[0].success) << run;
    // The failed ack stops the partition at offset 0: no ack after it commits.
    for (size_t i = 1; i < run; ++i) {
      EXPECT_FALSE(ar.results[i].success) << run;
      EXPECT_NE(ar.results[i].error.find("offset 0 "), std::string::npos) << ar.results[i].error;
    }
    PopReply again = h.pop("q", "g", 6);
    ASSERT_EQ(again.messages.size(), 6u) << run;
    EXPECT_EQ(again.messages[0].offset, Offset(0));
    EXPECT_EQ(again.messages[0].delivery_attempt, 2u);
  }
}

// Runs of acks of two partitions in one call, each out of order and with an ack that is not in
// its batch: each run resolves and applies on its own, a failed ack stopping only its own.
TEST(Engine, RunsOfAcksOfTwoPartitionsApplyEachOnItsOwn) {
  Harness h;
  configure(h, "q", 30, 3);
  h.push("q", "p2", {"b0", "b1", "b2", "b3", "b4"});  // p2 is the older: its run applies first
  h.push("q", "p1", {"a0", "a1", "a2", "a3", "a4"});
  PopCmd pc = Harness::pop_cmd("q", "g");
  pc.batch = 10;
  pc.partitions = 2;
  PopReply r = h.call<PopReply>(pc);
  ASSERT_EQ(r.messages.size(), 10u);
  h.push("q", "p1", {"a5"});  // after the pop: not in the leased batch
  std::map<std::string, PopMessage> by_txn;
  for (const PopMessage& m : r.messages) by_txn[m.transaction_id] = m;
  PopMessage late = by_txn["a4"];
  late.transaction_id = "a5";
  PopMessage ghost = by_txn["a4"];
  ghost.transaction_id = "never-pushed";
  AckCmd c;
  for (const PopMessage& m : {by_txn["a3"], by_txn["a0"], late, by_txn["a2"], ghost})
    c.items.push_back(ack_item(m, r, AckStatus::completed));
  c.items.push_back(ack_item(by_txn["b4"], r, AckStatus::completed));
  c.items.push_back(ack_item(by_txn["b1"], r, AckStatus::failed));
  c.items.push_back(ack_item(by_txn["b0"], r, AckStatus::completed));
  c.items.push_back(ack_item(by_txn["b3"], r, AckStatus::completed));
  AckReply ar = h.call<AckReply>(c);
  ASSERT_EQ(ar.results.size(), 9u);
  EXPECT_TRUE(ar.results[0].success);
  EXPECT_TRUE(ar.results[1].success);
  EXPECT_EQ(ar.results[2].error, "Invalid or expired lease");  // found ahead of the batch
  EXPECT_TRUE(ar.results[3].success);
  EXPECT_NE(ar.results[4].error.find("unresolvable"), std::string::npos) << ar.results[4].error;
  EXPECT_TRUE(ar.results[7].success);  // b0, below the failed b1
  EXPECT_TRUE(ar.results[6].success);
  EXPECT_NE(ar.results[5].error.find("not committed"), std::string::npos);
  EXPECT_NE(ar.results[8].error.find("not committed"), std::string::npos);
  const PartitionState* p1 = h.node().store().partition(by_txn["a0"].partition_id);
  const PartitionState* p2 = h.node().store().partition(by_txn["b0"].partition_id);
  EXPECT_EQ(h.node().store().cursor("g", p1->id)->next, Offset(4));  // a3 commits a0-a3
  EXPECT_EQ(h.node().store().cursor("g", p2->id)->next, Offset(1));  // b1 comes back
  EXPECT_EQ(ar.results[1].partition, "p1");
  EXPECT_EQ(ar.results[7].partition, "p2");
  EXPECT_EQ(ar.results[7].queue, "q");
}

TEST(Engine, LongPollIsWokenByAPush) {
  Harness h;
  h.push("q", "Default", {"seed"});
  h.pop("q", "g", 10);  // consume the seed so the group exists
  PopCmd c;
  c.queue = "q";
  c.group = "w";
  c.batch = 10;
  c.wait = true;
  c.subscription_mode = SubscriptionMode::new_only;
  ReplyHandle poll = h.send(c, 10000);
  h.env.advance_ms(100);
  EXPECT_FALSE(h.take(poll).has_value());
  h.push("q", "Default", {"fresh"});
  h.env.advance_ms(10);
  auto r = h.take(poll);
  ASSERT_TRUE(r.has_value());
  auto& pr = std::get<PopReply>(r->body);
  ASSERT_EQ(pr.messages.size(), 1u);
  EXPECT_EQ(pr.messages[0].transaction_id, "fresh");  // new_only: the older seed is skipped
}

TEST(Engine, LongPollAnswersEmptyBeforeItsDeadline) {
  Harness h;
  h.push("q", "Default", {"a"});
  h.pop("q", "g", 1);
  PopCmd c;
  c.queue = "q";
  c.group = "g";
  c.wait = true;
  ReplyHandle poll = h.send(c, 2000);
  h.env.advance_ms(1400);
  EXPECT_FALSE(h.take(poll).has_value());
  h.env.advance_ms(600);
  auto r = h.take(poll);
  ASSERT_TRUE(r.has_value());
  EXPECT_TRUE(std::get<PopReply>(r->body).messages.empty());
}

TEST(Engine, PopIsAnsweredOnlyAfterItsCheckpointCommits) {
  Harness h;
  h.push("q", "Default", {"a"});
  ReplyHandle hd = h.send(Harness::pop_cmd("q", "g"));
  h.env.run();
  EXPECT_FALSE(h.take(hd).has_value());  // waiting for the checkpoint timer
  uint64_t before = h.node().stats().checkpoints;
  h.env.advance_ms(6);
  EXPECT_EQ(h.node().stats().checkpoints, before + 1);
  EXPECT_TRUE(h.take(hd).has_value());
  EXPECT_EQ(h.node().store().cursor("g", PartitionId(1))->lease_expires_us != 0, true);
}

// Under load a lease need not wait for the checkpoint timer: it rides the next entry the
// node seals, and the pop is answered once that entry commits.
TEST(Engine, APopRidesTheNextSealedEntryInsteadOfTheTimer) {
  Harness h;
  h.push("q", "Default", {"a"});
  ReplyHandle pop = h.send(Harness::pop_cmd("q", "g"));
  h.env.run();
  EXPECT_FALSE(h.take(pop).has_value());
  uint64_t before = h.node().stats().checkpoints;
  ReplyHandle push = h.send(h.push_cmd("q", "Default", {"b"}));
  h.env.run();  // no time passes: the push's entry is written and synced
  ASSERT_TRUE(h.take(push).has_value());
  auto r = h.take(pop);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(std::get<PopReply>(r->body).messages.size(), 1u);
  EXPECT_EQ(h.node().stats().checkpoints, before + 1);
  h.env.advance_ms(6);  // the timer then finds nothing left to log
  EXPECT_EQ(h.node().stats().checkpoints, before + 1);
}

TEST(Engine, CommitOnDeliveryMovesTheCursorWithoutALease) {
  Harness h;
  h.push("q", "Default", {"a", "b"});
  PopCmd c;
  c.queue = "q";
  c.group = "g";
  c.batch = 1;
  c.auto_ack = true;
  c.subscription_mode = SubscriptionMode::all;
  PopReply r = h.call<PopReply>(c);
  ASSERT_EQ(r.messages.size(), 1u);
  EXPECT_TRUE(r.lease_id.is_nil());
  PopReply r2 = h.call<PopReply>(c);
  ASSERT_EQ(r2.messages.size(), 1u);
  EXPECT_EQ(r2.messages[0].transaction_id, "b");
}

}  // namespace
}  // namespace queen::testing

namespace queen::testing {
namespace {

// Found by the simulator (seed 7): an unfenced failed ack used to move the cursor past
// messages never acked, and the cursor could stop before an already-settled offset.
TEST(EngineRegression, UnfencedAckNeverSkipsUnsettledMessages) {
  Harness h;
  h.push("q", "Default", {"m0", "m1", "m2", "m3"});
  PopReply r = h.pop("q", "g", 4);
  ASSERT_EQ(r.messages.size(), 4u);
  EXPECT_TRUE(h.ack(r.messages[0], "g", AckStatus::completed, r.lease_id).success);
  EXPECT_TRUE(h.ack(r.messages[1], "g", AckStatus::failed, r.lease_id).lease_released);
  // No leaseId, no live lease: settles m3 alone; m1 and m2 are still owed to the group.
  EXPECT_TRUE(h.ack(r.messages[3], "g", AckStatus::completed, std::nullopt).success);
  PopReply again = h.pop("q", "g", 4);
  ASSERT_EQ(again.messages.size(), 2u);
  EXPECT_EQ(again.messages[0].transaction_id, "m1");
  EXPECT_EQ(again.messages[1].transaction_id, "m2");
  for (const auto& m : again.messages) h.ack(m, "g", AckStatus::completed, again.lease_id);
  EXPECT_EQ(h.node().store().cursor("g", r.messages[0].partition_id)->next, Offset(4));
}

// Found by the simulator (seed 84): a completed ack carrying a lease that another worker's
// failed ack had handed back was answered success without applying.
TEST(EngineRegression, CompletedAckOnAHandedBackLeaseIsRefused) {
  Harness h;
  h.push("q", "Default", {"a", "b"});
  PopReply r = h.pop("q", "g", 2);
  EXPECT_TRUE(h.ack(r.messages[0], "g", AckStatus::failed, std::nullopt).lease_released);
  AckResult late = h.ack(r.messages[0], "g", AckStatus::completed, r.lease_id);
  EXPECT_FALSE(late.success);
  EXPECT_EQ(late.error, "Invalid or expired lease");
  PopReply again = h.pop("q", "g", 2);
  ASSERT_FALSE(again.messages.empty());
  EXPECT_EQ(again.messages[0].transaction_id, "a");
}

}  // namespace
}  // namespace queen::testing

namespace queen::testing {
namespace {

// Found by the checkpoint-answer model (proofs/): a failed ack repeated after the partition
// was leased again was refused although the first one applied.
TEST(EngineRegression, RepeatedFailedAckIsAnsweredAsAppliedAfterTheNextLease) {
  Harness h;
  h.push("q", "Default", {"a"});
  PopReply first = h.pop("q", "g", 1);
  AckResult failed = h.ack(first.messages[0], "g", AckStatus::failed, first.lease_id);
  ASSERT_TRUE(failed.success);
  PopReply second = h.pop("q", "g", 1);
  ASSERT_EQ(second.messages.size(), 1u);
  AckResult repeat = h.ack(first.messages[0], "g", AckStatus::failed, first.lease_id);
  EXPECT_TRUE(repeat.success);
  EXPECT_TRUE(repeat.lease_released);
  // It charged nothing again: the second lease is intact and its ack works.
  EXPECT_TRUE(h.ack(second.messages[0], "g", AckStatus::completed, second.lease_id).success);
}

}  // namespace
}  // namespace queen::testing
