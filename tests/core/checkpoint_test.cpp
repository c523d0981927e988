// Store checkpoints: the whole store round-trips through a checkpoint, a restart replays only
// the entries after the newest durable one, a damaged one is never trusted, and a single node
// reclaims log files that hold nothing past its checkpoints.
#include <gtest/gtest.h>
#include <xxhash.h>

#include "core/qlog/log.h"
#include "core/state/checkpoint.h"
#include "core/state/file_window.h"
#include "tests/core/mem_env.h"

namespace queen::testing {
namespace {

KvOp kv_put(const std::string& key, const std::string& value, int64_t ttl_s) {
  KvOp op;
  op.op = KvOpKind::put;
  op.ns = "orders";
  op.key = key;
  op.value = value;
  op.forever = ttl_s == 0;
  op.ttl_s = ttl_s;
  return op;
}

TimerOp timer(const std::string& key, int64_t delay_ms) {
  TimerOp op;
  op.queue = "reminders";
  op.timer_key = key;
  op.delay_ms = delay_ms;
  op.txn = "fire-" + key;
  op.txn_hash = hash_of(op.txn);
  op.message_id = make_uuid_v7(1, 2, std::hash<std::string>{}(key));
  op.payload = "{\"k\":1}";
  return op;
}

// A store with a row in every table: queues, partitions, rows, deleted and dead letters,
// cursors, subscriptions, KV with and without expiry, timers, traces, request outcomes.
void fill(Harness& h) {
  h.push("q", "p", {"a", "b", "c", "d"});
  h.push("r", "Default", {"x"});
  PopReply r = h.pop("q", "g", 2);
  h.ack(r.messages[0], "g", AckStatus::completed, r.lease_id);
  h.ack(r.messages[1], "g", AckStatus::dlq, r.lease_id);
  h.pop("r", "h", 1);
  h.call<KvReply>(KvCmd{{kv_put("k1", "1", 0), kv_put("k2", "\"two\"", 600)}});
  h.call<TimerReply>(TimerCmd{{timer("t1", 60000)}});
  const PartitionState* p = h.node().store().partition("q", "p");
  h.call<MessageDeleteReply>(MessageDeleteCmd{p->id, "d", hash_of("d")});
  TraceRecordCmd t;
  t.partition_id = p->id;
  t.transaction_id = "c";
  t.txn_hash = hash_of("c");
  t.trace_id = make_uuid_v7(5, 6, 7);
  t.names = {"order-1"};
  h.call<TraceReply>(t);
}

TEST(StoreCheckpoint, EveryTableRoundTrips) {
  Harness h;
  fill(h);
  const Store& s = h.node().store();
  ASSERT_FALSE(s.dlq().empty());
  ASSERT_FALSE(s.kv_expiries().empty());
  ASSERT_FALSE(s.timers().empty());
  ASSERT_FALSE(s.traces().empty());
  ASSERT_FALSE(s.partition("q", "p")->deleted.empty());
  Bytes b = encode_checkpoint(s, Term(3));
  auto c = decode_checkpoint(b.data(), b.size());
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c.value().term, Term(3));
  EXPECT_TRUE(c.value().store == s);
  // A size hint, too small or too large, changes no byte.
  EXPECT_EQ(encode_checkpoint(s, Term(3), 0, b.size() / 2), b);
  EXPECT_EQ(encode_checkpoint(s, Term(3), 0, b.size() * 4), b);
}

// A start files each partition under its name and in its queue's list as it decodes it:
// with two queues' partitions made in turn, every one is found by its name afterwards, and
// each queue lists its own in id order.
TEST(StoreCheckpoint, ADecodedStoreFindsEveryPartitionByItsName) {
  Harness h;
  constexpr int kEach = 40;
  for (int i = 0; i < kEach; ++i) {
    h.push("a", "p" + std::to_string(i), {"a" + std::to_string(i)});
    h.push("b", "p" + std::to_string(i), {"b" + std::to_string(i)});
  }
  const Store& s = h.node().store();
  Bytes b = encode_checkpoint(s, Term(1));
  auto c = decode_checkpoint(b.data(), b.size());
  ASSERT_TRUE(c.ok()) << c.error().message;
  const Store& d = c.value().store;
  for (const char* queue : {"a", "b"}) {
    for (int i = 0; i < kEach; ++i) {
      std::string name = "p" + std::to_string(i);
      const PartitionState* was = s.partition(queue, name);
      const PartitionState* is = d.partition(queue, name);
      ASSERT_TRUE(was && is) << queue << "/" << name;
      EXPECT_EQ(is->id, was->id);
    }
    EXPECT_EQ(d.partition(queue, "p" + std::to_string(kEach)), nullptr);
    const std::vector<PartitionId>& ids = d.queue(std::string(queue))->partitions;
    EXPECT_EQ(ids.size(), size_t{kEach});
    EXPECT_TRUE(std::is_sorted(ids.begin(), ids.end()));
  }
}

TEST(StoreCheckpoint, AnyChangedByteIsRefused) {
  Harness h;
  fill(h);
  Bytes b = encode_checkpoint(h.node().store(), Term(1));
  for (size_t at : {size_t{0}, size_t{20}, b.size() / 2, b.size() - 1}) {
    Bytes bad = b;
    bad[at] ^= 0x40;
    EXPECT_FALSE(decode_checkpoint(bad.data(), bad.size()).ok()) << "byte " << at;
  }
  EXPECT_FALSE(decode_checkpoint(b.data(), b.size() - 3).ok());
}

// Records the pieces a streamed checkpoint arrives in.
struct PieceSink final : ByteSink {
  Bytes all;
  size_t pieces = 0;
  void put(const uint8_t* data, size_t size) override {
    all.insert(all.end(), data, data + size);
    ++pieces;
  }
};

TEST(StoreCheckpoint, AStreamedCheckpointArrivesInPiecesAndReadsBack) {
  Harness h;
  fill(h);
  std::string value = "\"" + std::string(60000, 'v') + "\"";
  for (int i = 0; i < 24; ++i)  // past a 1 MiB piece
    h.call<KvReply>(KvCmd{{kv_put("big" + std::to_string(i), value, 0)}});
  const Store& s = h.node().store();
  PieceSink sink;
  write_checkpoint(s, Term(2), 9, sink);
  EXPECT_GE(sink.pieces, 3u);  // two pieces of the body at least, then the checksum
  EXPECT_EQ(sink.all, encode_checkpoint(s, Term(2), 9));
  auto c = decode_checkpoint(sink.all.data(), sink.all.size());
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_TRUE(c.value().store == s);
  EXPECT_EQ(c.value().applied_chain, 9u);
}

// A restart loads a checkpoint from its file a window at a time, summing each window as it
// decodes it, so it never holds the whole file beside the store and reads it once; a byte
// changed past the first window still fails the checksum and the file is skipped.
TEST(StoreCheckpoint, ALargeCheckpointLoadsFromItsFileAWindowAtATime) {
  Harness h;
  fill(h);
  std::string value = "\"" + std::string(60000, 'v') + "\"";
  for (int i = 0; i < 60; ++i)  // 3.6 MB: past three windows
    h.call<KvReply>(KvCmd{{kv_put("big" + std::to_string(i), value, 0)}});
  const Store& s = h.node().store();
  Bytes b = encode_checkpoint(s, Term(2), 9);
  ASSERT_GT(b.size(), 3 * FileWindow::kWindowBytes);
  MemEnv env;
  const std::string name = checkpoint_file(s.applied());
  env.files[name] = b;
  auto loaded = load_checkpoint(env, env.list_files().value());
  ASSERT_TRUE(loaded.ok()) << loaded.error().message;
  ASSERT_TRUE(loaded.value().newest.has_value());
  EXPECT_TRUE(loaded.value().newest->store == s);
  EXPECT_EQ(loaded.value().newest->applied_chain, 9u);
  EXPECT_LE(env.read_bytes_max, FileWindow::kWindowBytes);
  // Once, and the few values that cross a window's end again with the next window.
  EXPECT_LT(env.store_bytes_read, b.size() + b.size() / 4) << "read more than once";

  env.files[name][b.size() / 2] ^= 0x10;
  loaded = load_checkpoint(env, env.list_files().value());
  ASSERT_TRUE(loaded.ok());
  EXPECT_FALSE(loaded.value().newest.has_value());
  EXPECT_EQ(loaded.value().stale, std::vector<std::string>{name});
}

// The body is decoded before its checksum is known, so a damaged checkpoint file reaches the
// decoder: whichever byte is changed, and however, the file is skipped, and nothing crashes.
TEST(StoreCheckpoint, AFileDamagedAnywhereIsSkippedWhole) {
  Harness h;
  fill(h);
  const Store& s = h.node().store();
  Bytes b = encode_checkpoint(s, Term(2), 9);
  const std::string name = checkpoint_file(s.applied());
  for (size_t at = 0; at < b.size(); ++at) {
    for (uint8_t flip : {uint8_t{0x01}, uint8_t{0x80}, uint8_t{0xff}}) {
      MemEnv env;
      env.files[name] = b;
      env.files[name][at] ^= flip;
      auto loaded = load_checkpoint(env, env.list_files().value());
      ASSERT_TRUE(loaded.ok()) << "byte " << at;
      ASSERT_FALSE(loaded.value().newest.has_value()) << "byte " << at << " flip " << int{flip};
      ASSERT_EQ(loaded.value().stale, std::vector<std::string>{name});
    }
  }
}

// Data folders written before format 3 hold checkpoints with the body's length first.
TEST(StoreCheckpoint, AFormatTwoCheckpointStillLoads) {
  Harness h;
  fill(h);
  Bytes three = encode_checkpoint(h.node().store(), Term(4));
  const size_t header = 36;
  Bytes body(three.begin() + header, three.end() - 16);
  Bytes two(three.begin(), three.begin() + header);
  uint32_t format = 2;
  std::memcpy(two.data() + 8, &format, 4);
  uint64_t length = body.size();
  two.insert(two.end(), reinterpret_cast<uint8_t*>(&length),
             reinterpret_cast<uint8_t*>(&length) + 8);
  two.insert(two.end(), body.begin(), body.end());
  uint64_t sum = XXH3_64bits(two.data(), two.size());
  two.insert(two.end(), reinterpret_cast<uint8_t*>(&sum), reinterpret_cast<uint8_t*>(&sum) + 8);
  auto c = decode_checkpoint(two.data(), two.size());
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c.value().term, Term(4));
  EXPECT_TRUE(c.value().store == h.node().store());
}

