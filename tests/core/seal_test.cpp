// Payload encryption at rest in the core (core/seal/seal.h): the planner seals the payloads
// of encrypted queues through the environment before they are framed, refuses a push it
// cannot seal without planning any of it, and the readers open what was sealed.
#include <gtest/gtest.h>

#include <algorithm>

#include "core/seal/seal.h"
#include "core/timers/timers.h"
#include "tests/core/mem_env.h"

namespace queen::testing {
namespace {

// A reversible stand-in for the cipher: the envelope holds the payload's bytes in hex, so
// the plaintext never appears in it.
std::string to_hex(std::string_view s) {
  static const char* kDigits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : s) {
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 15]);
  }
  return out;
}

Result<std::string> hex_seal(std::string_view plain) {
  return std::string(kSealedPayloadPrefix) + "\"" + to_hex(plain) + "\"}";
}

Result<std::string> hex_open(std::string_view sealed) {
  std::string_view head = kSealedPayloadPrefix;
  if (!sealed.starts_with(head) || !sealed.ends_with("\"}") || sealed.size() < head.size() + 3)
    return make_error(Errc::corrupt, "not sealed here");
  std::string_view hex = sealed.substr(head.size() + 1, sealed.size() - head.size() - 3);
  if (hex.size() % 2 != 0 || hex.find_first_not_of("0123456789abcdef") != std::string::npos)
    return make_error(Errc::corrupt, "not sealed here");
  std::string out;
  for (size_t i = 0; i < hex.size(); i += 2)
    out.push_back(static_cast<char>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16)));
  return out;
}

void give_key(MemEnv& env) {
  env.seal_fn = hex_seal;
  env.open_fn = hex_open;
}

void configure_encrypted(Harness& h, const std::string& queue, bool on = true) {
  ConfigureCmd c;
  c.queue = queue;
  c.patch.encryption_enabled = on;
  h.call<ConfigureReply>(c);
}

// Every file the node wrote, concatenated.
std::string disk_bytes(const MemEnv& env) {
  std::string all;
  for (const auto& [name, bytes] : env.files) all.append(bytes.begin(), bytes.end());
  return all;
}

bool on_disk(const MemEnv& env, const std::string& needle) {
  return disk_bytes(env).find(needle) != std::string::npos;
}

TEST(Seal, EncryptedQueueFramesAreSealedAndEveryReaderSeesThePayload) {
  Harness h;
  give_key(h.env);
  configure_encrypted(h, "vault");
  PushReply r = h.push("vault", "Default", {"secret-txn-1", "secret-txn-2"});
  ASSERT_FALSE(r.refused.has_value());
  ASSERT_EQ(r.results.at(1).status, PushStatus::queued);
  // The transactionId is stored in clear (dedup needs it); the payload is not.
  EXPECT_TRUE(on_disk(h.env, "secret-txn-1"));
  EXPECT_FALSE(on_disk(h.env, "{\"t\":\"secret-txn-1\"}"));
  EXPECT_TRUE(on_disk(h.env, to_hex("{\"t\":\"secret-txn-1\"}")));

  PopReply p = h.pop("vault", "readers", 10);
  ASSERT_EQ(p.messages.size(), 2u);
  EXPECT_EQ(p.messages[0].payload, "{\"t\":\"secret-txn-1\"}");
  EXPECT_EQ(p.messages[1].payload, "{\"t\":\"secret-txn-2\"}");
  const PartitionState* part = h.node().store().partition("vault", "Default");
  ASSERT_NE(part, nullptr);
  auto read = h.node().read_messages(part->id, Offset(0), 10);
  ASSERT_TRUE(read.ok());
  ASSERT_EQ(read.value().size(), 2u);
  EXPECT_EQ(read.value()[1].payload, "{\"t\":\"secret-txn-2\"}");
}

