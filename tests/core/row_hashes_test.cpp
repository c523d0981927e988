// RowHashes: an append row's hashes read from the front of its message record, through a
// cache bounded in bytes; a record that does not name its row is refused, not trusted.
#include "core/qlog/row_hashes.h"

#include <gtest/gtest.h>
#include <span>
#include <string>
#include <vector>

#include "core/qlog/log.h"
#include "core/qlog/record.h"
#include "tests/core/mem_env.h"

namespace queen::testing {
namespace {

const LogId kLog(1);
const uint64_t kCacheBytes = 1 << 20;

std::vector<Hash128> hashes_for(uint64_t base, uint32_t count) {
  std::vector<Hash128> out;
  for (uint32_t i = 0; i < count; ++i) out.push_back(hash_of("t" + std::to_string(base + i)));
  return out;
}

std::vector<Hash128> as_vector(std::span<const Hash128> s) {
  return {s.begin(), s.end()};
}

// Appends a message record of `count` hashes (and a frame's worth of bytes after them) for
// partition 7 at `base` to the log file, and returns its row (hashes not inline).
AppendRow append_record(MemEnv& env, uint64_t base, uint32_t count) {
  Bytes& file = env.files[log_file_name(kLog, 1)];
  RecordHeader h;
  h.seq = base + 1;
  h.pid = 7;
  h.base_offset = base;
  h.count = count;
  h.kind = RecordKind::message;
  Bytes body;
  ByteWriter w(&body);
  std::vector<Hash128> hs = hashes_for(base, count);
  w.hashes(hs.data(), hs.size());
  w.str("frames");
  AppendRow row;
  row.base = Offset(base);
  row.count = count;
  RecordLocation where{.log = kLog, .file_no = 1, .pos = file.size()};
  where.len = static_cast<uint32_t>(encode_record(h, body.data(), body.size(), &file));
  row.set_where(where);
  return row;
}

TEST(RowHashes, ReadsARowsHashesFromItsRecordOnceThenFromTheCache) {
  MemEnv env;
  RowHashes rh(env, kCacheBytes);
  AppendRow a = append_record(env, 0, 3), b = append_record(env, 3, 2);
  auto got = rh.of(PartitionId(7), b);
  ASSERT_TRUE(got.ok()) << got.error().message;
  EXPECT_EQ(as_vector(got.value()), hashes_for(3, 2));
  ASSERT_TRUE(rh.of(PartitionId(7), b).ok());
  EXPECT_EQ(rh.stats().reads, 1u);
  EXPECT_EQ(rh.stats().cache_hits, 1u);
  PartitionState p;
  p.id = PartitionId(7);
  p.rows = {a, b};
  p.next_offset = Offset(5);
  auto found = rh.find(p, hash_of("t4"), Offset(0), Offset(5));
  ASSERT_TRUE(found.ok());
  EXPECT_EQ(found.value(), Offset(4));
  found = rh.find(p, hash_of("t4"), Offset(0), Offset(4));  // the range ends before it
  ASSERT_TRUE(found.ok());
  EXPECT_FALSE(found.value());
  auto held = rh.holds(p, Offset(1), hash_of("t1"));
  ASSERT_TRUE(held.ok());
  EXPECT_TRUE(held.value());
}

TEST(RowHashes, InlineHashesNeedNoRead) {
  MemEnv env;
  RowHashes rh(env, kCacheBytes);
  AppendRow row;
  row.base = Offset(10);
  row.count = 2;
  std::vector<Hash128> want = hashes_for(10, 2);
  row.hashes.assign(want.begin(), want.end());
  auto got = rh.of(PartitionId(7), row);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(as_vector(got.value()), want);
  EXPECT_EQ(rh.stats().reads, 0u);
}

TEST(RowHashes, TheCacheStaysWithinItsBound) {
  MemEnv env;
  const uint64_t bound = 4096;
  RowHashes rh(env, bound);
  std::vector<AppendRow> rows;
  for (uint64_t base = 0; base < 100 * 10; base += 10) rows.push_back(append_record(env, base, 10));
  for (const AppendRow& row : rows) {
    ASSERT_TRUE(rh.of(PartitionId(7), row).ok());
    EXPECT_LE(rh.cache_bytes(), bound);
  }
  EXPECT_GT(rh.cache_bytes(), 0u);
  // The newest rows are still cached; the oldest were pushed out.
  uint64_t reads = rh.stats().reads;
  ASSERT_TRUE(rh.of(PartitionId(7), rows.back()).ok());
  EXPECT_EQ(rh.stats().reads, reads);
  ASSERT_TRUE(rh.of(PartitionId(7), rows.front()).ok());
  EXPECT_EQ(rh.stats().reads, reads + 1);
}

// A bounded search looks at no more rows than it is given, from its start (find) or from its
// end down (find_last, which returns the last match).
TEST(RowHashes, BoundedSearchesLookAtNoMoreRowsThanAllowed) {
  MemEnv env;
  RowHashes rh(env, kCacheBytes);
  PartitionState p;
  p.id = PartitionId(7);
  for (uint64_t base = 0; base < 10 * 4; base += 4) p.rows.push_back(append_record(env, base, 4));
  p.next_offset = Offset(40);
  auto found = rh.find(p, hash_of("t13"), Offset(5), Offset(40), 2);  // rows at 4 and 8
  ASSERT_TRUE(found.ok());
  EXPECT_FALSE(found.value());
  EXPECT_EQ(rh.stats().reads, 2u);
  found = rh.find(p, hash_of("t13"), Offset(5), Offset(40), 3);
  ASSERT_TRUE(found.ok());
  EXPECT_EQ(found.value(), Offset(13));
  found = rh.find_last(p, hash_of("t13"), Offset(0), Offset(30), 4);  // rows at 28 down to 16
  ASSERT_TRUE(found.ok());
  EXPECT_FALSE(found.value());
  found = rh.find_last(p, hash_of("t13"), Offset(0), Offset(30), 5);
  ASSERT_TRUE(found.ok());
  EXPECT_EQ(found.value(), Offset(13));
  found = rh.find_last(p, hash_of("t13"), Offset(14), Offset(30), 10);  // below its range
  ASSERT_TRUE(found.ok());
  EXPECT_FALSE(found.value());
  found = rh.find_last(p, hash_of("t13"), Offset(0), Offset(13), 10);  // its range ends before
  ASSERT_TRUE(found.ok());
  EXPECT_FALSE(found.value());
}

TEST(RowHashes, ARecordThatDoesNotNameItsRowIsAnError) {
  MemEnv env;
  RowHashes rh(env, kCacheBytes);
  AppendRow row = append_record(env, 0, 3);
  AppendRow wrong = row;
  wrong.base = Offset(1);
  auto got = rh.of(PartitionId(7), wrong);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.error().code, Errc::corrupt);
  EXPECT_FALSE(rh.of(PartitionId(8), row).ok());
  AppendRow released = row;
  released.set_where(RecordLocation{});
  got = rh.of(PartitionId(7), released);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.error().code, Errc::not_found);
}

}  // namespace
}  // namespace queen::testing