std::vector<std::string> checkpoints(const MemEnv& env) {
  std::vector<std::string> out;
  for (const auto& [name, bytes] : env.files) {
    LogIndex at;
    if (parse_checkpoint_file(name, &at)) out.push_back(name);
  }
  return out;
}

NodeConfig small_logs() {
  NodeConfig c;
  c.durable_every_ms = 100;
  c.durable_every_bytes = 1;  // a checkpoint after any write
  c.segment_bytes = 4096;
  return c;
}

TEST(StoreCheckpoint, RestartReplaysOnlyTheEntriesAfterTheNewest) {
  Harness h(small_logs());
  fill(h);
  h.env.advance_ms(150);
  ASSERT_GE(h.node().stats().store_checkpoints, 1u);
  LogIndex at = h.node().store().applied();
  h.push("q", "p", {"e"});
  PopReply r = h.pop("q", "g", 1);
  ASSERT_EQ(r.messages.size(), 1u);
  Bytes before = encode_checkpoint(h.node().store(), Term(1));
  uint64_t later = h.node().store().applied().value - at.value;
  h.env.crash();
  h.restart();
  EXPECT_EQ(h.node().stats().recovered_entries, later);
  EXPECT_EQ(encode_checkpoint(h.node().store(), Term(1)), before);
  auto msgs = h.node().read_messages(h.node().store().partition("q", "p")->id, Offset(0), 10);
  ASSERT_TRUE(msgs.ok());
  EXPECT_EQ(msgs.value().back().transaction_id, "e");
}

