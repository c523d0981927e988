// Dedup by transactionId: unit tests of the hash ring and property tests of the planner
// against a plain model of "first offset per transactionId within the window".
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>
#include <algorithm>
#include <cstring>
#include <map>
#include <tuple>
#include <vector>

#include "core/planner/dedup.h"
#include "tests/core/mem_env.h"

namespace queen::testing {
namespace {

// The offsets `ring` names for `h` whose stored hash, in `truth`, is h.
std::optional<Offset> find_in(const HashRing& ring, const Hash128& h,
                              const std::vector<Hash128>& truth, uint64_t* named = nullptr) {
  return ring.find(h, [&](Offset o) {
    if (named) ++*named;
    return o.value < truth.size() && truth[o.value] == h;
  });
}

// How many candidates the ring names for 100k hashes it never held (none may be found).
uint64_t candidates_for_absent(const HashRing& ring, const std::vector<Hash128>& truth) {
  uint64_t named = 0;
  for (int i = 0; i < 100000; ++i)
    EXPECT_FALSE(find_in(ring, hash_of("out" + std::to_string(i)), truth, &named)) << i;
  return named;
}

TEST(HashRing, FindsEveryHashWithinTheWindowAtItsOffset) {
  HashRing ring;
  std::vector<Hash128> truth;
  for (uint64_t i = 0; i < 20000; ++i) {
    truth.push_back(hash_of(std::to_string(i)));
    ring.insert(truth.back(), Offset(i), 1, 1e9);
  }
  for (uint64_t i = 0; i < 20000; ++i) ASSERT_EQ(find_in(ring, truth[i], truth), Offset(i)) << i;
}

TEST(HashRing, AbsentHashesAreAnsweredAlmostWithoutCandidates) {
  HashRing ring;
  std::vector<Hash128> truth;
  for (uint64_t i = 0; i < 100000; ++i) {
    truth.push_back(hash_of("in" + std::to_string(i)));
    ring.insert(truth.back(), Offset(i), 1, 1e9);
  }
  // The generations' tags are 16 bits or more here: a false candidate in about 6 of 2^16.
  EXPECT_LT(candidates_for_absent(ring, truth), 100u);
}

TEST(HashRing, GenerationsCloseAtAQuarterOfTheWindowAndAreDroppedBelowItsFloor) {
  HashRing ring;
  std::vector<Hash128> truth;
  const int64_t window_us = 4'000'000;
  for (uint64_t i = 0; i < 8; ++i) {  // one hash per 0.6 s: a generation spans 1 s
    truth.push_back(hash_of(std::to_string(i)));
    ring.insert(truth.back(), Offset(i), int64_t(i) * 600'000, window_us);
  }
  EXPECT_EQ(ring.generations(), 4u);  // {0,1} {2,3} {4,5} {6,7}
  ring.drop_below(1'800'000);         // {0,1}'s newest stamp is 0.6 s
  EXPECT_EQ(ring.generations(), 3u);
  EXPECT_FALSE(find_in(ring, truth[1], truth));
  EXPECT_EQ(find_in(ring, truth[2], truth), Offset(2));
  EXPECT_EQ(find_in(ring, truth[7], truth), Offset(7));
}

// Offsets planned again lower (after a leader change) land in the open generation while
// they are within its base's slack; ones too far from it open a new generation.
TEST(HashRing, OffsetsFarBelowAGenerationsBaseOpenANewOne) {
  HashRing ring;
  uint64_t high = (uint64_t{1} << 31) + 5;  // more than the slack above offset 3
  Hash128 a = hash_of("a"), b = hash_of("b");
  ring.insert(a, Offset(high), 1, 1e9);
  ring.insert(b, Offset(3), 1, 1e9);
  EXPECT_EQ(ring.generations(), 2u);
  EXPECT_EQ(ring.find(a, [&](Offset o) { return o == Offset(high); }), Offset(high));
  EXPECT_EQ(ring.find(b, [&](Offset o) { return o == Offset(3); }), Offset(3));
}

TEST(HashRing, TheLowestMatchingOffsetIsTheOriginal) {
  HashRing ring;
  Hash128 a = hash_of("a");
  for (uint64_t o : {9, 4, 7}) ring.insert(a, Offset(o), 1, 1e9);
  EXPECT_EQ(ring.find(a, [](Offset) { return true; }), Offset(4));
  EXPECT_EQ(ring.find(a, [](Offset o) { return o != Offset(4); }), Offset(7));
}

// Sealed generations merge while alike, so a ring of many hashes keeps a few generations of
// about 5.3 bytes a hash, where open tables take 11-21, and their shorter tags still name a
// false candidate for fewer than 1% of absent hashes.
TEST(HashRing, SealedGenerationsMergeAndTakeUnderSixBytesAHash) {
  HashRing ring;
  std::vector<Hash128> truth;
  const uint64_t n = 1'000'000;
  for (uint64_t i = 0; i < n; ++i) {
    truth.push_back(hash_of("m" + std::to_string(i)));
    ring.insert(truth.back(), Offset(i), 1, 1e9);
  }
  EXPECT_LE(ring.generations(), 16u);
  EXPECT_LT(static_cast<double>(ring.bytes()) / n, 6.0);
  for (uint64_t i = 0; i < n; i += 997) ASSERT_EQ(find_in(ring, truth[i], truth), Offset(i)) << i;
  EXPECT_LT(candidates_for_absent(ring, truth), 1000u);
}

// A ring loaded from a partition's rows (after a restart) seals whole generations at once: it
// finds every hash as an inserted one does, in fewer and as compact generations, and later
// inserts and drops work on it as usual.
TEST(HashRing, ALoadedRingFindsEveryHashAndTakesInserts) {
  HashRing ring;
  std::vector<Hash128> truth;
  const uint64_t n = 1'000'000;
  const int64_t window_us = 2'000'000'000;  // a generation spans up to 500 s
  {
    RingLoader loader(ring, window_us);
    for (uint64_t i = 0; i < n; ++i) {
      truth.push_back(hash_of("m" + std::to_string(i)));
      loader.add(truth.back(), Offset(i), int64_t(i) * 1000);  // 1000 s in all
    }
    loader.finish();
  }
  EXPECT_EQ(ring.generations(), 2u);  // split at a quarter of the window
  EXPECT_LT(static_cast<double>(ring.bytes()) / n, 6.0);
  for (uint64_t i = 0; i < n; i += 997) ASSERT_EQ(find_in(ring, truth[i], truth), Offset(i)) << i;
  truth.push_back(hash_of("after"));
  ring.insert(truth.back(), Offset(n), int64_t(n) * 1000, window_us);
  EXPECT_EQ(find_in(ring, truth.back(), truth), Offset(n));
  ring.drop_below(int64_t(n) * 1000 - 1);  // only the newest hash is inside
  EXPECT_EQ(ring.generations(), 1u);
  EXPECT_FALSE(find_in(ring, truth[n - 1], truth));
  EXPECT_EQ(find_in(ring, truth.back(), truth), Offset(n));
}

// A ring written and read back (the rings file of a graceful stop) is the same ring: every
// hash found at its offset, absent ones named as often, as large; a damaged encoding is
// refused, never half taken.
TEST(HashRing, AnEncodedRingDecodesToTheSameRing) {
  HashRing ring;
  std::vector<Hash128> truth;
  for (uint64_t i = 0; i < 30000; ++i) {  // sealed and merged generations, and an open one
    truth.push_back(hash_of("e" + std::to_string(i)));
    ring.insert(truth.back(), Offset(i), int64_t(i), 1e9);
  }
  ASSERT_GE(ring.generations(), 2u);
  Bytes bytes;
  ByteWriter w(&bytes);
  ring.encode(w);
  ByteReader r(bytes);
  auto back = HashRing::decode(r);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(r.left(), 0u);
  EXPECT_EQ(back->generations(), ring.generations());
  EXPECT_EQ(back->bytes(), ring.bytes());
  for (uint64_t i = 0; i < truth.size(); ++i)
    ASSERT_EQ(find_in(*back, truth[i], truth), Offset(i)) << i;
  EXPECT_EQ(candidates_for_absent(*back, truth), candidates_for_absent(ring, truth));
  back->insert(hash_of("later"), Offset(30000), 30000, 1e9);  // it takes inserts as usual
  truth.push_back(hash_of("later"));
  EXPECT_EQ(find_in(*back, truth.back(), truth), Offset(30000));

  Bytes cut(bytes.begin(), bytes.end() - 9);
  ByteReader short_reader(cut);
  EXPECT_FALSE(HashRing::decode(short_reader).has_value());
  // The first generation's second bucket start (after the ring's count, the generation's 7
  // fields, its slot table and the bucket count) made larger than the third's: its buckets
  // would be walked out of order.
  Bytes bad = bytes;
  const size_t slots_at = 4 + 3 * 4 + 4 * 8;
  uint32_t slots = 0;
  std::memcpy(&slots, &bad[slots_at], 4);
  size_t second_bucket = slots_at + 4 + size_t{slots} * 4 + 4 + 8;
  ASSERT_LT(second_bucket + 4, bad.size());
  bad[second_bucket + 3] = 0x7f;
  ByteReader bad_reader(bad);
  EXPECT_FALSE(HashRing::decode(bad_reader).has_value());
  EXPECT_FALSE(bad_reader.ok());
}

// Offsets far apart need wide deltas, leaving short tags: generations stop merging before
// their tags fall under kTagBitsMin bits, and every hash is still found, none absent.
TEST(HashRing, SparseOffsetsStillFindEveryHash) {
  HashRing ring;
  std::map<uint64_t, Hash128> at;
  for (uint64_t i = 0; i < 50000; ++i) {
    Hash128 h = hash_of("s" + std::to_string(i));
    ring.insert(h, Offset(i << 10), 1, 1e9);
    at[i << 10] = h;
  }
  auto find = [&](const Hash128& h) {
    return ring.find(h, [&](Offset o) { return at.count(o.value) && at.at(o.value) == h; });
  };
  EXPECT_GT(ring.generations(), 8u);  // no merge past tags of 10 bits
  for (uint64_t i = 0; i < 50000; i += 7)
    ASSERT_EQ(find(hash_of("s" + std::to_string(i))), Offset(i << 10)) << i;
  for (int i = 0; i < 1000; ++i) ASSERT_FALSE(find(hash_of("absent" + std::to_string(i))));
}

// Generations merge only within a quarter of the window, so each is dropped as before: after
// each drop the ring holds no hash older than the window and a quarter.
TEST(HashRing, MergesStayWithinAQuarterOfTheWindow) {
  HashRing ring;
  const int64_t window_us = 4'000'000;
  auto hash_at = [](int64_t ms) { return hash_of(std::to_string(ms)); };
  // A candidate is accepted when the hash at its offset is the one looked for (as a row does).
  auto find = [&](int64_t ms) {
    Hash128 h = hash_at(ms);
    return ring.find(h, [&](Offset o) { return hash_at(int64_t(o.value)) == h; });
  };
  for (int64_t ms = 0; ms < 20'000; ++ms) {  // 20 s, a hash a ms
    ring.insert(hash_at(ms), Offset(uint64_t(ms)), ms * 1000, window_us);
    if (ms % 100 != 0 || ms < 6000) continue;
    ring.drop_below(ms * 1000 - window_us);
    ASSERT_EQ(find(ms - 4000), Offset(uint64_t(ms - 4000))) << ms;
    ASSERT_FALSE(find(ms - 5100)) << ms;
  }
  EXPECT_LT(ring.bytes(), size_t{6000} * 12);
}

// Random hashes (few distinct, so one hash sits at several offsets), stamps, and offsets that
// now and then jump past a generation's range, against a plain map of every offset of each
// hash: the ring finds the lowest offset accepted, across open, sealed and merged generations.
// As with rows, a candidate is accepted only where the hash really is (a tag may name others).
// A ring loaded from the same hashes in one pass (RingLoader) finds the same.
RC_GTEST_PROP(HashRing, FindsTheLowestAcceptedOffsetLikeAMap, ()) {
  HashRing ring;
  std::map<Hash128, std::vector<uint64_t>> model;
  std::map<uint64_t, Hash128> at;  // the hash at each offset
  auto ops = *rc::gen::container<std::vector<std::tuple<uint16_t, uint8_t, uint8_t>>>(
      rc::gen::tuple(rc::gen::arbitrary<uint16_t>(), rc::gen::inRange<uint8_t>(0, 100),
                     rc::gen::arbitrary<uint8_t>()));
  const int64_t window_us = 1'000'000'000;
  uint64_t offset = uint64_t{1} << 32;
  int64_t us = 0;
  HashRing loaded;  // the same hashes through a RingLoader, as after a restart
  RingLoader loader(loaded, window_us);
  for (auto [key, step, time_step] : ops) {
    offset += step == 0 ? uint64_t{1} << 33 : 1;  // 0: past a generation's range
    us += time_step * 10'000;
    for (int i = 0; i < 300; ++i) {  // enough hashes to seal and merge
      Hash128 h = hash_of(std::to_string(key % 512) + "/" + std::to_string(i % 8));
      ring.insert(h, Offset(offset), us, window_us);
      loader.add(h, Offset(offset), us);
      model[h].push_back(offset);
      at[offset] = h;
      ++offset;
    }
  }
  auto holds = [&](const Hash128& h, Offset o) {
    auto it = at.find(o.value);
    return it != at.end() && it->second == h;
  };
  loader.finish();
  for (const HashRing* r : {&ring, &loaded}) {
    for (const auto& [hash, offsets] : model) {
      const Hash128& h = hash;  // a lambda may not capture a structured binding (C++17)
      uint64_t lowest = *std::min_element(offsets.begin(), offsets.end());
      RC_ASSERT(r->find(h, [&](Offset o) { return holds(h, o); }) == Offset(lowest));
      // Accepting only one of its offsets finds that one.
      for (uint64_t o : offsets)
        RC_ASSERT(r->find(h, [&](Offset c) { return c == Offset(o); }) == Offset(o));
    }
    Hash128 absent = hash_of("absent");
    RC_ASSERT(!r->find(absent, [&](Offset o) { return holds(absent, o); }));
  }
}

// Random inserts, erases and lookups against a plain map, with hashes whose low bits collide
// so that probe runs are long, wrap around the table and are cut by erases.
RC_GTEST_PROP(InFlightHashes, MatchesAMapUnderInsertsAndErases, ()) {
  InFlightHashes table;
  std::map<std::pair<uint64_t, Hash128>, Offset> model;
  auto ops = *rc::gen::container<std::vector<std::tuple<int, uint8_t, uint8_t, uint8_t>>>(
      rc::gen::tuple(rc::gen::inRange(0, 3), rc::gen::inRange<uint8_t>(1, 4),
                     rc::gen::arbitrary<uint8_t>(), rc::gen::inRange<uint8_t>(0, 4)));
  uint64_t next_offset = 0;
  for (auto [op, pid_value, key, offset_delta] : ops) {
    PartitionId pid(pid_value);
    Hash128 h{uint64_t{key} % 8 * 64, key};  // eight homes per table size: long runs
    auto it = model.find({pid.value, h});
    if (op == 0) {
      Offset o(++next_offset);
      table.insert(pid, h, o, Uuid{});
      if (it == model.end()) model[{pid.value, h}] = o;
    } else if (op == 1 && it != model.end()) {
      // Erase at the recorded offset, or (offset_delta > 0) at another one, which keeps it.
      Offset o(it->second.value + offset_delta);
      table.erase(pid, h, o);
      if (offset_delta == 0) model.erase(it);
    }
    RC_ASSERT(table.size() == model.size());
    for (const auto& [k, o] : model) {
      const InFlightHashes::Slot* s = table.find(PartitionId(k.first), k.second);
      RC_ASSERT(s != nullptr);
      RC_ASSERT(s->offset == o);
    }
    RC_ASSERT(table.find(pid, h) == nullptr || model.contains({pid.value, h}));
  }
  size_t seen = 0;
  for (uint64_t p = 1; p < 4; ++p)
    table.for_each_of(PartitionId(p), [&](const InFlightHashes::Slot& s) {
      RC_ASSERT(s.pid == PartitionId(p));
      RC_ASSERT(model.contains({p, s.hash}));
      ++seen;
    });
  RC_ASSERT(seen == model.size());
}

TEST(InFlightHashes, GivesLargeTablesBackOnceEmpty) {
  InFlightHashes table;
  const uint64_t n = InFlightHashes::kSlotsKeptMax;  // needs twice as many slots
  for (uint64_t i = 0; i < n; ++i) table.insert(PartitionId(1), Hash128{i, i}, Offset(i), Uuid{});
  EXPECT_EQ(table.slots(), 2 * n);
  for (uint64_t i = 0; i < n; ++i) {
    ASSERT_NE(table.find(PartitionId(1), Hash128{i, i}), nullptr) << i;
    table.erase(PartitionId(1), Hash128{i, i}, Offset(i));
  }
  EXPECT_EQ(table.size(), 0u);
  EXPECT_EQ(table.slots(), 0u);
  EXPECT_EQ(table.find(PartitionId(1), Hash128{0, 0}), nullptr);
  table.insert(PartitionId(2), Hash128{7, 7}, Offset(3), Uuid{});
  ASSERT_NE(table.find(PartitionId(2), Hash128{7, 7}), nullptr);
  EXPECT_EQ(table.find(PartitionId(2), Hash128{7, 7})->offset, Offset(3));
}

TEST(Dedup, RetriedPushIsAnsweredWithTheOriginalOffsetAndMessageId) {
  Harness h;
  PushReply first = h.push("q", "p", {"order-1", "order-2"});
  PushCmd retry = h.push_cmd("q", "p", {"order-2", "order-3"});
  PushReply second = h.call<PushReply>(retry);
  EXPECT_EQ(second.results[0].status, PushStatus::duplicate);
  EXPECT_EQ(second.results[0].offset, first.results[1].offset);
  EXPECT_EQ(second.results[0].message_id, first.results[1].message_id);
  EXPECT_EQ(second.results[1].status, PushStatus::queued);
  EXPECT_EQ(second.results[1].offset, Offset(2));  // survivors stay gapless
  EXPECT_EQ(h.node().store().partition("q", "p")->next_offset, Offset(3));
}

TEST(Dedup, RepeatsInsideOneRequestAreStoredOnce) {
  Harness h;
  PushReply r = h.push("q", "p", {"x", "x", "y"});
  EXPECT_EQ(r.results[0].status, PushStatus::queued);
  EXPECT_EQ(r.results[1].status, PushStatus::duplicate);
  EXPECT_EQ(r.results[1].message_id, r.results[0].message_id);
  EXPECT_EQ(r.results[2].offset, Offset(1));
}

TEST(Dedup, AllDuplicatePushIsStillAnswered) {
  Harness h;
  h.push("q", "p", {"a"});
  PushReply r = h.push("q", "p", {"a"});
  EXPECT_EQ(r.results.at(0).status, PushStatus::duplicate);
}

TEST(Dedup, WindowZeroTurnsDedupOffAndTheWindowExpires) {
  Harness h;
  configure(h, "off", {.dedup_window_s = 0});
  h.push("off", "p", {"a"});
  EXPECT_EQ(h.push("off", "p", {"a"}).results[0].status, PushStatus::queued);
  configure(h, "short", {.dedup_window_s = 2});
  h.push("short", "p", {"a"});
  EXPECT_EQ(h.push("short", "p", {"a"}).results[0].status, PushStatus::duplicate);
  h.env.advance_ms(2100);
  EXPECT_EQ(h.push("short", "p", {"a"}).results[0].status, PushStatus::queued);
}

TEST(Dedup, SurvivesARestartAndWarmsItsRingFromTheRows) {
  Harness h;
  std::vector<std::string> txns;
  for (int i = 0; i < 600; ++i) txns.push_back("t" + std::to_string(i));
  PushReply first = h.push("q", "p", txns);
  h.env.crash();
  h.restart();
  PushReply again = h.push("q", "p", {"t599", "t0", "new"});
  EXPECT_EQ(again.results[0].status, PushStatus::duplicate);
  EXPECT_EQ(again.results[0].offset, Offset(599));
  EXPECT_EQ(again.results[0].message_id, first.results[599].message_id);
  EXPECT_EQ(again.results[1].offset, Offset(0));
  EXPECT_EQ(again.results[2].offset, Offset(600));
}

// A graceful stop on `h`: the store checkpoint and the dedup rings, both durable.
void stop_gracefully(Harness& h) {
  bool current = false;
  for (int i = 0; i < 5 && !current; ++i) {
    h.env.perform(h.node().checkpoint_before_stop(&current));
    h.env.run();
  }
  ASSERT_TRUE(current);
}

size_t rings_files(const MemEnv& env) {
  size_t n = 0;
  for (const auto& [name, bytes] : env.files) n += name.rfind("store/rings.", 0) == 0;
  return n;
}

// After a graceful stop the next start takes the rings the stop wrote: a push finds its
// duplicates without reading a single row for its ring, and the file is gone once read.
TEST(Dedup, AGracefulStopKeepsItsRingsForTheNextStart) {
  Harness h;
  std::vector<std::string> txns;
  for (int i = 0; i < 600; ++i) txns.push_back("t" + std::to_string(i));
  PushReply first = h.push("q", "p", txns);
  h.push("q", "p", {"warm"});  // the ring is built here, from the rows
  stop_gracefully(h);
  EXPECT_EQ(rings_files(h.env), 1u);
  h.restart();
  EXPECT_EQ(h.node().stats().rings_loaded, 1u);
  EXPECT_EQ(rings_files(h.env), 0u);
  PushReply again = h.push("q", "p", {"t599", "t0", "new"});
  EXPECT_EQ(again.results[0].status, PushStatus::duplicate);
  EXPECT_EQ(again.results[0].offset, Offset(599));
  EXPECT_EQ(again.results[0].message_id, first.results[599].message_id);
  EXPECT_EQ(again.results[1].offset, Offset(0));
  EXPECT_EQ(again.results[2].status, PushStatus::queued);
  EXPECT_EQ(again.results[2].offset, Offset(601));
  // Two candidates checked against their rows; no warm-up read every row.
  EXPECT_LE(h.node().stats().row_hash_reads, 2u);

  h.env.crash();  // no rings file now: the ring warms from the rows again
  h.restart();
  EXPECT_EQ(h.node().stats().rings_loaded, 0u);
  EXPECT_EQ(h.push("q", "p", {"t1"}).results[0].offset, Offset(1));
  EXPECT_GT(h.node().stats().row_hash_reads, 2u);
}

// Entries applied after the stop's checkpoint (and replayed at the next start) are not in the
// rings it wrote: their partition's ring is kept behind the rows and catches up from them at
// its next use, reading only the rows the replay added, so a retry of one of them is still a
// duplicate. A ring of another partition is untouched.
TEST(Dedup, EntriesReplayedAfterTheStopsRingsAreCaughtUpFromTheRows) {
  Harness h;
  std::vector<std::string> txns;
  for (int i = 0; i < 600; ++i) txns.push_back("t" + std::to_string(i));
  for (int i = 0; i < 600; i += 20) {  // 30 rows each
    h.push("q", "p", std::vector<std::string>(txns.begin() + i, txns.begin() + i + 20));
    h.push("q", "other", std::vector<std::string>(txns.begin() + i, txns.begin() + i + 20));
  }
  h.push("q", "p", {"w"});
  h.push("q", "other", {"w"});
  const uint64_t two_rings = h.call<MetricsReply>(MetricsCmd{}).dedup_ring_bytes;
  stop_gracefully(h);
  PushReply late = h.push("q", "p", {"late"});  // in the log, not in the stop's checkpoint
  ASSERT_EQ(late.results[0].status, PushStatus::queued);
  h.env.crash();
  h.restart();
  ASSERT_EQ(h.node().stats().recovered_entries, 1u);
  EXPECT_EQ(h.node().stats().rings_loaded, 2u);
  EXPECT_EQ(h.call<MetricsReply>(MetricsCmd{}).dedup_ring_bytes, two_rings);
  PushReply again = h.push("q", "p", {"late", "t5"});
  EXPECT_EQ(again.results[0].status, PushStatus::duplicate);
  EXPECT_EQ(again.results[0].offset, late.results[0].offset);
  EXPECT_EQ(again.results[1].offset, Offset(5));
  MetricsReply m = h.call<MetricsReply>(MetricsCmd{});
  EXPECT_EQ(m.dedup_ring_catch_ups, 1u);
  // The replayed row, then each candidate's row: not p's 31 rows again.
  EXPECT_LE(m.row_hash_reads, 3u);
  EXPECT_EQ(h.push("q", "other", {"t9"}).results[0].offset, Offset(9));
}

// Pushes 300 rows of 100 transactionIds t0-t29999 into q/p (a few sealed generations), with a
// store checkpoint after every tenth; `firsts` gets the answers, `rows_after_file` the rows the
// newest rings file does not hold (all of them when no file was written).
void push_with_checkpoints(Harness& h, std::vector<PushReply>* firsts, uint64_t* rows_after_file) {
  *rows_after_file = 0;
  for (int i = 0; i < 300; ++i) {
    std::vector<std::string> txns;
    for (int k = 0; k < 100; ++k) txns.push_back("t" + std::to_string(i * 100 + k));
    const uint64_t files = h.node().stats().rings_files_written;
    firsts->push_back(h.push("q", "p", txns));
    ++*rows_after_file;
    if (i % 10 == 9) h.env.advance_ms(h.config().durable_every_ms);  // a store checkpoint
    if (h.node().stats().rings_files_written != files) *rows_after_file = 0;
  }
}

NodeConfig rings_files_for_any_size() {
  NodeConfig c;
  c.rings_file_bytes_min = 0;
  return c;
}

// A store checkpoint takes a rings file beside it once the log has grown kRingsLogRatio times
// the rings' size since the last one (the older file goes), so a start after a crash has the
// rings too: each catches up from the rows written since its file.
TEST(Dedup, ACrashRestartsFromTheRingsOfAnEarlierCheckpoint) {
  Harness h(rings_files_for_any_size());
  std::vector<PushReply> firsts;
  uint64_t rows_after_file = 0;
  push_with_checkpoints(h, &firsts, &rows_after_file);
  ASSERT_GE(h.node().stats().rings_files_written, 2u);
  ASSERT_LT(rows_after_file, 100u);
  EXPECT_EQ(rings_files(h.env), 1u);
  const uint64_t files_before = h.node().stats().rings_files_written;
  PushReply late = h.push("q", "p", {"late"});
  ASSERT_EQ(h.node().stats().rings_files_written, files_before);
  h.env.crash();
  h.restart();
  EXPECT_EQ(h.node().stats().rings_loaded, 1u);
  EXPECT_EQ(rings_files(h.env), 0u);
  PushReply again = h.push("q", "p", {"late", "t29999", "t0", "new"});
  EXPECT_EQ(again.results[0].status, PushStatus::duplicate);
  EXPECT_EQ(again.results[0].offset, late.results[0].offset);
  EXPECT_EQ(again.results[1].offset, Offset(29999));
  EXPECT_EQ(again.results[1].message_id, firsts.back().results[99].message_id);
  EXPECT_EQ(again.results[2].offset, Offset(0));
  EXPECT_EQ(again.results[3].status, PushStatus::queued);
  MetricsReply m = h.call<MetricsReply>(MetricsCmd{});
  EXPECT_EQ(m.dedup_ring_catch_ups, 1u);
  // The rows after the file and the late one, then each candidate's row (a ring built again
  // would read all 301 rows).
  EXPECT_LE(m.row_hash_reads, rows_after_file + 1 + 3);
}

// Rings smaller than rings_file_bytes_min take no rings file at a store checkpoint (each file
// costs a fork): a start after a crash warms them from the rows, and dedup stays exact.
TEST(Dedup, RingsBelowTheirFileMinimumAreWarmedFromTheRowsAfterACrash) {
  NodeConfig c;
  c.rings_file_bytes_min = 1u << 20;  // above the 30000 hashes' rings
  Harness h(c);
  std::vector<PushReply> firsts;
  uint64_t rows_after_file = 0;
  push_with_checkpoints(h, &firsts, &rows_after_file);
  ASSERT_GT(h.call<MetricsReply>(MetricsCmd{}).dedup_ring_bytes, 0u);
  EXPECT_EQ(h.node().stats().rings_files_written, 0u);
  EXPECT_EQ(rings_files(h.env), 0u);
  h.env.crash();
  h.restart();
  EXPECT_EQ(h.node().stats().rings_loaded, 0u);
  PushReply again = h.push("q", "p", {"t29999", "t0", "new"});
  EXPECT_EQ(again.results[0].offset, Offset(29999));
  EXPECT_EQ(again.results[0].message_id, firsts.back().results[99].message_id);
  EXPECT_EQ(again.results[1].offset, Offset(0));
  EXPECT_EQ(again.results[2].status, PushStatus::queued);
  EXPECT_EQ(h.call<MetricsReply>(MetricsCmd{}).dedup_ring_catch_ups, 0u) << "built from the rows";
}

// The rings hold the windows' hashes, not the backlog's: a ring whose queue is deleted goes at
// the next sweep (each store checkpoint tick), and one whose partition is no longer pushed to
// goes once its window has passed, though the messages stay.
TEST(Dedup, RingsOfDeletedOrIdlePartitionsAreDropped) {
  Harness h;
  configure(h, "q", {.dedup_window_s = 5});
  std::vector<std::string> txns;
  for (int i = 0; i < 600; ++i) txns.push_back("t" + std::to_string(i));
  for (const char* queue : {"q", "gone"}) {
    h.push(queue, "p", txns);
    h.push(queue, "p", {"w"});  // the ring is built here
  }
  const uint64_t two_rings = h.call<MetricsReply>(MetricsCmd{}).dedup_ring_bytes;
  ASSERT_GT(two_rings, 0u);
  h.call<GroupChangeReply>(QueueDeleteCmd{"gone"});
  h.env.advance_ms(h.config().durable_every_ms);
  EXPECT_EQ(h.call<MetricsReply>(MetricsCmd{}).dedup_ring_bytes * 2, two_rings);
  h.env.advance_ms(2000);  // inside the window: the ring stays
  EXPECT_EQ(h.call<MetricsReply>(MetricsCmd{}).dedup_ring_bytes * 2, two_rings);
  h.env.advance_ms(4000);
  EXPECT_EQ(h.call<MetricsReply>(MetricsCmd{}).dedup_ring_bytes, 0u);
  EXPECT_EQ(h.node().store().partition("q", "p")->kept(), 601u);
  PushReply after = h.push("q", "p", {"t5"});  // past the window: a new message
  EXPECT_EQ(after.results[0].status, PushStatus::queued);
  EXPECT_EQ(after.results[0].offset, Offset(601));
}

// Three partitions' rings, built in the order a, b, c, with a store checkpoint tick (where
// the rings' bytes are counted again) before c's.
void fill_three_rings(Harness& h) {
  std::vector<std::string> txns;
  for (int i = 0; i < 600; ++i) txns.push_back("t" + std::to_string(i));
  for (const char* p : {"a", "b", "c"}) {
    if (p[0] == 'c') h.env.advance_ms(h.config().durable_every_ms);
    h.push("q", p, txns);
    h.push("q", p, {"w"});  // the ring is built here
  }
}

// QUEEN_RAFT_DEDUP_FRONT_MB bounds the rings: a ring built past the bound, or the store
// checkpoint tick once they have grown past it, drops the least recently used, and a partition
// whose ring went still finds its duplicates (its ring warms again from the rows).
TEST(Dedup, RingsPastTheirBoundAreDroppedLeastRecentlyUsedFirst) {
  Harness unbounded;
  fill_three_rings(unbounded);
  unbounded.env.advance_ms(unbounded.config().durable_every_ms);
  const MetricsReply all = unbounded.call<MetricsReply>(MetricsCmd{});
  ASSERT_GT(all.dedup_ring_bytes, 0u);
  EXPECT_EQ(all.dedup_ring_evictions, 0u) << "the default bound is far above three rings";

  NodeConfig cfg;
  cfg.dedup_front_bytes_max = all.dedup_ring_bytes * 5 / 6;  // room for 2.5 rings
  Harness h(cfg);
  auto evictions = [&] { return h.call<MetricsReply>(MetricsCmd{}).dedup_ring_evictions; };
  auto bytes = [&] { return h.call<MetricsReply>(MetricsCmd{}).dedup_ring_bytes; };
  fill_three_rings(h);
  EXPECT_EQ(evictions(), 1u) << "c's ring, built past the bound, dropped a's";
  const uint64_t two = bytes();
  EXPECT_LE(two, cfg.dedup_front_bytes_max);
  // A lookup in a ring that is there changes nothing (a duplicate is not inserted); one in a
  // partition whose ring went builds it again, and that drops the least recently used.
  EXPECT_EQ(h.push("q", "c", {"t8"}).results[0].offset, Offset(8));
  EXPECT_EQ(h.push("q", "b", {"t9"}).results[0].offset, Offset(9));
  EXPECT_EQ(bytes(), two);
  EXPECT_EQ(evictions(), 1u);
  PushReply again = h.push("q", "a", {"t5", "fresh"});
  EXPECT_EQ(again.results[0].status, PushStatus::duplicate);
  EXPECT_EQ(again.results[0].offset, Offset(5));
  EXPECT_EQ(again.results[1].offset, Offset(601));
  EXPECT_EQ(evictions(), 2u);
  EXPECT_EQ(h.push("q", "b", {"t10"}).results[0].offset, Offset(10));
  EXPECT_EQ(evictions(), 2u) << "b's ring stayed: c's was the least recently used";
  EXPECT_EQ(h.push("q", "c", {"t7"}).results[0].offset, Offset(7));
  EXPECT_EQ(evictions(), 3u);

  // Rings that grow past the bound by their inserts are brought under it at the next tick.
  std::vector<std::string> more;
  for (int i = 0; i < 3000; ++i) more.push_back("m" + std::to_string(i));
  h.push("q", "b", more);
  ASSERT_GT(bytes(), cfg.dedup_front_bytes_max);
  h.env.advance_ms(cfg.durable_every_ms);
  EXPECT_GT(evictions(), 3u);
  EXPECT_LE(bytes(), cfg.dedup_front_bytes_max - cfg.dedup_front_bytes_max / 8);
  EXPECT_EQ(h.push("q", "b", {"m17"}).results[0].offset, Offset(618));
  EXPECT_EQ(h.push("q", "c", {"t3"}).results[0].offset, Offset(3));
}

// A start takes at most the bound's worth of the rings file, the most recently used: a bound
// lowered across a restart holds before the first push, and the partition whose ring was left
// out still finds its duplicates, from its rows.
TEST(Dedup, AStartTakesTheMostRecentlyUsedRingsUpToTheBound) {
  Harness h;
  fill_three_rings(h);
  for (const char* p : {"c", "a", "b"}) h.push("q", p, {"t1"});  // c is the least recent now
  const uint64_t three = h.call<MetricsReply>(MetricsCmd{}).dedup_ring_bytes;
  stop_gracefully(h);
  h.config().dedup_front_bytes_max = three * 5 / 6;  // room for 2.5 rings: 2 are kept
  h.restart();
  const MetricsReply m = h.call<MetricsReply>(MetricsCmd{});
  EXPECT_EQ(h.node().stats().rings_loaded, 2u);
  EXPECT_EQ(m.dedup_ring_evictions, 1u);
  EXPECT_LE(m.dedup_ring_bytes, h.config().dedup_front_bytes_max);
  // Rows read for a retry: its candidate's alone from a loaded ring, all of the window's
  // records from one warmed again.
  auto rows_read_for = [&](const char* p, const char* txn, uint64_t offset) {
    const uint64_t before = h.node().stats().row_hash_reads;
    EXPECT_EQ(h.push("q", p, {txn}).results[0].offset, Offset(offset)) << p;
    return h.node().stats().row_hash_reads - before;
  };
  EXPECT_EQ(rows_read_for("a", "t5", 5), 1u) << "a's ring was loaded";
  EXPECT_EQ(rows_read_for("b", "t6", 6), 1u) << "b's ring was loaded";
  EXPECT_GT(rows_read_for("c", "t7", 7), 1u) << "c's ring was left out: it warmed from its rows";
}

// A damaged rings file, or one of another index than the checkpoint loaded, is not taken (the
// rings warm from the rows) and is removed; dedup stays exact either way.
TEST(Dedup, ADamagedOrStaleRingsFileIsLeftUnread) {
  for (bool damaged : {true, false}) {
    Harness h;
    std::vector<std::string> txns;
    for (int i = 0; i < 600; ++i) txns.push_back("t" + std::to_string(i));
    h.push("q", "p", txns);
    h.push("q", "p", {"w"});
    stop_gracefully(h);
    std::string name;
    for (const auto& [n, b] : h.env.files)
      if (n.rfind("store/rings.", 0) == 0) name = n;
    ASSERT_FALSE(name.empty());
    if (damaged) {
      h.env.files[name][40] ^= 0x10;
    } else {
      h.env.files["store/rings.00000000000000000001"] = h.env.files[name];
      h.env.files.erase(name);
    }
    h.restart();
    EXPECT_EQ(h.node().stats().rings_loaded, 0u) << damaged;
    EXPECT_EQ(rings_files(h.env), 0u) << damaged;
    EXPECT_EQ(h.push("q", "p", {"t7"}).results[0].offset, Offset(7)) << damaged;
  }
}

// The model: per partition, the first offset of each transactionId whose push is still
// inside the window; everything else gets the next offset.
// `txn_space` transactionIds, pushes of up to `batch_max`: a small space keeps the partition's
// window short (exact scans of DedupIndex::kColdScanRowsMax rows at most, then a ring), a
// large one fills it.
void check_first_offset_model(int txn_space, int batch_max) {
  Harness h;
  configure(h, "q", {.dedup_window_s = 5});
  std::map<std::string, std::pair<uint64_t, int64_t>> model;  // txn -> (offset, pushed_at_us)
  uint64_t next = 0;
  auto steps = *rc::gen::container<std::vector<std::tuple<int, int, int>>>(rc::gen::tuple(
      rc::gen::inRange(0, txn_space), rc::gen::inRange(0, batch_max), rc::gen::inRange(0, 10)));
  for (auto [txn_no, batch, action] : steps) {
    if (action == 0) {
      h.env.advance_ms(1500);  // let windows expire
      continue;
    }
    if (action == 1) {
      h.env.crash();
      h.restart();
    }
    if (action == 2) {  // a graceful stop: the next start reads the rings it wrote
      stop_gracefully(h);
      h.restart();
    }
    std::vector<std::string> txns;
    for (int k = 0; k <= batch; ++k)
      txns.push_back("t" + std::to_string((txn_no + k * 7) % txn_space));
    PushReply r = h.push("q", "p", txns);
    int64_t now = h.env.now;
    for (size_t k = 0; k < txns.size(); ++k) {
      auto it = model.find(txns[k]);
      bool dup = it != model.end() && it->second.second >= now - 5'000'000 - 20'000;
      bool clearly_new = it == model.end() || it->second.second < now - 5'000'000 - 30'000;
      if (r.results[k].status == PushStatus::duplicate) {
        RC_ASSERT(!clearly_new);
        RC_ASSERT(r.results[k].offset.value == it->second.first);
      } else {
        RC_ASSERT(!dup);
        RC_ASSERT(r.results[k].offset.value == next);
        model[txns[k]] = {next, now};
        ++next;
      }
    }
  }
  const PartitionState* p = h.node().store().partition("q", "p");
  uint64_t stored = p ? p->next_offset.value : 0;
  RC_ASSERT(stored == next);
}

RC_GTEST_PROP(DedupProperty, MatchesTheFirstOffsetModel, ()) {
  check_first_offset_model(40, 4);
}

RC_GTEST_PROP(DedupProperty, MatchesTheFirstOffsetModelWithAWarmRing, ()) {
  check_first_offset_model(1500, 120);
}

}  // namespace
}  // namespace queen::testing

namespace queen::testing {
namespace {

TEST(RequestId, RetryUnderTheSameRequestIdGetsTheFirstOutcomeAndAppliesNothingTwice) {
  NodeConfig cfg;
  cfg.request_id_window_ms = 1000;
  Harness h(cfg);
  ConfigureCmd off;  // no transactionId dedup: only the request id protects the retry
  off.queue = "q";
  off.patch.dedup_window_s = 0;
  h.call<ConfigureReply>(off);
  RequestId rid;
  rid.bytes[0] = 7;
  PushCmd cmd = h.push_cmd("q", "p", {"a"});
  auto send = [&] {
    ReplyHandle hd = 1000 + h.env.replies.size() + h.env.now % 997;
    h.env.perform(h.node().on_command(hd, CommandEnvelope{rid, h.env.now / 1000 + 30000, cmd}));
    h.env.advance_ms(2);
    auto r = h.take(hd);
    QUEEN_ASSERT(r.has_value(), "no reply");
    return std::get<PushReply>(r->body);
  };
  PushReply first = send();
  PushReply retry = send();
  EXPECT_EQ(retry.results[0].offset, first.results[0].offset);
  EXPECT_EQ(retry.results[0].message_id, first.results[0].message_id);
  EXPECT_EQ(h.node().store().partition("q", "p")->next_offset, Offset(1));
  h.env.advance_ms(1100);  // past the window the same id is a new command
  PushReply later = send();
  EXPECT_EQ(later.results[0].offset, Offset(1));
}

// A single server node (keep_request_outcomes off) logs no answers: its entries and
// checkpoints carry only the commands' effects.
TEST(RequestId, ANodeThatKeepsNoOutcomesLogsNoAnswers) {
  NodeConfig cfg;
  cfg.keep_request_outcomes = false;
  Harness h(cfg);
  RequestId rid;
  rid.bytes[0] = 9;
  ReplyHandle hd = 4242;
  h.env.perform(h.node().on_command(
      hd, CommandEnvelope{rid, h.env.now / 1000 + 30000, h.push_cmd("q", "p", {"a"})}));
  h.env.advance_ms(2);
  auto r = h.take(hd);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(std::get<PushReply>(r->body).results[0].status, PushStatus::queued);
  EXPECT_EQ(h.node().store().partition("q", "p")->next_offset, Offset(1));
  EXPECT_TRUE(h.node().store().request_outcomes().empty());
}

}  // namespace
}  // namespace queen::testing