TEST(Seal, PushToAnEncryptedQueueWithoutAKeyIsRefusedAndPlansNothing) {
  Harness h;  // the MemEnv's default: no key
  configure_encrypted(h, "vault");
  uint64_t committed = h.node().stats().entries_committed;
  PushReply r = h.push("vault", "p1", {"secret-txn-1"});
  ASSERT_TRUE(r.refused.has_value());
  EXPECT_EQ(r.refused->code, api::Errc::encryption_unavailable);
  EXPECT_NE(r.refused->message.find("QUEEN_ENCRYPTION_KEY"), std::string::npos);
  ASSERT_EQ(r.results.size(), 1u);
  EXPECT_EQ(r.results[0].status, PushStatus::error);
  EXPECT_EQ(h.node().store().partition("vault", "p1"), nullptr);  // not even created
  EXPECT_EQ(h.node().stats().entries_committed, committed);
  EXPECT_FALSE(on_disk(h.env, "secret-txn-1"));
  // A push to a queue without the option is stored as sent.
  EXPECT_FALSE(h.push("plain", "Default", {"open-txn"}).refused.has_value());
  EXPECT_TRUE(on_disk(h.env, "{\"t\":\"open-txn\"}"));
}

TEST(Seal, ARefusedItemRefusesTheWholePushAcrossQueues) {
  Harness h;
  configure_encrypted(h, "vault");
  PushCmd c = h.push_cmd("plain", "Default", {"a"});
  PushCmd v = h.push_cmd("vault", "Default", {"b"});
  c.items.push_back(v.items[0]);
  PushReply r = h.call<PushReply>(c);
  ASSERT_TRUE(r.refused.has_value());
  EXPECT_EQ(h.node().store().queue("plain"), nullptr);
  EXPECT_FALSE(on_disk(h.env, "{\"t\":\"a\"}"));
}

TEST(Seal, TransactionPushingToAnEncryptedQueueWithoutAKeyChangesNothing) {
  Harness h;
  configure_encrypted(h, "vault");
  TxnCmd t;
  TxnOperation op;
  op.items = h.push_cmd("vault", "Default", {"txn-secret"}).items;
  t.operations = {op};
  KvOp put;
  put.op = KvOpKind::put;
  put.ns = "steps";
  put.key = "k";
  put.value = "1";
  put.forever = true;
  t.kv = {put};
  ReplyHandle handle = h.send(t);
  h.env.run();
  h.env.advance_ms(10);
  auto reply = h.take(handle);
  ASSERT_TRUE(reply.has_value());
  auto* e = std::get_if<ErrorReply>(&reply->body);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->code, api::Errc::encryption_unavailable);
  EXPECT_EQ(h.node().store().kv_row({"steps", "k"}), nullptr);
  const PartitionState* part = h.node().store().partition("vault", "Default");  // by configure
  ASSERT_NE(part, nullptr);
  EXPECT_EQ(part->next_offset, Offset(0));
  EXPECT_FALSE(on_disk(h.env, "txn-secret"));
}

TimerOp schedule_in(const std::string& queue, const std::string& key, int64_t delay_ms) {
  TimerOp op;
  op.op = TimerOpKind::schedule;
  op.queue = queue;
  op.timer_key = key;
  op.delay_ms = delay_ms;
  op.txn = "timer-" + key;
  op.txn_hash = hash_of(op.txn);
  op.message_id = make_uuid_v7(1, 2, 3);
  op.payload = "{\"timer\":\"" + key + "\"}";
  return op;
}

TEST(Seal, TimerSchedulesForAnEncryptedQueueWithoutAKeyAreRefused) {
  Harness h;
  configure_encrypted(h, "vault");
  ReplyHandle handle =
      h.send(TimerCmd{{schedule_in("plain", "a", 100), schedule_in("vault", "b", 100)}});
  h.env.run();
  auto reply = h.take(handle);
  ASSERT_TRUE(reply.has_value());
  auto* e = std::get_if<ErrorReply>(&reply->body);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->code, api::Errc::encryption_unavailable);
  EXPECT_FALSE(h.call<TimerQueryReply>(TimerQueryCmd{TimerQueryKind::peek, "plain", "a"}).found);
  // A cancel names no payload: it is not refused.
  TimerOp cancel = schedule_in("vault", "b", 0);
  cancel.op = TimerOpKind::cancel;
  EXPECT_TRUE(h.call<TimerReply>(TimerCmd{{cancel}}).results.size() == 1);
}

