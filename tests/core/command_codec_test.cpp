// The forwarded command and reply codec (core/api/command_codec.h): every field of every
// kind comes back, the walk names every member of every struct, and bytes that are cut short,
// carry extra bytes or hold an out-of-range value never decode.
#include "core/api/command_codec.h"

#include <gtest/gtest.h>

#include <random>
#include <type_traits>

#include "core/api/walk.h"
#include "tests/core/walk_testing.h"

namespace queen {
namespace {

#define QUEEN_EXPECT_WALKED(T) expect_walk_names_every_member<T>(#T)

TEST(CommandCodec, EveryMemberOfEveryCommandIsWalked) {
  QUEEN_EXPECT_WALKED(QueueOptions);
  QUEEN_EXPECT_WALKED(QueueOptionsPatch);
  QUEEN_EXPECT_WALKED(PushItem);
  QUEEN_EXPECT_WALKED(PushCmd);
  QUEEN_EXPECT_WALKED(PopCmd);
  QUEEN_EXPECT_WALKED(AckItem);
  QUEEN_EXPECT_WALKED(AckCmd);
  QUEEN_EXPECT_WALKED(ConfigureCmd);
  QUEEN_EXPECT_WALKED(HealthCmd);
  QUEEN_EXPECT_WALKED(DlqQueryCmd);
  QUEEN_EXPECT_WALKED(KvOp);
  QUEEN_EXPECT_WALKED(KvCmd);
  QUEEN_EXPECT_WALKED(LockOp);
  QUEEN_EXPECT_WALKED(LockCmd);
  QUEEN_EXPECT_WALKED(TimerOp);
  QUEEN_EXPECT_WALKED(TimerCmd);
  QUEEN_EXPECT_WALKED(TimerQueryCmd);
  QUEEN_EXPECT_WALKED(PositionOp);
  QUEEN_EXPECT_WALKED(TxnOperation);
  QUEEN_EXPECT_WALKED(TxnCmd);
  QUEEN_EXPECT_WALKED(LeaseExtendCmd);
  QUEEN_EXPECT_WALKED(GroupListCmd);
  QUEEN_EXPECT_WALKED(GroupDetailsCmd);
  QUEEN_EXPECT_WALKED(GroupDeleteCmd);
  QUEEN_EXPECT_WALKED(SeekCmd);
  QUEEN_EXPECT_WALKED(SubscriptionCmd);
  QUEEN_EXPECT_WALKED(DlqReplayCmd);
  QUEEN_EXPECT_WALKED(QueueListCmd);
  QUEEN_EXPECT_WALKED(QueueGetCmd);
  QUEEN_EXPECT_WALKED(QueueDeleteCmd);
  QUEEN_EXPECT_WALKED(MessageGetCmd);
  QUEEN_EXPECT_WALKED(MessageBrowseCmd);
  QUEEN_EXPECT_WALKED(MetricsCmd);
  QUEEN_EXPECT_WALKED(MessageDeleteCmd);
  QUEEN_EXPECT_WALKED(TraceRecordCmd);
  QUEEN_EXPECT_WALKED(TraceQueryCmd);
}

// Every kind of the variants, generated from them: a new kind whose walk misses a member fails.
TEST(CommandCodec, EveryMemberOfEveryKindIsWalked) {
  expect_every_alternative_walked<Command>();
  expect_every_alternative_walked<decltype(Reply::body)>();
}

TEST(CommandCodec, EveryMemberOfEveryReplyIsWalked) {
  QUEEN_EXPECT_WALKED(ErrorReply);
  QUEEN_EXPECT_WALKED(PushResult);
  QUEEN_EXPECT_WALKED(PushReply);
  QUEEN_EXPECT_WALKED(PopMessage);
  QUEEN_EXPECT_WALKED(PopReply);
  QUEEN_EXPECT_WALKED(AckResult);
  QUEEN_EXPECT_WALKED(AckReply);
  QUEEN_EXPECT_WALKED(ConfigureReply);
  QUEEN_EXPECT_WALKED(HealthReply);
  QUEEN_EXPECT_WALKED(DlqRecord);
  QUEEN_EXPECT_WALKED(DlqReply);
  QUEEN_EXPECT_WALKED(KvRowView);
  QUEEN_EXPECT_WALKED(KvResult);
  QUEEN_EXPECT_WALKED(KvReply);
  QUEEN_EXPECT_WALKED(LockHolder);
  QUEEN_EXPECT_WALKED(LockResult);
  QUEEN_EXPECT_WALKED(LockReply);
  QUEEN_EXPECT_WALKED(TimerResult);
  QUEEN_EXPECT_WALKED(TimerReply);
  QUEEN_EXPECT_WALKED(TimerView);
  QUEEN_EXPECT_WALKED(TimerQueryReply);
  QUEEN_EXPECT_WALKED(TxnResult);
  QUEEN_EXPECT_WALKED(TxnReply);
  QUEEN_EXPECT_WALKED(LeaseExtendReply);
  QUEEN_EXPECT_WALKED(GroupPartitionView);
  QUEEN_EXPECT_WALKED(GroupView);
  QUEEN_EXPECT_WALKED(GroupsReply);
  QUEEN_EXPECT_WALKED(GroupChangeReply);
  QUEEN_EXPECT_WALKED(DlqReplayReply);
  QUEEN_EXPECT_WALKED(QueueView);
  QUEEN_EXPECT_WALKED(QueuesReply);
  QUEEN_EXPECT_WALKED(MessagesReply);
  QUEEN_EXPECT_WALKED(MessageDeleteReply);
  QUEEN_EXPECT_WALKED(TraceView);
  QUEEN_EXPECT_WALKED(TraceNameView);
  QUEEN_EXPECT_WALKED(TraceReply);
}

TEST(CommandCodec, EveryCommandComesBackFieldForField) {
  for (size_t kind = 0; kind < std::variant_size_v<Command>; ++kind) {
    for (uint64_t seed = 1; seed <= 40; ++seed) {
      std::mt19937_64 rng(seed * 1000 + kind);
      Fill fill{rng};
      ForwardedCommand c;
      fill.field(c.request_id);
      c.remaining_ms = static_cast<int64_t>(rng() % 60000);
      fill_alternative(c.command, kind, fill);
      Bytes bytes = encode_command(c);
      auto back = decode_command(bytes.data(), bytes.size());
      ASSERT_TRUE(back) << "kind " << kind << " seed " << seed;
      EXPECT_EQ(back->command.index(), kind);
      EXPECT_EQ(back->request_id, c.request_id);
      EXPECT_EQ(back->remaining_ms, c.remaining_ms);
      EXPECT_EQ(encode_command(*back), bytes) << "kind " << kind << " seed " << seed;
    }
  }
}

TEST(CommandCodec, EveryReplyComesBackFieldForField) {
  constexpr size_t kMetrics = 18;  // the index of MetricsReply in Reply::body
  static_assert(
      std::is_same_v<std::variant_alternative_t<kMetrics, decltype(Reply::body)>, MetricsReply>);
  for (size_t kind = 0; kind < std::variant_size_v<decltype(Reply::body)>; ++kind) {
    if (kind == kMetrics) continue;
    for (uint64_t seed = 1; seed <= 40; ++seed) {
      std::mt19937_64 rng(seed * 1000 + kind);
      Fill fill{rng};
      Reply r;
      fill_alternative(r.body, kind, fill);
      Bytes bytes = encode_reply(r);
      auto back = decode_reply(bytes.data(), bytes.size());
      ASSERT_TRUE(back) << "kind " << kind << " seed " << seed;
      EXPECT_EQ(back->body.index(), kind);
      EXPECT_EQ(encode_reply(*back), bytes) << "kind " << kind << " seed " << seed;
    }
  }
}

TEST(CommandCodec, AFieldChangesTheBytes) {
  ForwardedCommand a;
  PushItem item;
  item.queue = "q";
  item.payload = R"({"n":1})";
  a.command = PushCmd{{item}};
  ForwardedCommand b = a;
  std::get<PushCmd>(b.command).items[0].producer_sub = "alice";
  EXPECT_NE(encode_command(a), encode_command(b));
  auto back = decode_command(encode_command(b).data(), encode_command(b).size());
  ASSERT_TRUE(back);
  EXPECT_EQ(std::get<PushCmd>(back->command).items[0].producer_sub, "alice");
  EXPECT_EQ(std::get<PushCmd>(back->command).items[0].payload, R"({"n":1})");
}

TEST(CommandCodec, MetricsAreNotForwarded) {
  Reply metrics{MetricsReply{}};
  Bytes bytes = encode_reply(metrics);
  auto back = decode_reply(bytes.data(), bytes.size());
  ASSERT_TRUE(back);
  const auto* e = std::get_if<ErrorReply>(&back->body);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->code, api::Errc::internal);
}

TEST(CommandCodec, DamagedBytesNeverDecode) {
  std::mt19937_64 rng(7);
  Fill fill{rng};
  ForwardedCommand c;
  TxnCmd txn;
  for (int i = 0; i < 3; ++i) fill.field(txn);  // a value with lists in it
  txn.operations.resize(2);
  txn.operations[0].is_ack = true;
  txn.operations[1].items.resize(2);
  c.command = txn;
  Bytes bytes = encode_command(c);
  for (size_t cut = 0; cut < bytes.size(); ++cut)
    EXPECT_FALSE(decode_command(bytes.data(), cut)) << "cut at " << cut;
  Bytes longer = bytes;
  longer.push_back(0);
  EXPECT_FALSE(decode_command(longer.data(), longer.size()));
  Bytes kind = bytes;
  kind[2 + 16 + 8] = static_cast<uint8_t>(std::variant_size_v<Command>);  // the kind
  EXPECT_FALSE(decode_command(kind.data(), kind.size()));
  Bytes format = bytes;
  format[0] = 9;
  EXPECT_FALSE(decode_command(format.data(), format.size()));
  // A reply is not a command.
  Bytes reply = encode_reply(Reply{ErrorReply{}});
  EXPECT_FALSE(decode_command(reply.data(), reply.size()));
}

TEST(CommandCodec, AnEnumOrABoolOutOfRangeIsRefused) {
  ForwardedCommand c;
  c.command = PopCmd{};
  Bytes bytes = encode_command(c);
  // format, tag, request id (16), remaining_ms (8), kind: then PopCmd's fields.
  size_t pop = 2 + 16 + 8 + 1;
  // queue, ns, task (empty strings: 4 bytes each), partition (absent: 1), group (4 + 14).
  size_t batch = pop + 12 + 1 + 4 + 14;
  size_t wait = batch + 4;
  size_t mode = wait + 1;
  Bytes bad_bool = bytes;
  bad_bool[wait] = 2;
  EXPECT_FALSE(decode_command(bad_bool.data(), bad_bool.size()));
  Bytes bad_enum = bytes;
  bad_enum[mode] = static_cast<uint8_t>(SubscriptionMode::from_time) + 1;
  EXPECT_FALSE(decode_command(bad_enum.data(), bad_enum.size()));
  Bytes good = bytes;
  good[mode] = static_cast<uint8_t>(SubscriptionMode::from_time);
  auto back = decode_command(good.data(), good.size());
  ASSERT_TRUE(back);
  EXPECT_EQ(std::get<PopCmd>(back->command).subscription_mode, SubscriptionMode::from_time);
}

}  // namespace
}  // namespace queen
