// Delta checkpoints: a delta writes only the rows appended since its base and, loaded on top
// of that base, gives back the whole store; a node writes chains of them, ends a chain with a
// full checkpoint, and a restart loads the newest chain.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include "core/state/checkpoint.h"
#include "tests/core/mem_env.h"

namespace queen::testing {
namespace {

// Builds a store by applying entries by hand, noting the appends as the node does.
struct StoreBuild {
  Store s;
  uint64_t index = 0;
  uint64_t hashes = 0;
  std::vector<std::pair<PartitionId, Offset>> appended;

  void apply(std::vector<Effect> effects, std::vector<RecordLocation> where = {}) {
    Entry e{LogIndex(++index), Term(1), static_cast<int64_t>(index) * 1000, std::move(effects)};
    QUEEN_ASSERT(s.apply(e, where).ok(), "the test's entries fit the store");
    for (const Effect& eff : e.effects)
      if (const auto* a = std::get_if<EffAppend>(&eff)) appended.emplace_back(a->pid, a->base);
  }
  std::vector<PartitionId> live() const {
    std::vector<PartitionId> out;
    for (const PartitionState& p : s.partitions()) out.push_back(p.id);
    return out;
  }
  void create_partition() {
    PartitionId id = s.next_partition_id();
    apply({EffCreatePartition{id, QueueId(1), "p" + std::to_string(id.value)}});
  }
  // A request outcome under one of 50 ids, kept for `keep_entries` more entries.
  void record_outcome(uint32_t arg, uint64_t keep_entries) {
    Uuid id;
    id.bytes[0] = static_cast<uint8_t>(arg % 50);
    int64_t keep_until_us = static_cast<int64_t>(index + 1 + keep_entries) * 1000;
    apply({EffRequestOutcome{id, keep_until_us, std::string(100, 'r') + std::to_string(arg)}});
  }
  // One step of a random history; `arg` picks the partition and the amounts.
  void step(int op, uint32_t arg) {
    if (op == 7) return record_outcome(arg, arg % 7);
    std::vector<PartitionId> ids = live();
    if (ids.empty() || op == 6) return create_partition();
    const PartitionState& p = *s.partition(ids[arg % ids.size()]);
    uint64_t next = p.next_offset.value;
    if (op <= 2) {
      EffAppend a{p.id, QueueId(1), p.next_offset, 1 + arg % 4, {}, {}};
      for (uint32_t i = 0; i < a.count; ++i) a.hashes.push_back(hash_of(std::to_string(hashes++)));
      std::vector<RecordLocation> where;  // an append with no location keeps an empty one
      if (arg % 5 != 0) where.push_back(
            RecordLocation{.log = LogId(1), .file_no = 1 + arg % 3, .len = 40, .pos = index * 64});
      return apply({std::move(a)}, where);
    }
    if (op == 3) {
      uint64_t log_start = p.log_start.value + arg % (next - p.log_start.value + 1);
      uint64_t rows_start = log_start - (arg / 7) % (log_start + 1);
      return apply({EffRetention{QueueId(1), p.id, Offset(log_start), Offset(rows_start)}});
    }
    if (op == 4 && next > 0) return apply({EffMessageDelete{QueueId(1), p.id, Offset(arg % next)}});
    if (op == 5) apply({EffPartitionDelete{QueueId(1), p.id}});
  }
};

RC_GTEST_PROP(CheckpointDelta, AChainOfDeltasLoadsToTheStoreItWasWrittenFrom, ()) {
  StoreBuild b;
  b.apply({EffCreateQueue{QueueId(1), "q", QueueOptions{}}});
  auto run = [&](size_t steps) {
    for (size_t i = 0; i < steps; ++i)
      b.step(*rc::gen::inRange(0, 8), *rc::gen::inRange<uint32_t>(0, 1000));
  };
  run(*rc::gen::inRange<size_t>(0, 30));
  Bytes full = encode_checkpoint(b.s, Term(1));
  std::vector<Bytes> files{full};
  const int deltas = *rc::gen::inRange(1, 4);
  for (int d = 0; d < deltas; ++d) {
    LogIndex base = b.s.applied();
    b.appended.clear();
    run(*rc::gen::inRange<size_t>(1, 30));
    if (b.s.applied() == base) b.create_partition();  // a delta holds at least one entry
    AppendsSince since = appends_since(b.appended);
    DeltaOf delta{base, &since};
    files.push_back(encode_checkpoint(b.s, Term(1), 0, 0, &delta));
  }
  std::optional<Checkpoint> loaded;
  for (const Bytes& f : files) {
    auto c = decode_checkpoint(f.data(), f.size(), loaded ? &loaded->store : nullptr);
    RC_ASSERT(c.ok());
    loaded = std::move(c.value());
  }
  RC_ASSERT(loaded->store == b.s);
}

// A delta names the base's request outcomes by id instead of writing them again; a delta of
// the earlier format, with every outcome in full, still loads.
TEST(CheckpointDelta, ADeltaNamesTheBasesRequestOutcomes) {
  StoreBuild b;
  for (uint32_t i = 0; i < 20; ++i) b.record_outcome(i, 100);
  Store base = b.s;
  b.appended.clear();
  b.record_outcome(7, 100);  // an id recorded again: a newer index, written in full
  b.record_outcome(33, 100);
  AppendsSince since = appends_since(b.appended);
  Bytes named, full;
  ByteWriter wn(&named), wf(&full);
  b.s.encode_delta(wn, since, base.applied());
  b.s.encode_delta(wf, since, LogIndex(0));
  EXPECT_LT(named.size() * 4, full.size());
  ByteReader rn(named), rf(full);
  auto from_named = Store::decode_delta(rn, Store(base), true);
  auto from_full = Store::decode_delta(rf, Store(base), false);
  ASSERT_TRUE(from_named.ok()) << from_named.error().message;
  ASSERT_TRUE(from_full.ok()) << from_full.error().message;
  EXPECT_TRUE(from_named.value() == b.s);
  EXPECT_TRUE(from_full.value() == b.s);
  ByteReader wrong(named);
  EXPECT_FALSE(Store::decode_delta(wrong, Store(), true).ok()) << "outcomes not in the base";
}

TEST(CheckpointDelta, ADeltaNeedsItsOwnBase) {
  StoreBuild b;
  b.apply({EffCreateQueue{QueueId(1), "q", QueueOptions{}}});
  b.create_partition();
  b.step(0, 3);
  Store base = b.s;
  b.appended.clear();
  b.step(0, 2);
  AppendsSince since = appends_since(b.appended);
  DeltaOf delta{base.applied(), &since};
  Bytes d = encode_checkpoint(b.s, Term(1), 0, 0, &delta);
  EXPECT_FALSE(decode_checkpoint(d.data(), d.size()).ok()) << "no base given";
  Store older;
  EXPECT_FALSE(decode_checkpoint(d.data(), d.size(), &older).ok()) << "another base";
  auto c = decode_checkpoint(d.data(), d.size(), &base);
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_TRUE(c.value().store == b.s);
  EXPECT_EQ(c.value().base, LogIndex(3));
}

// The checkpoint files of the data folder, oldest first, with their bases.
std::vector<std::pair<LogIndex, LogIndex>> chain_files(const MemEnv& env) {
  std::vector<std::pair<LogIndex, LogIndex>> out;
  for (const auto& [name, bytes] : env.files) {
    LogIndex at;
    if (!parse_checkpoint_file(name, &at)) continue;
    auto base = peek_checkpoint_base(bytes.data(), bytes.size());
    EXPECT_TRUE(base.has_value()) << name;
    out.emplace_back(at, base.value_or(LogIndex(0)));
  }
  return out;
}

NodeConfig frequent_checkpoints() {
  NodeConfig c;
  c.durable_every_ms = 100;
  c.durable_every_bytes = 1;  // a checkpoint after any write
  return c;
}

std::vector<std::string> ids(const std::string& prefix, int n) {
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i) out.push_back(prefix + std::to_string(i));
  return out;
}

TEST(CheckpointDelta, ADeltaWritesOnlyNewRowsAndARestartLoadsTheChain) {
  NodeConfig c = frequent_checkpoints();
  c.durable_every_ms = 10'000;  // no checkpoint while the rows go in
  Harness h(c);
  for (const std::string& id : ids("old-", 600)) h.push("q", "p", {id});  // 600 rows
  h.env.advance_ms(10'050);
  h.push("q", "p", {"new"});
  h.env.advance_ms(10'050);
  auto files = chain_files(h.env);
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(files[0].second, LogIndex(0)) << "the first is full";
  EXPECT_EQ(files[1].second, files[0].first) << "the next builds on it";
  auto size_of = [&](LogIndex at) { return h.env.files[checkpoint_file(at)].size(); };
  EXPECT_LT(size_of(files[1].first) * 8, size_of(files[0].first));
  Bytes before = encode_checkpoint(h.node().store(), Term(1));
  h.env.crash();
  h.restart();
  EXPECT_EQ(encode_checkpoint(h.node().store(), Term(1)), before);
  // The base's rows came back: a retry of an old id is a duplicate (its hash read from its
  // message record).
  PushReply r = h.push("q", "p", {"old-17", "newer"});
  ASSERT_EQ(r.results.size(), 2u);
  EXPECT_EQ(r.results[0].status, PushStatus::duplicate);
  EXPECT_EQ(r.results[1].status, PushStatus::queued);
}

TEST(CheckpointDelta, AChainEndsAtItsLimitAndOnlyTheTwoNewestChainsStay) {
  NodeConfig c = frequent_checkpoints();
  c.checkpoint_deltas_max = 2;
  Harness h(c);
  std::vector<std::vector<std::pair<LogIndex, LogIndex>>> seen;
  for (int i = 0; i < 5; ++i) {
    // A large first push, so that no delta weighs as much as a full checkpoint.
    h.push("q", "p",
           i == 0 ? ids("old-", 2000) : std::vector<std::string>{"m" + std::to_string(i)});
    h.env.advance_ms(150);
    seen.push_back(chain_files(h.env));
  }
  auto is_full = [](const std::pair<LogIndex, LogIndex>& f) { return f.second.value == 0; };
  // full, delta, delta: one chain of three files.
  ASSERT_EQ(seen[2].size(), 3u);
  EXPECT_TRUE(is_full(seen[2][0]) && !is_full(seen[2][1]) && !is_full(seen[2][2]));
  EXPECT_EQ(seen[2][2].second, seen[2][1].first);
  // The chain's limit ends it; the old chain stays while it holds the second newest.
  ASSERT_EQ(seen[3].size(), 4u);
  EXPECT_TRUE(is_full(seen[3][3]));
  // A delta on the new full one: the old chain goes.
  ASSERT_EQ(seen[4].size(), 2u);
  EXPECT_TRUE(is_full(seen[4][0]));
  EXPECT_EQ(seen[4][1].second, seen[4][0].first);
  h.env.crash();
  h.restart();
  EXPECT_EQ(h.pop("q", "g", 3000).messages.size(), 2004u);
}

// io writes a checkpoint guessed small in place and a large one in a copy of the process:
// before the first delta there is no guess; a delta is guessed from the one before, a full
// checkpoint from the chain it ends (its rows are there) and the rows since, each within a
// factor of two, and a full one never below its size.
TEST(CheckpointDelta, ACheckpointsSizeIsGuessedFromTheOnesBefore) {
  NodeConfig c = frequent_checkpoints();
  c.checkpoint_deltas_max = 2;
  c.durable_every_ms = 10'000;  // one checkpoint per round
  Harness h(c);
  std::map<LogIndex, uint64_t> sizes;  // every checkpoint written (older ones are removed)
  for (int i = 0; i < 5; ++i) {
    for (const std::string& id : ids("m" + std::to_string(i) + "-", 200)) h.push("q", "p", {id});
    h.env.advance_ms(10'050);
    for (const auto& [at, base] : chain_files(h.env))
      sizes[at] = h.env.files.at(checkpoint_file(at)).size();
  }
  ASSERT_EQ(sizes.size(), 5u);  // full, delta, delta, full, delta
  std::vector<uint64_t> size, guess;
  for (const auto& [at, bytes] : sizes) {
    size.push_back(bytes);
    guess.push_back(h.env.expected_bytes.at(checkpoint_file(at)));
  }
  EXPECT_EQ(guess[0], UINT64_MAX) << "the first full one: nothing before it";
  EXPECT_EQ(guess[1], UINT64_MAX) << "the first delta: no delta before it";
  for (size_t i : {2u, 4u}) {
    EXPECT_GE(guess[i] * 2, size[i]) << i;
    EXPECT_LE(guess[i], size[i] * 2) << i;
  }
  EXPECT_GE(guess[3], size[3]);
  EXPECT_LE(guess[3], size[3] * 2);
}

// Rows of the store's tables are encoded one at a time, far slower per byte than runs of
// hashes: a delta over many partitions is guessed as a large piece of work, not by its bytes.
TEST(CheckpointDelta, ManyPartitionsMakeACheckpointGuessedLarge) {
  NodeConfig c = frequent_checkpoints();
  Harness h(c);
  for (int i = 0; i < 3; ++i) {
    for (int p = 0; p < 1000; ++p) h.push("q", "p" + std::to_string(p), {"m" + std::to_string(i)});
    h.env.advance_ms(150);
  }
  auto files = chain_files(h.env);
  ASSERT_EQ(files.size(), 3u);  // full, delta, delta
  std::string newest = checkpoint_file(files[2].first);
  EXPECT_LT(h.env.files.at(newest).size(), 200'000u);
  EXPECT_GE(h.env.expected_bytes.at(newest), 1000u << 10);
}

// A request outcome (one push's answer, kept under its request id) is a cheap row beside a
// partition's: as many outcomes weigh less than half as much in the guess, so a cluster
// node's outcomes alone do not send its checkpoints to a copy of the process.
TEST(CheckpointDelta, RequestOutcomesWeighLessThanPartitionsInTheGuess) {
  NodeConfig c = frequent_checkpoints();
  Harness h(c);
  for (int i = 0; i < 3; ++i) {
    for (int k = 0; k < 1000; ++k) {
      PushCmd push = h.push_cmd("q", "p", {"m" + std::to_string(i * 1000 + k)});
      RequestId id{make_uuid_v7(1, 1, static_cast<uint64_t>(i * 1000 + k + 1))};
      h.send(std::move(push), 30000, id);
      h.env.run();
    }
    h.env.advance_ms(150);
  }
  auto files = chain_files(h.env);
  ASSERT_FALSE(files.empty());
  ASSERT_NE(files.back().second, LogIndex(0)) << "the newest is a delta";
  uint64_t outcomes = h.node().store().request_outcomes().size();
  ASSERT_GE(outcomes, 3000u);
  std::string newest = checkpoint_file(files.back().first);
  EXPECT_LT(h.env.expected_bytes.at(newest), outcomes * 512);
  EXPECT_GE(h.env.expected_bytes.at(newest), h.env.files.at(newest).size());
}

}  // namespace
}  // namespace queen::testing
