// The logged request outcomes (core/node/outcome.h): every kept reply kind comes back field
// for field, and corrupt bytes never decode into an answer.
#include "core/node/outcome.h"

#include <gtest/gtest.h>

namespace queen {
namespace {

TxnReply sample_txn() {
  TxnReply t;
  t.transaction_id = make_uuid_v7(1, 2, 3);
  t.success = true;
  TxnResult ack;
  ack.type = TxnResultType::ack;
  ack.ack = AckResult{0, "in-1", true, "", true, false, false, "q", "p"};
  TxnResult push;
  push.index = 1;
  push.type = TxnResultType::push;
  push.op_index = 1;
  PushResult pr;
  pr.message_id = make_uuid_v7(7, 8, 9);
  pr.transaction_id = "out-1";
  pr.queue = "out";
  pr.partition = "Default";
  pr.partition_id = PartitionId(42);
  pr.offset = Offset(17);
  push.pushes = {pr};
  TxnResult kv;
  kv.index = 2;
  kv.type = TxnResultType::kv;
  kv.kv.op = KvOpKind::get_many;
  kv.kv.rows = {KvRowView{"a", "{\"n\":1}", 3, 0, 99}, KvRowView{"b", "2", 4, 123, 100}};
  kv.kv.missing = {"c"};
  TxnResult timer;
  timer.index = 3;
  timer.type = TxnResultType::timer;
  timer.timer = TimerResult{3, true, "scheduled", "jobs", "k1", "t1", make_uuid_v7(5, 5, 5), 777};
  t.results = {ack, push, kv, timer};
  return t;
}

TEST(Outcome, ATransactionAnswerComesBackFieldForField) {
  TxnReply t = sample_txn();
  auto back = decode_outcome(encode_outcome(Reply{t}));
  ASSERT_TRUE(back.has_value());
  const auto& r = std::get<TxnReply>(back->body);
  EXPECT_EQ(r.transaction_id, t.transaction_id);
  EXPECT_TRUE(r.success);
  ASSERT_EQ(r.results.size(), 4u);
  EXPECT_EQ(r.results[0].ack.transaction_id, "in-1");
  EXPECT_TRUE(r.results[0].ack.lease_released);
  EXPECT_EQ(r.results[1].pushes.at(0).offset, Offset(17));
  EXPECT_EQ(r.results[1].pushes.at(0).message_id, t.results[1].pushes[0].message_id);
  EXPECT_EQ(r.results[1].pushes.at(0).queue, "out");
  EXPECT_EQ(r.results[2].kv.op, KvOpKind::get_many);
  ASSERT_EQ(r.results[2].kv.rows.size(), 2u);
  EXPECT_EQ(r.results[2].kv.rows[0].value, "{\"n\":1}");
  EXPECT_EQ(r.results[2].kv.rows[1].expires_us, 123);
  EXPECT_EQ(r.results[2].kv.missing, std::vector<std::string>{"c"});
  EXPECT_EQ(r.results[3].type, TxnResultType::timer);
  EXPECT_EQ(r.results[3].timer.deliver_at_us, 777);
  EXPECT_EQ(r.results[3].timer.status, "scheduled");
}

TEST(Outcome, KvLockAndTimerAnswersComeBack) {
  KvReply kv;
  kv.ok = false;
  kv.failed_index = 2;
  kv.kv_reason = "version";
  kv.failed_row = KvRowView{"k", "5", 9, 0, 1};
  auto kv_back = decode_outcome(encode_outcome(Reply{kv}));
  ASSERT_TRUE(kv_back.has_value());
  EXPECT_FALSE(std::get<KvReply>(kv_back->body).ok);
  EXPECT_EQ(std::get<KvReply>(kv_back->body).failed_row.version, 9u);

  LockReply lock;
  LockResult lr;
  lr.op = LockOpKind::renew;
  lr.ok = true;
  lr.name = "leader";
  lr.token = 31;
  lr.holders = {LockHolder{0, "w1", 31, 5000}};
  lock.results = {lr};
  auto lock_back = decode_outcome(encode_outcome(Reply{lock}));
  ASSERT_TRUE(lock_back.has_value());
  const auto& l = std::get<LockReply>(lock_back->body).results.at(0);
  EXPECT_EQ(l.op, LockOpKind::renew);
  EXPECT_EQ(l.token, 31u);
  EXPECT_EQ(l.holders.at(0).owner, "w1");

  TimerReply timer;
  timer.results = {TimerResult{0, true, "cancelled", "q", "key", "", Uuid{}, 0}};
  auto timer_back = decode_outcome(encode_outcome(Reply{timer}));
  ASSERT_TRUE(timer_back.has_value());
  EXPECT_EQ(std::get<TimerReply>(timer_back->body).results.at(0).status, "cancelled");
}

TEST(Outcome, KindsNotKeptEncodeToNothing) {
  EXPECT_TRUE(encode_outcome(Reply{AckReply{}}).empty());
  EXPECT_TRUE(encode_outcome(Reply{ConfigureReply{}}).empty());
}

TEST(Outcome, CorruptBytesNeverDecode) {
  std::string good = encode_outcome(Reply{sample_txn()});
  EXPECT_FALSE(decode_outcome(good.substr(0, good.size() - 1)).has_value()) << "truncated";
  EXPECT_FALSE(decode_outcome(good + "x").has_value()) << "trailing bytes";
  EXPECT_FALSE(decode_outcome(std::string(1, '\x09') + good.substr(1)).has_value())
      << "unknown kind";
  // Every single-byte truncation point fails rather than yielding a partial answer.
  for (size_t n = 0; n < good.size(); ++n)
    ASSERT_FALSE(decode_outcome(good.substr(0, n)).has_value()) << n;
  // An out-of-range enum byte: the first result's type follows the id, flag, two empty
  // strings, the count and the index.
  std::string bad = good;
  bad[1 + 16 + 1 + 4 + 4 + 4 + 4] = '\x7f';
  EXPECT_FALSE(decode_outcome(bad).has_value());
}

}  // namespace
}  // namespace queen
