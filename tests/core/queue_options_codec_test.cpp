// Queue options in the log: minPopWaitTime (kept and echoed, as 2.x does) survives an entry's
// round trip, and options without it keep the layout older files were written in.
#include <gtest/gtest.h>

#include "core/state/entry.h"

namespace queen {
namespace {

Entry queue_entry(const QueueOptions& o) {
  Entry e;
  e.index = LogIndex(7);
  e.term = Term(2);
  e.effects.push_back(EffCreateQueue{QueueId(1), "q", o});
  return e;
}

QueueOptions round_trip(const QueueOptions& o) {
  Bytes bytes = encode_entry(queue_entry(o));
  auto back = decode_entry(bytes.data(), bytes.size());
  EXPECT_TRUE(back.ok());
  return std::get<EffCreateQueue>(back.value().effects.at(0)).options;
}

TEST(QueueOptionsCodec, MinPopWaitTimeAndEncryptionSurviveTheLog) {
  QueueOptions o;
  o.min_pop_wait_time_ms = 250;
  o.encryption_enabled = true;
  o.ns = "billing";
  EXPECT_EQ(round_trip(o), o);
  o.encryption_enabled = false;
  EXPECT_EQ(round_trip(o), o);
}

TEST(QueueOptionsCodec, OptionsWithoutNewFieldsKeepTheOlderLayout) {
  QueueOptions plain;
  plain.encryption_enabled = true;
  QueueOptions waiting = plain;
  waiting.min_pop_wait_time_ms = 1;
  Bytes a = encode_entry(queue_entry(plain));
  Bytes b = encode_entry(queue_entry(waiting));
  EXPECT_EQ(b.size(), a.size() + 8);  // one i64 more, nothing else moved
  EXPECT_EQ(round_trip(plain), plain);
}

}  // namespace
}  // namespace queen
