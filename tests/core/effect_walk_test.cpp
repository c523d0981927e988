// The binary walk of the log's effects and of recorded answers (core/state/walk.h,
// core/node/outcome.h): every member of every effect is walked (but an append's frames, which
// live in message records), and every kind, generated from the Effect variant and from the
// kept reply kinds, comes back field for field from random values.
#include <gtest/gtest.h>

#include <random>

#include "core/node/outcome.h"
#include "core/state/entry.h"
#include "core/state/walk.h"
#include "tests/core/walk_testing.h"

namespace queen {
namespace {

template <size_t I = 0>
void expect_every_effect_walked() {
  if constexpr (I < std::variant_size_v<Effect>) {
    using T = std::variant_alternative_t<I, Effect>;
    if constexpr (std::is_same_v<T, EffAppend>) {
      EffAppend a;
      CountFields count;
      walk(count, a);
      // hashes, frames and packed travel in the message record, not the entry record
      EXPECT_EQ(count.fields + 3, member_count<EffAppend>());
    } else {
      expect_walk_names_every_member<T>(typeid(T).name());
    }
    expect_every_effect_walked<I + 1>();
  }
}

TEST(EffectWalk, EveryMemberOfEveryEffectIsWalked) {
  expect_every_effect_walked();
  QUEEN_EXPECT_WALKED(CursorRow);
  QUEEN_EXPECT_WALKED(GroupMeta);
  QUEEN_EXPECT_WALKED(KvRow);
  QUEEN_EXPECT_WALKED(TimerRow);
  QUEEN_EXPECT_WALKED(RecordLocation);
}

// One entry per kind of effect, each filled at random, decodes to the same entry and encodes
// to the same bytes.
TEST(EffectWalk, EveryEffectComesBackFieldForField) {
  for (size_t kind = 0; kind < std::variant_size_v<Effect>; ++kind) {
    for (uint64_t seed = 1; seed <= 40; ++seed) {
      std::mt19937_64 rng(seed * 1000 + kind);
      Fill fill{rng};
      Entry e;
      e.index = LogIndex(seed);
      e.term = Term(kind + 1);
      e.now_us = static_cast<int64_t>(rng() >> 2);
      Effect& effect = e.effects.emplace_back();
      fill_alternative(effect, kind, fill);
      if (auto* a = std::get_if<EffAppend>(&effect)) {  // frames: in the message record
        a->hashes.clear();
        a->frames.clear();
        a->packed.clear();
      }
      Bytes bytes = encode_entry(e);
      auto back = decode_entry(bytes.data(), bytes.size());
      ASSERT_TRUE(back.ok()) << "kind " << kind << " seed " << seed;
      EXPECT_EQ(back.value(), e) << "kind " << kind << " seed " << seed;
      EXPECT_EQ(encode_entry(back.value()), bytes);
      for (size_t cut = 0; cut < bytes.size(); cut += 1 + cut / 4)
        EXPECT_FALSE(decode_entry(bytes.data(), cut).ok()) << "kind " << kind << " cut " << cut;
    }
  }
}

// The effect tags are those files have always held: a queue's creation is tag 1, the last
// kind's tag its index plus one.
TEST(EffectWalk, EffectTagsAreTheirIndexPlusOne) {
  Bytes b;
  ByteWriter w(&b);
  encode_effect(w, EffCreateQueue{QueueId(7), "q", QueueOptions{}});
  ASSERT_FALSE(b.empty());
  EXPECT_EQ(b[0], 1);
  b.clear();
  encode_effect(w, EffConfiguration{});
  EXPECT_EQ(b[0], std::variant_size_v<Effect>);
  Bytes bad = {0};
  ByteReader r(bad.data(), bad.size());
  Effect e;
  EXPECT_FALSE(decode_effect(r, &e));
}

template <class R>
void expect_kept_reply_comes_back(uint64_t seed) {
  std::mt19937_64 rng(seed);
  Fill fill{rng};
  R reply;
  fill.field(reply);
  std::string bytes = encode_outcome(Reply{reply});
  ASSERT_FALSE(bytes.empty());
  auto back = decode_outcome(bytes);
  ASSERT_TRUE(back.has_value()) << typeid(R).name() << " seed " << seed;
  ASSERT_TRUE(std::holds_alternative<R>(back->body));
  EXPECT_EQ(encode_outcome(*back), bytes) << typeid(R).name() << " seed " << seed;
}

TEST(EffectWalk, EveryKeptAnswerComesBackFieldForField) {
  for (uint64_t seed = 1; seed <= 60; ++seed) {
    expect_kept_reply_comes_back<TxnReply>(seed);
    expect_kept_reply_comes_back<KvReply>(seed);
    expect_kept_reply_comes_back<LockReply>(seed);
    expect_kept_reply_comes_back<TimerReply>(seed);
  }
}

}  // namespace
}  // namespace queen