TEST(Seal, AFiredTimerPushesASealedMessage) {
  Harness h;
  give_key(h.env);
  configure_encrypted(h, "vault");
  ASSERT_TRUE(h.call<TimerReply>(TimerCmd{{schedule_in("vault", "k1", 100)}}).results[0].ok);
  h.env.advance_ms(300);
  PopReply p = h.pop("vault", "readers", 10);
  ASSERT_EQ(p.messages.size(), 1u);
  EXPECT_EQ(p.messages[0].payload, "{\"timer\":\"k1\"}");
  EXPECT_TRUE(on_disk(h.env, to_hex("{\"timer\":\"k1\"}")));  // the fired message's frame
}

TEST(Seal, ATimerPayloadIsSealedWhenScheduledAndFiresWithoutTheKey) {
  Harness h;
  give_key(h.env);
  configure_encrypted(h, "vault");
  ASSERT_TRUE(h.call<TimerReply>(TimerCmd{{schedule_in("vault", "k1", 100)}}).results[0].ok);
  // The scheduled timer's row is on disk sealed, never in the clear.
  EXPECT_FALSE(on_disk(h.env, "{\"timer\":\"k1\"}"));
  EXPECT_TRUE(on_disk(h.env, to_hex("{\"timer\":\"k1\"}")));
  auto peek = h.call<TimerQueryReply>(TimerQueryCmd{TimerQueryKind::peek, "vault", "k1"});
  ASSERT_TRUE(peek.found);
  EXPECT_EQ(peek.timers.at(0).payload, "{\"timer\":\"k1\"}") << "a peek opens it";
  h.env.seal_fn = nullptr;  // the key cannot seal any more when the timer comes due
  h.env.advance_ms(300);
  EXPECT_FALSE(h.call<TimerQueryReply>(TimerQueryCmd{TimerQueryKind::peek, "vault", "k1"}).found);
  PopReply p = h.pop("vault", "readers", 10);
  ASSERT_EQ(p.messages.size(), 1u);
  EXPECT_EQ(p.messages[0].payload, "{\"timer\":\"k1\"}");
  EXPECT_FALSE(on_disk(h.env, "{\"timer\":\"k1\"}"));
}

// A timer scheduled in the clear for a queue that turns encrypted later, on a node without
// the key: each fire fails, is retried after a doubling backoff, and the fifth failure
// dead-letters it under __timer__ with its message, which a replay pushes once the key is
// back.
TEST(Seal, AFireThatKeepsFailingBacksOffThenDeadLettersTheTimer) {
  Harness h;
  ASSERT_TRUE(h.call<TimerReply>(TimerCmd{{schedule_in("vault", "k1", 100)}}).results[0].ok);
  configure_encrypted(h, "vault");  // no key
  auto peek = [&] {
    return h.call<TimerQueryReply>(TimerQueryCmd{TimerQueryKind::peek, "vault", "k1"});
  };
  int64_t due_us = peek().timers.at(0).deliver_at_us;
  for (uint32_t failures = 1; failures < TimerPlanner::kFireAttemptsMax; ++failures) {
    h.env.advance_ms((due_us - h.env.now) / 1000 + 100);
    auto t = peek();
    ASSERT_TRUE(t.found) << "failure " << failures;
    EXPECT_EQ(t.timers.at(0).attempts, failures);
    int64_t backoff_ms = (t.timers.at(0).deliver_at_us - due_us) / 1000;
    EXPECT_GE(backoff_ms, TimerPlanner::fire_backoff_ms(failures)) << "failure " << failures;
    EXPECT_LE(backoff_ms, TimerPlanner::fire_backoff_ms(failures) + 200) << failures;
    due_us = t.timers.at(0).deliver_at_us;
  }
  EXPECT_EQ(TimerPlanner::fire_backoff_ms(4), 8 * TimerPlanner::fire_backoff_ms(1));
  h.env.advance_ms((due_us - h.env.now) / 1000 + 100);
  EXPECT_FALSE(peek().found) << "the fifth failure dead-letters the timer";
  auto dlq = h.call<DlqReply>(DlqQueryCmd{"vault", "__timer__", 10});
  ASSERT_EQ(dlq.records.size(), 1u);
  const DlqRecord& letter = dlq.records[0];
  EXPECT_EQ(letter.group, "__timer__");
  EXPECT_EQ(letter.transaction_id, "timer-k1");
  EXPECT_EQ(letter.payload, "{\"timer\":\"k1\"}");
  EXPECT_EQ(letter.retry_count, TimerPlanner::kFireAttemptsMax);
  EXPECT_NE(letter.error.find("encrypt"), std::string::npos) << letter.error;
  const PartitionState* part = h.node().store().partition("vault", "Default");
  EXPECT_TRUE(part == nullptr || part->next_offset == Offset(0)) << "nothing was pushed";

  h.env.crash();  // the letter is in the log: it comes back with the store
  h.restart();
  ASSERT_EQ(h.call<DlqReply>(DlqQueryCmd{"vault", "__timer__", 10}).records.size(), 1u);
  give_key(h.env);
  auto replay = h.call<DlqReplayReply>(DlqReplayCmd{letter.id, make_uuid_v7(1, 2, 9)});
  ASSERT_TRUE(replay.success) << replay.error;
  PopReply p = h.pop("vault", "readers", 10);
  ASSERT_EQ(p.messages.size(), 1u);
  EXPECT_EQ(p.messages[0].payload, "{\"timer\":\"k1\"}");
  EXPECT_TRUE(h.call<DlqReply>(DlqQueryCmd{"vault", "__timer__", 10}).records.empty());
}