// A graceful stop writes a full checkpoint holding everything applied (where a periodic one
// would be a delta on the newest), so the next start replays no entry, decodes one file and
// finds the same store; with nothing new since, it writes none.
TEST(StoreCheckpoint, AGracefulStopLeavesNothingToReplay) {
  Harness h(small_logs());
  fill(h);
  h.env.advance_ms(150);  // a periodic checkpoint: the next periodic one is a delta on it
  ASSERT_GE(h.node().stats().store_checkpoints, 1u);
  for (int i = 0; i < 20; ++i) h.push("q", "p" + std::to_string(i % 3), {"s" + std::to_string(i)});
  const uint64_t written = h.node().stats().store_checkpoints;
  bool current = false;
  for (int i = 0; i < 5 && !current; ++i) {
    h.env.perform(h.node().checkpoint_before_stop(&current));
    h.env.run();
  }
  ASSERT_TRUE(current);
  EXPECT_EQ(h.node().stats().store_checkpoints, written + 1);
  const std::string newest = checkpoints(h.env).back();
  const Bytes& file = h.env.files.at(newest);
  EXPECT_EQ(peek_checkpoint_base(file.data(), file.size()), LogIndex(0)) << "a full one";
  const size_t files = checkpoints(h.env).size();
  h.env.perform(h.node().checkpoint_before_stop(&current));
  EXPECT_TRUE(current);
  EXPECT_EQ(checkpoints(h.env).size(), files) << "nothing new: no checkpoint";
  Bytes before = encode_checkpoint(h.node().store(), Term(1));
  h.restart();
  EXPECT_EQ(h.node().stats().recovered_entries, 0u);
  EXPECT_EQ(encode_checkpoint(h.node().store(), Term(1)), before);
}

