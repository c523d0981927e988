// KV, once gates, locks and timers through the node.
#include <gtest/gtest.h>

#include "core/kv/locks.h"
#include "tests/core/mem_env.h"

namespace queen::testing {
namespace {

KvOp put(const std::string& key, const std::string& value, std::optional<uint64_t> expect = {}) {
  KvOp op;
  op.op = KvOpKind::put;
  op.ns = "orders";
  op.key = key;
  op.value = value;
  op.forever = true;
  op.expect = expect;
  return op;
}

KvOp get(const std::string& key) {
  KvOp op;
  op.op = KvOpKind::get;
  op.ns = "orders";
  op.key = key;
  return op;
}

TEST(Kv, PutGetVersionsAndExpect) {
  Harness h;
  KvReply r = h.call<KvReply>(KvCmd{{put("a", "1"), get("a")}});
  ASSERT_TRUE(r.ok);
  EXPECT_TRUE(r.results[0].applied);
  uint64_t v1 = r.results[0].row.version;
  EXPECT_TRUE(r.results[1].found);  // a call sees its own earlier writes
  EXPECT_EQ(r.results[1].row.value, "1");
  KvReply stale = h.call<KvReply>(KvCmd{{put("a", "2", v1 + 100)}});
  EXPECT_FALSE(stale.results[0].applied);
  EXPECT_EQ(stale.results[0].reason, "version");
  KvReply cas = h.call<KvReply>(KvCmd{{put("a", "3", v1)}});
  EXPECT_TRUE(cas.results[0].applied);
  EXPECT_GT(cas.results[0].row.version, v1);
  KvReply exists = h.call<KvReply>(KvCmd{{put("a", "4", 0)}});
  EXPECT_EQ(exists.results[0].reason, "exists");
  EXPECT_EQ(h.call<KvReply>(KvCmd{{get("a")}}).results[0].row.value, "3");
}

TEST(Kv, RequiredPreconditionAbortsTheWholeCall) {
  Harness h;
  h.call<KvReply>(KvCmd{{put("taken", "1")}});
  KvOp once;
  once.op = KvOpKind::put_if_absent;
  once.ns = "orders";
  once.key = "taken";
  once.ttl_s = 60;
  once.required = true;
  KvReply r = h.call<KvReply>(KvCmd{{put("side", "x"), once}});
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.failed_index, 1u);
  EXPECT_EQ(r.kv_reason, "exists");
  EXPECT_FALSE(h.call<KvReply>(KvCmd{{get("side")}}).results[0].found);
}

TEST(Kv, IncrRespectsBoundsAndTypes) {
  Harness h;
  KvOp inc;
  inc.op = KvOpKind::incr;
  inc.ns = "c";
  inc.key = "n";
  inc.forever = true;
  inc.delta = 5;
  inc.max = 7;
  EXPECT_EQ(h.call<KvReply>(KvCmd{{inc}}).results[0].row.value, "5");
  KvReply over = h.call<KvReply>(KvCmd{{inc}});
  EXPECT_FALSE(over.results[0].applied);
  EXPECT_EQ(over.results[0].reason, "limit");
  KvOp text = put("s", "\"text\"");
  text.ns = "c";
  h.call<KvReply>(KvCmd{{text}});
  inc.key = "s";
  EXPECT_EQ(h.call<KvReply>(KvCmd{{inc}}).results[0].reason, "type");
}

TEST(Kv, ExpiredKeysAreNeverReturnedAndAreSwept) {
  Harness h;
  KvOp p = put("tmp", "1");
  p.forever = false;
  p.ttl_s = 1;
  h.call<KvReply>(KvCmd{{p}});
  EXPECT_TRUE(h.call<KvReply>(KvCmd{{get("tmp")}}).results[0].found);
  h.env.advance_ms(1100);
  EXPECT_FALSE(h.call<KvReply>(KvCmd{{get("tmp")}}).results[0].found);
  h.env.advance_ms(1100);
  EXPECT_EQ(h.node().store().kv().count({"orders", "tmp"}), 0u);
}

TEST(Kv, GetPrefixPagesInKeyOrder) {
  Harness h;
  std::vector<KvOp> ops;
  for (int i = 0; i < 5; ++i) ops.push_back(put("user:" + std::to_string(i), std::to_string(i)));
  ops.push_back(put("zzz", "0"));
  h.call<KvReply>(KvCmd{ops});
  KvOp scan;
  scan.op = KvOpKind::get_prefix;
  scan.ns = "orders";
  scan.prefix = "user:";
  scan.limit = 3;
  KvResult page = h.call<KvReply>(KvCmd{{scan}}).results[0];
  ASSERT_EQ(page.rows.size(), 3u);
  EXPECT_TRUE(page.truncated);
  EXPECT_EQ(page.next_after, "user:2");
  scan.after = page.next_after;
  KvResult rest = h.call<KvReply>(KvCmd{{scan}}).results[0];
  ASSERT_EQ(rest.rows.size(), 2u);
  EXPECT_FALSE(rest.truncated);
  EXPECT_EQ(rest.rows[1].key, "user:4");
}

LockOp acquire(const std::string& owner, uint32_t limit = 1, int64_t ttl_s = 30) {
  LockOp op;
  op.op = LockOpKind::acquire;
  op.name = "job";
  op.owner = owner;
  op.limit = limit;
  op.ttl_s = ttl_s;
  return op;
}

TEST(Locks, OneHolderReacquireIsTheSamePermitAndExpiryHandsOverWithAHigherToken) {
  Harness h;
  LockResult a = h.call<LockReply>(LockCmd{{acquire("alice", 1, 2)}}).results[0];
  ASSERT_TRUE(a.ok);
  LockResult again = h.call<LockReply>(LockCmd{{acquire("alice", 1, 2)}}).results[0];
  EXPECT_TRUE(again.already);
  EXPECT_EQ(again.token, a.token);
  LockResult b = h.call<LockReply>(LockCmd{{acquire("bob")}}).results[0];
  EXPECT_FALSE(b.ok);
  EXPECT_EQ(b.reason, "held");
  ASSERT_EQ(b.holders.size(), 1u);
  EXPECT_EQ(b.holders[0].owner, "alice");
  h.env.advance_ms(2100);
  LockResult taken = h.call<LockReply>(LockCmd{{acquire("bob")}}).results[0];
  ASSERT_TRUE(taken.ok);
  EXPECT_GT(taken.token, a.token);
  // Alice's guarded transaction now rolls back.
  TxnCmd guarded;
  KvOp guard;
  guard.op = KvOpKind::check;
  guard.ns = kLocksNamespace;
  guard.key = lock_key("job", a.slot);
  guard.expect = a.token;
  guard.required = true;
  guarded.kv.push_back(guard);
  guarded.kv.push_back(put("result", "1"));
  TxnReply r = h.call<TxnReply>(guarded);
  EXPECT_FALSE(r.success);
  EXPECT_EQ(r.reason, "kv_precondition");
}

TEST(Locks, SemaphoreHasNSlotsAndRenewGivesANewToken) {
  Harness h;
  EXPECT_TRUE(h.call<LockReply>(LockCmd{{acquire("a", 2)}}).results[0].ok);
  LockResult b = h.call<LockReply>(LockCmd{{acquire("b", 2)}}).results[0];
  EXPECT_TRUE(b.ok);
  LockResult c = h.call<LockReply>(LockCmd{{acquire("c", 2)}}).results[0];
  EXPECT_EQ(c.reason, "held");
  LockOp renew;
  renew.op = LockOpKind::renew;
  renew.name = "job";
  renew.token = b.token;
  LockResult rn = h.call<LockReply>(LockCmd{{renew}}).results[0];
  EXPECT_TRUE(rn.ok);
  EXPECT_GT(rn.token, b.token);
  LockOp rel;
  rel.op = LockOpKind::release;
  rel.name = "job";
  rel.token = rn.token;
  EXPECT_TRUE(h.call<LockReply>(LockCmd{{rel}}).results[0].ok);
  EXPECT_TRUE(h.call<LockReply>(LockCmd{{acquire("c", 2)}}).results[0].ok);
}

TimerOp schedule(const std::string& key, int64_t delay_ms, const std::string& txn) {
  TimerOp op;
  op.op = TimerOpKind::schedule;
  op.queue = "reminders";
  op.timer_key = key;
  op.delay_ms = delay_ms;
  op.txn = txn;
  op.txn_hash = hash_of(txn);
  op.message_id = make_uuid_v7(1, 2, std::hash<std::string>{}(txn));
  op.payload = "{\"k\":\"" + key + "\"}";
  return op;
}

TEST(Timers, DueTimerPushesItsMessageAndDeletesItself) {
  Harness h;
  TimerReply r = h.call<TimerReply>(TimerCmd{{schedule("t1", 200, "fire-1")}});
  ASSERT_TRUE(r.results[0].ok);
  EXPECT_EQ(r.results[0].status, "scheduled");
  EXPECT_TRUE(
      h.call<TimerQueryReply>(TimerQueryCmd{TimerQueryKind::peek, "reminders", "t1"}).found);
  h.env.advance_ms(300);
  EXPECT_TRUE(h.node().store().timers().empty());
  PopReply p = h.pop("reminders", "g", 10);
  ASSERT_EQ(p.messages.size(), 1u);
  EXPECT_EQ(p.messages[0].transaction_id, "fire-1");
  EXPECT_EQ(p.messages[0].payload, "{\"k\":\"t1\"}");
}

TEST(Timers, CancelAndRescheduleAndDedupOnTheTimersTxn) {
  Harness h;
  h.call<TimerReply>(TimerCmd{{schedule("a", 100, "x"), schedule("b", 100, "y")}});
  TimerOp cancel;
  cancel.op = TimerOpKind::cancel;
  cancel.queue = "reminders";
  cancel.timer_key = "a";
  EXPECT_EQ(h.call<TimerReply>(TimerCmd{{cancel}}).results[0].status, "cancelled");
  EXPECT_EQ(h.call<TimerReply>(TimerCmd{{cancel}}).results[0].status, "absent");
  TimerOp later = schedule("b", 1000, "y");
  later.op = TimerOpKind::reschedule;
  EXPECT_EQ(h.call<TimerReply>(TimerCmd{{later}}).results[0].status, "rescheduled");
  h.env.advance_ms(300);
  EXPECT_EQ(h.node().store().timers().size(), 1u);
  h.push("reminders", "Default", {"y"});  // the timer's txn is already there: dedup
  h.env.advance_ms(1000);
  EXPECT_TRUE(h.node().store().timers().empty());
  EXPECT_EQ(h.node().store().partition("reminders", "Default")->next_offset, Offset(1));
}

}  // namespace
}  // namespace queen::testing
