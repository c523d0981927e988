// The qlog record and entry formats: round trips, torn tails, bad checksums.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include "core/qlog/record.h"
#include "core/state/entry.h"

namespace queen {
namespace {

Bytes make_record(uint64_t seq, const std::string& body_text) {
  Bytes out;
  RecordHeader h{seq, 7, 100, 3, 1234567, RecordKind::message};
  encode_record(h, reinterpret_cast<const uint8_t*>(body_text.data()), body_text.size(), &out);
  return out;
}

TEST(Record, RoundTripKeepsHeaderAndBody) {
  Bytes b = make_record(9, "hello");
  ASSERT_EQ(b.size(), kRecordHeaderBytes + 5);
  auto v = decode_record(b.data(), b.size());
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v.value().header.seq, 9u);
  EXPECT_EQ(v.value().header.pid, 7u);
  EXPECT_EQ(v.value().header.base_offset, 100u);
  EXPECT_EQ(v.value().header.count, 3u);
  EXPECT_EQ(v.value().header.created_at_us, 1234567);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(v.value().body), v.value().body_size),
            "hello");
  EXPECT_EQ(v.value().total_size, b.size());
}

TEST(Record, EveryShortPrefixIsTruncatedNeverCorruptOrOk) {
  Bytes b = make_record(1, "payload bytes");
  for (size_t n = 0; n < b.size(); ++n) {
    auto v = decode_record(b.data(), n);
    ASSERT_FALSE(v.ok()) << n;
    EXPECT_EQ(v.error().code, Errc::truncated) << n;
  }
}

TEST(Record, AnyFlippedByteAfterTheLengthIsCaught) {
  Bytes b = make_record(1, "payload bytes");
  for (size_t i = 4; i < b.size(); ++i) {
    Bytes c = b;
    c[i] ^= 0x5a;
    auto v = decode_record(c.data(), c.size());
    ASSERT_FALSE(v.ok()) << i;
    EXPECT_EQ(v.error().code, Errc::corrupt) << i;
  }
}

TEST(Record, ImpossibleLengthIsCorrupt) {
  Bytes b = make_record(1, "x");
  b[0] = 3;  // shorter than a header
  b[1] = b[2] = b[3] = 0;
  auto v = decode_record(b.data(), b.size());
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.error().code, Errc::corrupt);
}

RC_GTEST_PROP(RecordProperty, RoundTripsAnyBody, (uint64_t seq, std::string body)) {
  Bytes b = make_record(seq, body);
  auto v = decode_record(b.data(), b.size());
  RC_ASSERT(v.ok());
  RC_ASSERT(v.value().header.seq == seq);
  RC_ASSERT(std::string(reinterpret_cast<const char*>(v.value().body), v.value().body_size) ==
            body);
}

RC_GTEST_PROP(RecordProperty, GarbageNeverDecodesAsARecord, (std::vector<uint8_t> junk)) {
  auto v = decode_record(junk.data(), junk.size());
  // Random bytes pass a 64-bit checksum with negligible probability.
  RC_ASSERT(!v.ok());
}

Entry sample_entry() {
  Entry e;
  e.index = LogIndex(12);
  e.term = Term(3);
  e.now_us = 99;
  QueueOptions o;
  o.ns = "ns";
  o.retry_limit = 5;
  e.effects.push_back(EffCreateQueue{QueueId(1), "orders", o});
  e.effects.push_back(EffConfigureQueue{QueueId(1), o});
  e.effects.push_back(EffCreatePartition{PartitionId(4), QueueId(1), "p"});
  EffAppend a;
  a.pid = PartitionId(4);
  a.queue = QueueId(1);
  a.base = Offset(10);
  a.count = 2;
  e.effects.push_back(a);
  CursorRow row;
  row.next = Offset(3);
  row.lease_expires_us = 77;
  row.settled = {{Offset(4), MsgState::acked}, {Offset(6), MsgState::dlq}};
  e.effects.push_back(EffCursor{"g", PartitionId(4), row});
  e.effects.push_back(EffGroupMeta{"g", QueueId(1), GroupMeta{SubscriptionMode::new_only, 5}});
  e.effects.push_back(EffDlq{QueueId(1), PartitionId(4), "g", Offset(6), "bad", 3});
  e.effects.push_back(EffKvPut{"ns", "k", KvRow{"{\"a\":1}", 7, 1000, 900}});
  e.effects.push_back(EffKvDelete{"ns", "k"});
  TimerRow timer{"p", 5000, "t-1", Hash128{1, 2}, make_uuid_v7(1, 2, 3), "{\"x\":2}", 2};
  e.effects.push_back(EffTimerPut{"orders", "key", timer});
  e.effects.push_back(EffTimerDelete{"orders", "key"});
  e.effects.push_back(EffTimerDlq{QueueId(1), "key", timer, "cannot seal"});
  e.effects.push_back(EffDlqRemove{QueueId(1), 9});
  e.effects.push_back(EffCursorDelete{"g", PartitionId(4)});
  e.effects.push_back(EffGroupMetaDelete{"g", QueueId(1)});
  e.effects.push_back(EffMessageDelete{QueueId(1), PartitionId(4), Offset(6)});
  e.effects.push_back(EffRequestOutcome{make_uuid_v7(4, 5, 6), 123456, "\x01outcome"});
  e.effects.push_back(EffTrace{
      make_uuid_v7(7, 7, 7), PartitionId(4), "t-9", "info", "{\"k\":1}", "g", "w1", {"a", "b"}});
  e.effects.push_back(EffDeleteQueue{QueueId(1)});
  return e;
}

TEST(EntryCodec, RoundTripOfEveryEffect) {
  Entry e = sample_entry();
  Bytes b = encode_entry(e);
  auto d = decode_entry(b.data(), b.size());
  ASSERT_TRUE(d.ok()) << d.error().message;
  EXPECT_EQ(d.value(), e);
}

TEST(EntryCodec, TruncatedBodyIsRejected) {
  Bytes b = encode_entry(sample_entry());
  for (size_t n = 0; n < b.size(); ++n) EXPECT_FALSE(decode_entry(b.data(), n).ok()) << n;
}

RC_GTEST_PROP(EntryProperty, FramesRoundTrip,
              (std::vector<std::string> payloads, std::string txn)) {
  EffAppend a;
  a.count = static_cast<uint32_t>(payloads.size());
  for (size_t i = 0; i < payloads.size(); ++i) {
    a.hashes.push_back(Hash128{i, i * 3});
    a.frames.push_back(MessageFrame{Uuid{}, txn + std::to_string(i), "", payloads[i]});
  }
  Bytes b = encode_frames(a);
  EffAppend d;
  d.count = a.count;
  RC_ASSERT(decode_frames(b.data(), b.size(), &d).ok());
  RC_ASSERT(d.frames == a.frames);
  RC_ASSERT(d.hashes == a.hashes);
}

}  // namespace
}  // namespace queen