// The stop's checkpoint holds what was applied when the stop began: entries applied after
// (a follower applying its leader's) do not make it write another, and are replayed at start.
TEST(StoreCheckpoint, AGracefulStopDoesNotChaseEntriesAppliedAfterIt) {
  Harness h;
  fill(h);
  const uint64_t written = h.node().stats().store_checkpoints;
  bool current = false;
  h.env.hold_syncs = true;  // the checkpoint is written, not yet durable
  h.env.perform(h.node().checkpoint_before_stop(&current));
  EXPECT_FALSE(current);
  h.env.hold_syncs = false;
  h.push("q", "p", {"late"});  // applied after the stop began
  for (int i = 0; i < 5 && !current; ++i) {
    h.env.perform(h.node().checkpoint_before_stop(&current));
    h.env.run();
  }
  ASSERT_TRUE(current);
  EXPECT_EQ(h.node().stats().store_checkpoints, written + 1) << "one checkpoint, not two";
  h.restart();
  EXPECT_EQ(h.node().stats().recovered_entries, 1u) << "the late push";
}

TEST(StoreCheckpoint, ATornNewestFallsBackToTheOlderAndKeepsEverything) {
  Harness h(small_logs());
  fill(h);
  h.env.advance_ms(150);
  h.push("q", "p", {"e"});
  h.env.advance_ms(150);
  std::vector<std::string> files = checkpoints(h.env);
  ASSERT_EQ(files.size(), 2u);
  Bytes before = encode_checkpoint(h.node().store(), Term(1));
  h.env.files[files.back()].resize(h.env.files[files.back()].size() / 2);
  h.restart();
  EXPECT_EQ(encode_checkpoint(h.node().store(), Term(1)), before);
  EXPECT_EQ(checkpoints(h.env).size(), 1u);  // the damaged one is gone
}