TEST(Seal, ADeadLetterReplayThatCannotBeSealedKeepsTheLetter) {
  Harness h;
  give_key(h.env);
  configure_encrypted(h, "vault");
  h.push("vault", "Default", {"poison"});
  PopReply p = h.pop("vault", "workers", 1);
  ASSERT_EQ(p.messages.size(), 1u);
  ASSERT_TRUE(h.ack(p.messages[0], "workers", AckStatus::dlq, p.lease_id).success);
  ASSERT_EQ(h.node().store().dlq().begin()->second.size(), 1u);
  uint64_t id = h.node().store().dlq().begin()->second[0].id;
  h.env.seal_fn = nullptr;
  ReplyHandle handle = h.send(DlqReplayCmd{id, make_uuid_v7(1, 2, 4)});
  h.env.run();
  auto reply = h.take(handle);
  ASSERT_TRUE(reply.has_value());
  auto* e = std::get_if<ErrorReply>(&reply->body);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->code, api::Errc::encryption_unavailable);
  h.env.advance_ms(10);
  EXPECT_EQ(h.node().store().dlq().begin()->second.size(), 1u);
}

TEST(Seal, WhatWasSealedStillOpensAfterEncryptionIsTurnedOff) {
  Harness h;
  give_key(h.env);
  configure_encrypted(h, "vault");
  h.push("vault", "Default", {"before"});
  configure_encrypted(h, "vault", false);
  h.push("vault", "Default", {"after"});
  EXPECT_TRUE(on_disk(h.env, "{\"t\":\"after\"}"));
  PopReply p = h.pop("vault", "readers", 10);
  ASSERT_EQ(p.messages.size(), 2u);
  EXPECT_EQ(p.messages[0].payload, "{\"t\":\"before\"}");
  EXPECT_EQ(p.messages[1].payload, "{\"t\":\"after\"}");
}

TEST(Seal, ASealedPayloadThatDoesNotOpenIsHandedBackAsStored) {
  Harness h;
  give_key(h.env);
  configure_encrypted(h, "vault");
  h.push("vault", "Default", {"lost-key"});
  h.env.open_fn = nullptr;  // the key changed or went away
  PopReply p = h.pop("vault", "readers", 10);
  ASSERT_EQ(p.messages.size(), 1u);
  EXPECT_TRUE(looks_sealed(p.messages[0].payload)) << p.messages[0].payload;
  EXPECT_EQ(p.messages[0].payload, hex_seal("{\"t\":\"lost-key\"}").value());
}

TEST(Seal, AClientPayloadShapedLikeAnEnvelopeIsReadAsSent) {
  Harness h;
  give_key(h.env);
  PushCmd c = h.push_cmd("plain", "Default", {"x"});
  c.items[0].payload = "{\"encrypted\":\"zz\",\"iv\":\"\",\"authTag\":\"\"}";
  h.call<PushReply>(c);
  PopReply p = h.pop("plain", "readers", 1);
  ASSERT_EQ(p.messages.size(), 1u);
  EXPECT_EQ(p.messages[0].payload, c.items[0].payload);
}

}  // namespace
}  // namespace queen::testing
