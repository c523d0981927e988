// Snapshots (core/node/snapshot.h): the manifest and chunk codecs, the cut of a log file at
// the snapshot's entry, and the install a restart finishes or drops depending on whether
// the manifest made it to disk. The transfer itself runs in cluster_test and the simulator.
#include <gtest/gtest.h>

#include "core/node/snapshot.h"
#include "core/qlog/record.h"
#include "tests/core/mem_env.h"

namespace queen::testing {
namespace {

SnapshotManifest two_files() {
  SnapshotManifest m;
  m.index = LogIndex(40);
  m.term = Term(3);
  m.files = {FileInfo{"store/ckpt.00000000000000000040", 5}, FileInfo{"qlog/q1/r00000001.qlog", 7}};
  return m;
}

Bytes text(const std::string& s) {
  return Bytes(s.begin(), s.end());
}

TEST(Snapshot, ManifestRoundTripsAndADamagedOneIsRefused) {
  SnapshotManifest m = two_files();
  Bytes b = encode_manifest(m);
  auto d = decode_manifest(b.data(), b.size());
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d.value(), m);
  EXPECT_EQ(m.total_bytes(), 12u);
  for (size_t n = 0; n < b.size(); ++n) EXPECT_FALSE(decode_manifest(b.data(), n).ok()) << n;
  b[10] ^= 1;
  EXPECT_FALSE(decode_manifest(b.data(), b.size()).ok());
  m.files.push_back(FileInfo{"raft/hs.0", 1});  // only log and checkpoint files may ship
  b = encode_manifest(m);
  EXPECT_FALSE(decode_manifest(b.data(), b.size()).ok());
}

TEST(Snapshot, ALogFileIsCutBeforeItsFirstRecordOfALaterEntry) {
  Bytes file;
  std::vector<size_t> ends;
  for (uint64_t seq : {38, 39, 40, 40, 41, 42}) {
    RecordHeader h;
    h.seq = seq;
    Bytes body(10, static_cast<uint8_t>(seq));
    encode_record(h, body.data(), body.size(), &file);
    ends.push_back(file.size());
  }
  MemEnv env;
  auto cut = [&](uint64_t index) {
    env.files["qlog/f"] = file;
    auto c = snapshot_cut(env, "qlog/f", file.size(), LogIndex(index));
    EXPECT_TRUE(c.ok());
    return c.ok() ? c.value() : UINT64_MAX;
  };
  EXPECT_EQ(cut(40), ends[3]);
  EXPECT_EQ(cut(37), 0u);
  EXPECT_EQ(cut(99), file.size());
  file[ends[1] + 9] ^= 1;  // a damaged record ends what can be shipped
  EXPECT_EQ(cut(40), ends[1]);
  env.files.erase("qlog/f");  // a read that fails is an error, not a cut
  EXPECT_FALSE(snapshot_cut(env, "qlog/f", file.size(), LogIndex(40)).ok());
}

// A log file is read a window at a time to find its cut, never whole.
TEST(Snapshot, ALogFileIsCutReadingAWindowAtATime) {
  Bytes file;
  size_t end_of_500 = 0;
  for (uint64_t seq = 1; seq <= 1000; ++seq) {
    RecordHeader h;
    h.seq = seq;
    Bytes body(200, static_cast<uint8_t>(seq));
    encode_record(h, body.data(), body.size(), &file);
    if (seq == 500) end_of_500 = file.size();
  }
  MemEnv env;
  env.files["qlog/f"] = file;
  auto c = snapshot_cut(env, "qlog/f", file.size(), LogIndex(500), 4096);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c.value(), end_of_500);
  EXPECT_LE(env.read_bytes_max, 4096u);
  EXPECT_GT(file.size(), 50 * 4096u);
}

TEST(Snapshot, ChunksSpanFilesInManifestOrder) {
  SnapshotManifest m = two_files();
  EXPECT_EQ(chunk_count(m, 4), 3u);
  auto parts = chunk_parts(m, 4, 4);  // the checkpoint's last byte, then the log's first 3
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[0].file, 0u);
  EXPECT_EQ(parts[0].pos, 4u);
  EXPECT_EQ(parts[0].len, 1u);
  EXPECT_EQ(parts[1].file, 1u);
  EXPECT_EQ(parts[1].pos, 0u);
  EXPECT_EQ(parts[1].len, 3u);
  parts = chunk_parts(m, 8, 4);  // clipped at the end
  ASSERT_EQ(parts.size(), 1u);
  EXPECT_EQ(parts[0].len, 4u);
  uint64_t seq = 0, next = 0;
  Bytes payload;
  ASSERT_TRUE(decode_chunk(encode_chunk(9, text("abc")), &seq, &payload));
  EXPECT_EQ(seq, 9u);
  EXPECT_EQ(payload, text("abc"));
  ASSERT_TRUE(decode_ack(encode_ack(4), &next));
  EXPECT_EQ(next, 4u);
}

// A follower's folder with its own log and checkpoint, and a snapshot staged under snap/.
MemEnv staged_folder(bool with_manifest) {
  MemEnv env;
  env.files["raft/hs.0"] = text("hs");
  env.files["qlog/q1/r00000001.qlog"] = text("old-1");
  env.files["qlog/q2/r00000003.qlog"] = text("old-2");
  env.files["store/ckpt.00000000000000000007"] = text("old-ckpt");
  env.files["snap/store/ckpt.00000000000000000040"] = text("ckpt!");
  env.files["snap/qlog/q1/r00000001.qlog"] = text("new-log");
  if (with_manifest) env.files[kSnapshotManifestFile] = encode_manifest(two_files());
  return env;
}

TEST(Snapshot, ARestartFinishesAnInstallItsManifestDecided) {
  MemEnv env = staged_folder(true);
  auto files = settle_snapshot(env, env.list());
  ASSERT_TRUE(files.ok());
  std::map<std::string, Bytes> want{{"raft/hs.0", text("hs")},
                                    {"qlog/q1/r00000001.qlog", text("new-log")},
                                    {"store/ckpt.00000000000000000040", text("ckpt!")}};
  EXPECT_EQ(env.files, want);
  EXPECT_EQ(files.value().size(), 3u);
  // A crash midway (one file already moved) is finished the same way.
  env = staged_folder(true);
  ASSERT_TRUE(env.rename("snap/qlog/q1/r00000001.qlog", "qlog/q1/r00000001.qlog").ok());
  ASSERT_TRUE(settle_snapshot(env, env.list()).ok());
  EXPECT_EQ(env.files, want);
}

TEST(Snapshot, WithoutADurableManifestTheOldLogStands) {
  for (bool torn : {false, true}) {
    MemEnv env = staged_folder(torn);
    if (torn) env.files[kSnapshotManifestFile].pop_back();
    ASSERT_TRUE(settle_snapshot(env, env.list()).ok());
    EXPECT_EQ(env.files.size(), 4u) << torn;
    EXPECT_EQ(env.files["qlog/q1/r00000001.qlog"], text("old-1"));
    EXPECT_FALSE(env.files.contains("snap/qlog/q1/r00000001.qlog"));
  }
}

}  // namespace
}  // namespace queen::testing