TEST(StoreCheckpoint, ADamagedCheckpointWithoutTheLogAfterItRefusesToStart) {
  Harness h(small_logs());
  fill(h);
  h.env.advance_ms(150);
  std::vector<std::string> files = checkpoints(h.env);
  ASSERT_EQ(files.size(), 1u);
  // The log before it is gone (as if reclaimed), and the checkpoint rots.
  for (auto it = h.env.files.begin(); it != h.env.files.end();)
    it = it->first.starts_with("qlog/") ? h.env.files.erase(it) : std::next(it);
  h.env.files[files[0]][40] ^= 1;
  Node n(h.env, small_logs());
  auto st = n.start(h.env.list());  // refused: nothing to carry out
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("lacks entry 1"), std::string::npos) << st.error().message;
}

TEST(StoreCheckpoint, ASingleNodeReclaimsLogFilesBelowItsCheckpoints) {
  Harness h(small_logs());
  h.push("q", "p", {"a"});
  // Many engine checkpoints: entries of the system log, which holds no payload.
  for (int i = 0; i < 60; ++i) {
    PopReply r = h.pop("q", "g" + std::to_string(i), 1);
    ASSERT_EQ(r.messages.size(), 1u);
    h.ack(r.messages[0], "g" + std::to_string(i), AckStatus::completed, r.lease_id);
    h.env.advance_ms(40);
  }
  EXPECT_GT(h.node().stats().log_files_reclaimed, 0u);
  EXPECT_FALSE(h.env.files.contains(log_file_name(LogId(0), 1)));
  // The queue's payload stays where its row points, and a restart brings everything back.
  EXPECT_TRUE(h.env.files.contains(log_file_name(LogId(1), 1)));
  Bytes before = encode_checkpoint(h.node().store(), Term(1));
  h.env.crash();
  h.restart();
  EXPECT_EQ(encode_checkpoint(h.node().store(), Term(1)), before);
  PopReply again = h.pop("q", "late", 1);
  ASSERT_EQ(again.messages.size(), 1u);
  EXPECT_EQ(again.messages[0].transaction_id, "a");
}

// A deleted queue's log goes whole, its last file included, and so does the system log's
// once idle; a later write to either starts a new file, and a restart reads it all back.
TEST(StoreCheckpoint, AnIdleLogIsReclaimedToItsLastFile) {
  Harness h(small_logs());
  h.push("gone", "p", {"a", "b"});  // queue 1: log q1, one file
  h.push("kept", "p", {"c"});       // queue 2
  ASSERT_TRUE(h.env.files.contains(log_file_name(LogId(1), 1)));
  h.call<GroupChangeReply>(QueueDeleteCmd{"gone"});
  for (int i = 0; i < 8; ++i) {
    h.push("kept", "p", {"k" + std::to_string(i)});
    h.env.advance_ms(40);
  }
  std::map<LogId, size_t> files = log_files(h.env);
  EXPECT_EQ(files[LogId(1)], 0u) << "the deleted queue's log is gone";
  EXPECT_EQ(files[LogId(0)], 0u) << "the system log holds nothing the store needs";
  h.push("gone", "p", {"again"});  // queue 3 now, and an entry for the system log
  h.call<GroupChangeReply>(QueueDeleteCmd{"kept"});
  h.env.crash();
  h.restart();
  EXPECT_EQ(h.node().store().queue("kept"), nullptr);
  PopReply r = h.pop("gone", "g", 10);
  ASSERT_EQ(r.messages.size(), 1u);
  EXPECT_EQ(r.messages[0].transaction_id, "again");
}

}  // namespace
}  // namespace queen::testing
