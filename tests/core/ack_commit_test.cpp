// Ack as commit, over random mixed batches: in one call (an ack batch or a transaction's
// acks), a failed or retry ack stops its partition's cursor there. No later ack of the call
// moves past it: the failed message and every message after it come back. Below it, a
// completed ack commits its batch up to it (the messages no ack named with it), and what the
// call filed in the DLQ stays there: none of that comes back.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <set>

#include "tests/core/mem_env.h"

namespace queen::testing {
namespace {

constexpr int64_t kLeaseS = 30;

struct Mixed {
  uint32_t messages = 0;
  std::vector<std::pair<uint32_t, AckStatus>> acks;  // (offset, status), in call order
};

// A batch of 1-8 messages and a random subset of them acked with random statuses, in a
// random order, one ack per message.
Mixed gen_mixed() {
  Mixed m;
  m.messages = *rc::gen::inRange<uint32_t>(1, 9);
  for (uint32_t o = 0; o < m.messages; ++o) {
    if (!*rc::gen::arbitrary<bool>()) continue;
    auto status = *rc::gen::element(AckStatus::completed, AckStatus::completed, AckStatus::failed,
                                    AckStatus::retry, AckStatus::dlq);
    m.acks.emplace_back(o, status);
  }
  std::vector<size_t> order(m.acks.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  auto shuffled = *rc::gen::arbitrary<std::vector<uint32_t>>();
  for (size_t i = 0; i < order.size() && i < shuffled.size(); ++i)
    std::swap(order[i], order[shuffled[i] % order.size()]);
  std::vector<std::pair<uint32_t, AckStatus>> acks;
  for (size_t i : order) acks.push_back(m.acks[i]);
  m.acks = std::move(acks);
  return m;
}

// The offsets a pop must find after the call (once the lease is gone): everything from the
// first failed or retry ack on; below it, what is above the highest completed ack and was not
// filed in the DLQ.
// The first failed or retry ack's offset: where the call stops the cursor (else past the end).
uint32_t stop_of(const Mixed& m) {
  uint32_t stop = m.messages;
  for (auto [o, s] : m.acks)
    if (s == AckStatus::failed || s == AckStatus::retry) stop = std::min(stop, o);
  return stop;
}

std::set<uint32_t> expected_back(const Mixed& m) {
  uint32_t stop = stop_of(m);
  std::set<uint32_t> settled;
  for (auto [o, s] : m.acks) {
    if (o >= stop) continue;
    if (s == AckStatus::dlq) settled.insert(o);
    if (s != AckStatus::completed) continue;
    for (uint32_t below = 0; below <= o; ++below) settled.insert(below);
  }
  std::set<uint32_t> back;
  for (uint32_t o = 0; o < m.messages; ++o)
    if (!settled.contains(o)) back.insert(o);
  return back;
}

// Pushes the batch and pops it whole under one lease.
PopReply setup(Harness& h, const Mixed& m) {
  QueueOptionsPatch patch;
  patch.lease_time_s = kLeaseS;
  patch.retry_limit = 100;  // a failed ack always hands back here
  configure(h, "q", patch);
  std::vector<std::string> txns;
  for (uint32_t o = 0; o < m.messages; ++o) txns.push_back("m" + std::to_string(o));
  h.push("q", "Default", txns);
  PopReply r = h.pop("q", "g", m.messages);
  RC_ASSERT(r.messages.size() == m.messages);
  return r;
}

std::set<uint32_t> offsets_back(Harness& h, uint32_t messages) {
  h.env.advance_ms((kLeaseS + 1) * 1000);  // a lease the call kept has expired
  std::set<uint32_t> back;
  for (const PopMessage& msg : h.pop("q", "g", messages).messages)
    back.insert(static_cast<uint32_t>(msg.offset.value));
  return back;
}

AckItem item_for(const PopReply& r, uint32_t o, AckStatus s) {
  const PopMessage& msg = r.messages.at(o);
  return AckItem{msg.transaction_id,
                 hash_of(msg.transaction_id),
                 msg.partition_id,
                 r.lease_id,
                 s,
                 "boom",
                 "g"};
}

RC_GTEST_PROP(AckCommit, AFailedAckInABatchIsNeverSkipped, ()) {
  Mixed m = gen_mixed();
  Harness h;
  PopReply r = setup(h, m);
  AckCmd c;
  for (auto [o, s] : m.acks) c.items.push_back(item_for(r, o, s));
  AckReply reply = h.call<AckReply>(c);
  RC_ASSERT(reply.results.size() == m.acks.size());
  for (size_t i = 0; i < reply.results.size(); ++i) {
    RC_ASSERT(reply.results[i].success == (m.acks[i].first <= stop_of(m)));
    RC_ASSERT(reply.results[i].index == i);
    RC_ASSERT(reply.results[i].transaction_id == "m" + std::to_string(m.acks[i].first));
  }
  RC_ASSERT(offsets_back(h, m.messages) == expected_back(m));
}

RC_GTEST_PROP(AckCommit, ATransactionsAcksFollowTheSameRule, ()) {
  Mixed m = gen_mixed();
  Harness h;
  PopReply r = setup(h, m);
  TxnCmd t;
  for (auto [o, s] : m.acks) {
    TxnOperation op;
    op.is_ack = true;
    op.ack = item_for(r, o, s);
    t.operations.push_back(std::move(op));
  }
  TxnReply reply = h.call<TxnReply>(t);
  RC_ASSERT(reply.success);
  RC_ASSERT(reply.results.size() == m.acks.size());
  for (size_t i = 0; i < reply.results.size(); ++i) {
    RC_ASSERT(reply.results[i].ack.success == (m.acks[i].first <= stop_of(m)));
    RC_ASSERT(reply.results[i].ack.transaction_id == "m" + std::to_string(m.acks[i].first));
  }
  RC_ASSERT(offsets_back(h, m.messages) == expected_back(m));
}

// The three answers of an ack that can no longer act, and of one that names nothing.
TEST(AckCommit, RepeatsBelowTheCursorAreNoopsAndLateSignalsAreRefused) {
  Harness h;
  h.push("q", "Default", {"a", "b"});
  PopReply r = h.pop("q", "g", 2);
  ASSERT_EQ(r.messages.size(), 2u);
  EXPECT_TRUE(h.ack(r.messages[0], "g", AckStatus::completed, r.lease_id).success);
  AckResult again = h.ack(r.messages[0], "g", AckStatus::completed, std::nullopt);
  EXPECT_TRUE(again.success);
  EXPECT_TRUE(again.noop);
  for (AckStatus s : {AckStatus::failed, AckStatus::retry}) {
    AckResult late = h.ack(r.messages[0], "g", s, std::nullopt);
    EXPECT_FALSE(late.success);
    EXPECT_NE(late.error.find("already committed"), std::string::npos) << late.error;
  }
  PopMessage ghost = r.messages[1];
  ghost.transaction_id = "never-pushed";
  AckResult unknown = h.ack(ghost, "g", AckStatus::completed, r.lease_id);
  EXPECT_FALSE(unknown.success);
  EXPECT_NE(unknown.error.find("never-pushed"), std::string::npos) << unknown.error;
  EXPECT_TRUE(h.ack(r.messages[1], "g", AckStatus::completed, r.lease_id).success);
}

}  // namespace
}  // namespace queen::testing
