// The logged request outcomes (core/node/outcome.h): every kept reply kind comes back field
// for field, and corrupt bytes never decode into an answer.
#include "core/node/outcome.h"

#include <gtest/gtest.h>

#include "core/common/bytes.h"

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

Uuid after(Uuid u, int steps) {
  for (int i = 0; i < steps; ++i) EXPECT_TRUE(uuid_successor(u, &u));
  return u;
}

PushResult push_result(PushStatus status, Uuid id, uint64_t pid, uint64_t offset) {
  PushResult r;
  r.status = status;
  r.message_id = id;
  r.partition_id = PartitionId(pid);
  r.offset = Offset(offset);
  return r;
}

// A push whose ids and offsets run on, then breaks in every way a run can break: another
// partition, an offset gap, an id out of the run, a duplicate, an error.
PushReply sample_push() {
  PushReply push;
  Uuid a = make_uuid_v7(1700000000000, 0x123, 0xfffffffffffff0);
  for (int i = 0; i < 100; ++i)
    push.results.push_back(push_result(PushStatus::queued, after(a, i), 7, 40 + i));
  push.results.push_back(push_result(PushStatus::queued, after(a, 100), 8, 140));
  push.results.push_back(push_result(PushStatus::queued, after(a, 101), 8, 142));
  push.results.push_back(push_result(PushStatus::queued, make_uuid_v7(5, 6, 7), 8, 143));
  push.results.push_back(push_result(PushStatus::duplicate, after(a, 103), 8, 3));
  push.results.push_back(push_result(PushStatus::duplicate, after(a, 104), 8, 4));
  PushResult error = push_result(PushStatus::error, after(a, 105), 8, 0);
  error.error = "queue is paused";
  push.results.push_back(error);
  push.results.push_back(error);
  for (uint32_t i = 0; i < push.results.size(); ++i) push.results[i].index = i;
  return push;
}

TEST(Outcome, APushAnswerComesBackResultForResultFromItsRuns) {
  PushReply push = sample_push();
  std::string bytes = encode_outcome(Reply{push});
  auto back = decode_outcome(bytes);
  ASSERT_TRUE(back.has_value());
  const auto& r = std::get<PushReply>(back->body).results;
  ASSERT_EQ(r.size(), push.results.size());
  for (size_t i = 0; i < r.size(); ++i) {
    EXPECT_EQ(r[i].index, i);
    EXPECT_EQ(r[i].status, push.results[i].status) << i;
    EXPECT_EQ(r[i].message_id, push.results[i].message_id) << i;
    EXPECT_EQ(r[i].partition_id, push.results[i].partition_id) << i;
    EXPECT_EQ(r[i].offset, push.results[i].offset) << i;
    EXPECT_EQ(r[i].error, push.results[i].error) << i;
  }
  // Seven runs of 41 bytes (the 100 queued, one for each break, the two duplicates together,
  // each error alone with its text), not 33 bytes a result.
  EXPECT_EQ(bytes.size(), 1 + 4 + 7 * 41 + 2 * 15);
}

// Answers kept in an earlier layout (push results one by one, tag 1; push runs before the
// walk, tag 6; lock answers without their holders' times, tag 4) are not read: the node drops
// them on load rather than answer a retry from bytes it would misread.
TEST(Outcome, AnswersKeptInAnEarlierLayoutAreDropped) {
  for (uint8_t tag : {1, 4, 6}) {
    Bytes old;
    ByteWriter w(&old);
    w.u8(tag);
    w.u32(1);
    w.u8(static_cast<uint8_t>(PushStatus::queued));
    w.uuid(make_uuid_v7(1, 2, 3));
    w.u64(9);
    w.u64(100);
    EXPECT_FALSE(decode_outcome(std::string(old.begin(), old.end())).has_value()) << int(tag);
  }
}

TEST(Outcome, CorruptPushRunsNeverDecode) {
  std::string good = encode_outcome(Reply{sample_push()});
  for (size_t n = 0; n < good.size(); ++n)
    ASSERT_FALSE(decode_outcome(good.substr(0, n)).has_value()) << n;
  EXPECT_FALSE(decode_outcome(good + "x").has_value()) << "trailing bytes";
  // The first run's count (after the kind, the run count and the status): 0, or past the most
  // results a push can carry (which would expand to a million results and more).
  for (uint32_t count : {0u, static_cast<uint32_t>(kPushItemsMax) + 1}) {
    std::string bad = good;
    for (int i = 0; i < 4; ++i) bad[6 + i] = static_cast<char>(count >> (8 * i));
    EXPECT_FALSE(decode_outcome(bad).has_value()) << count;
  }
}

TEST(Outcome, MessageIdsRunOnInTheirRandomBitsOnly) {
  Uuid u = make_uuid_v7(1700000000000, 0xabc, 0x00fffffffffffffe);
  Uuid next;
  ASSERT_TRUE(uuid_successor(u, &next));
  ASSERT_TRUE(uuid_successor(next, &next)) << "the carry reaches the variant byte";
  EXPECT_EQ(std::vector<uint8_t>(next.bytes.begin(), next.bytes.begin() + 8),
            std::vector<uint8_t>(u.bytes.begin(), u.bytes.begin() + 8))
      << "time and version stay";
  EXPECT_EQ(next.bytes[8] >> 6, 2) << "the variant stays";
  EXPECT_EQ(next, make_uuid_v7(1700000000000, 0xabc, 0x0100000000000000));
  Uuid last = make_uuid_v7(1, 2, 0xffffffffffffffff);
  EXPECT_FALSE(uuid_successor(last, &next)) << "all 62 bits set: no successor";
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
