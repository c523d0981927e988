// A Raft cluster of nodes on in-memory environments: replication and commit at a majority of
// durable copies, answers from the leader only, leader changes (crash, isolation) that keep
// every answered push and cut what never committed, followers that restart and catch up, a
// new leader that waits before serving consumption and honours leases granted before it. Also
// the pieces underneath: the replicated entry codec, the hard-state slots, log truncation and
// recovery that holds back entries past the persisted commit.
#include <gtest/gtest.h>

#include <map>

#include <set>

#include "core/node/hard_state.h"
#include "core/qlog/log.h"
#include "tests/core/mem_env.h"
#include "tests/core/test_cluster.h"

namespace queen::testing {
namespace {

TEST(Cluster, ElectsOneLeaderAndEveryNodeAppliesAnAnsweredPush) {
  TestCluster c(3);
  ASSERT_TRUE(c.run_until(2000, [&] { return c.leader() >= 0; }));
  int l = c.leader();
  auto r = c.push(l, "a");
  ASSERT_NE(as<PushReply>(r), nullptr);
  EXPECT_EQ(as<PushReply>(r)->results.at(0).offset, Offset(0));
  ASSERT_TRUE(c.run_until(500, [&] { return c.converged(); }));
  for (int i = 0; i < 3; ++i) EXPECT_EQ(c.payloads(i), std::vector<std::string>{"\"a\""});
}

TEST(Cluster, FollowerAnswers503RetryNamingTheLeader) {
  TestCluster c(3);
  ASSERT_TRUE(c.run_until(2000, [&] { return c.leader() >= 0; }));
  int l = c.leader();
  int f = (l + 1) % 3;
  auto r = c.push(f, "a", 5);
  const auto* e = as<ErrorReply>(r);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->code, api::Errc::not_leader);
  EXPECT_EQ(e->leader, static_cast<uint64_t>(l) + 1);
  EXPECT_GE(e->retry_after_s, 1);
}

// ---- a follower's forwarding (NodeConfig::forward_commands, core/node/node_forward.cpp) ----

void forwarding(NodeConfig& c) {
  c.forward_commands = true;
}

TEST(Forwarding, AFollowerAnswersWithTheLeadersReply) {
  TestCluster c(3, forwarding);
  ASSERT_TRUE(c.run_until(2000, [&] { return c.leader() >= 0; }));
  int f = (c.leader() + 1) % 3;
  auto r = c.push(f, "a");
  ASSERT_NE(as<PushReply>(r), nullptr);
  EXPECT_EQ(as<PushReply>(r)->results.at(0).offset, Offset(0));
  EXPECT_EQ(c.node(f).stats().forwarded, 1u);
  ASSERT_TRUE(c.run_until(500, [&] { return c.converged(); }));
  EXPECT_EQ(c.payloads(f), std::vector<std::string>{"\"a\""});
}

// Sends `push` to a follower under one request id while every node holds its syncs, cuts the
// leader off `sent_ms` later (it has planned the push and sent it to both followers), and
// returns the follower's index once it has its answer, `reply` (the caller heals the cut).
int push_while_the_leader_is_cut_off(TestCluster& c, const PushCmd& push, int64_t sent_ms,
                                     std::optional<Reply>* reply) {
  int l = c.leader();
  int f = (l + 1) % 3;
  for (int i = 0; i < 3; ++i) c.env(i).hold_syncs = true;  // written everywhere, not durable
  ReplyHandle h = c.send(f, push, RequestId{make_uuid_v7(1, 2, 3)});
  c.run_ms(sent_ms);
  c.isolate(l);
  for (int i = 0; i < 3; ++i) c.env(i).hold_syncs = false;
  EXPECT_TRUE(c.run_until(5000, [&] { return (*reply = c.take(f, h)).has_value(); }));
  return f;
}

// The leader took the command and was cut off before it answered: the follower sends it to
// the next leader under the same request id, and the command is applied once.
TEST(Forwarding, AfterTheLeaderIsCutOffTheRetryKeepsTheRequestIdAndAppliesOnce) {
  TestCluster c(3, forwarding);
  ASSERT_TRUE(c.run_until(2000, [&] { return c.leader() >= 0; }));
  std::optional<Reply> r;
  int f = push_while_the_leader_is_cut_off(c, c.push_cmd("a"), 1, &r);
  ASSERT_NE(as<PushReply>(r), nullptr);
  EXPECT_GE(c.node(f).stats().forward_retries, 1u);  // at the next leader, or served here
  c.heal();
  ASSERT_TRUE(c.run_until(3000, [&] { return c.converged(); }));
  for (int i = 0; i < 3; ++i) EXPECT_EQ(c.payloads(i), std::vector<std::string>{"\"a\""});
}

// A transactionId the edge minted is taken as new only where it was minted: a forwarded
// command may be planned more than once, so its items are looked up at every attempt. Here a
// retry that lost its request id (the mutant) is still applied once, found by its item's id.
TEST(Forwarding, AForwardedMintedTransactionIdIsLookedUpAtEveryAttempt) {
  TestCluster c(3, [](NodeConfig& n) {
    forwarding(n);
    n.mutants.forward_fresh_request_id = true;
  });
  ASSERT_TRUE(c.run_until(2000, [&] { return c.leader() >= 0; }));
  PushCmd push = c.push_cmd("a");
  push.items[0].txn_minted = true;
  std::optional<Reply> r;
  int f = push_while_the_leader_is_cut_off(c, push, 2, &r);
  ASSERT_NE(as<PushReply>(r), nullptr);
  ASSERT_GE(c.node(f).stats().forward_retries, 1u);  // planned again at the next leader
  c.heal();
  ASSERT_TRUE(c.run_until(3000, [&] { return c.converged(); }));
  for (int i = 0; i < 3; ++i) EXPECT_EQ(c.payloads(i), std::vector<std::string>{"\"a\""});
}

// A follower cut off after it forwarded a write cannot learn its fate: at the deadline it
// answers outcome_unknown, not a retry that would invite a second copy.
TEST(Forwarding, AFollowerThatCannotLearnTheOutcomeAnswersOutcomeUnknownAtTheDeadline) {
  TestCluster c(3, forwarding);
  ASSERT_TRUE(c.run_until(2000, [&] { return c.leader() >= 0; }));
  int f = (c.leader() + 1) % 3;
  ReplyHandle h = c.send(f, c.push_cmd("a"), RequestId{make_uuid_v7(1, 2, 3)}, 600);
  for (int i = 0; i < 3; ++i) c.env(i).hold_syncs = true;  // nothing commits: no answer
  c.run_ms(1);
  std::optional<Reply> r;
  ASSERT_TRUE(c.run_until(2000, [&] { return (r = c.take(f, h)).has_value(); }));
  const auto* e = as<ErrorReply>(r);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->code, api::Errc::outcome_unknown);
  EXPECT_EQ(c.node(f).stats().forward_unknown, 1u);
}

// A client gone while its command was forwarded gets no answer, and the follower holds
// nothing for it.
TEST(Forwarding, ACancelledCommandIsNeverAnswered) {
  TestCluster c(3, forwarding);
  ASSERT_TRUE(c.run_until(2000, [&] { return c.leader() >= 0; }));
  int l = c.leader();
  int f = (l + 1) % 3;
  c.isolate(l);  // no leader answers for a while
  ReplyHandle h = c.send(f, c.push_cmd("a"));
  c.run_ms(5);
  c.env(f).perform(c.node(f).on_cancel(h));
  c.heal();
  c.run_ms(3000);
  EXPECT_FALSE(c.take(f, h).has_value());
}

// A command held while no leader is known is served by this node once it leads.
TEST(Forwarding, ACommandHeldWithoutALeaderIsAnsweredOnceOneIsElected) {
  TestCluster c(3, forwarding);
  ReplyHandle h = c.send(0, c.push_cmd("a"));  // before any election
  std::optional<Reply> r;
  ASSERT_TRUE(c.run_until(5000, [&] { return (r = c.take(0, h)).has_value(); }));
  ASSERT_NE(as<PushReply>(r), nullptr);
}

TEST(Cluster, PushIsAnsweredOnlyOnceAMajorityHasItDurable) {
  TestCluster c(3);
  ASSERT_TRUE(c.run_until(2000, [&] { return c.leader() >= 0; }));
  int l = c.leader();
  for (int i = 0; i < 3; ++i)
    if (i != l) c.env(i).hold_syncs = true;  // the followers write but never finish a sync
  ReplyHandle h = c.send(l, c.push_cmd("a"));
  c.run_ms(300);
  EXPECT_FALSE(c.take(l, h).has_value()) << "answered with only the leader's copy durable";
  c.env((l + 1) % 3).hold_syncs = false;  // one follower's copy lands: a majority of three
  std::optional<Reply> r;
  ASSERT_TRUE(c.run_until(300, [&] { return (r = c.take(l, h)).has_value(); }));
  EXPECT_NE(as<PushReply>(r), nullptr);
}

TEST(Cluster, LeaderCrashElectsAnotherThatKeepsEveryAnsweredPush) {
  TestCluster c(3);
  ASSERT_TRUE(c.run_until(2000, [&] { return c.leader() >= 0; }));
  int l = c.leader();
  for (const char* t : {"a", "b", "c"}) ASSERT_NE(as<PushReply>(c.push(l, t)), nullptr);
  c.crash(l);
  ASSERT_TRUE(c.run_until(3000, [&] { return c.leader() >= 0; }));
  int l2 = c.leader();
  EXPECT_NE(l2, l);
  EXPECT_EQ(c.payloads(l2), (std::vector<std::string>{"\"a\"", "\"b\"", "\"c\""}));
  auto r = c.push(l2, "d");
  ASSERT_NE(as<PushReply>(r), nullptr);
  EXPECT_EQ(as<PushReply>(r)->results.at(0).offset, Offset(3));
  // The old leader restarts, recovers only what it knew committed, and catches up.
  c.start(l);
  ASSERT_TRUE(c.run_until(3000, [&] { return c.converged(); }));
  EXPECT_EQ(c.payloads(l).size(), 4u);
}

// Found by the simulator (3 nodes, seed 335): a node kept the dedup ring it had built while it
// led, which the appends of later leaders never reached; leading again, it stored a retried
// transactionId a second time. A leader must find every transactionId stored in the window.
TEST(Cluster, ANodeThatLeadsAgainFindsTheTransactionIdsStoredWhileItFollowed) {
  TestCluster c(3);
  ASSERT_TRUE(c.run_until(2000, [&] { return c.leader() >= 0; }));
  // Every node leads once and warms its ring of q/p (more rows than an exact scan reads).
  std::set<int> led;
  int n = 0;
  auto lead_elsewhere = [&](int l) {
    c.isolate(l);
    ASSERT_TRUE(c.run_until(3000, [&] { return c.leader() >= 0 && c.leader() != l; }));
    c.heal();
    ASSERT_TRUE(c.run_until(3000, [&] { return c.converged(); }));
  };
  for (int round = 0; round < 20 && led.size() < 3; ++round) {
    int l = c.leader();
    for (int k = 0; k < 8; ++k)
      ASSERT_NE(as<PushReply>(c.push(l, "w" + std::to_string(n++))), nullptr);
    led.insert(l);
    lead_elsewhere(l);
  }
  ASSERT_EQ(led.size(), 3u);
  auto first = c.push(c.leader(), "x");
  ASSERT_NE(as<PushReply>(first), nullptr);
  lead_elsewhere(c.leader());
  auto again = c.push(c.leader(), "x");
  ASSERT_NE(as<PushReply>(again), nullptr);
  EXPECT_EQ(as<PushReply>(again)->results.at(0).status, PushStatus::duplicate);
  EXPECT_EQ(as<PushReply>(again)->results.at(0).offset, as<PushReply>(first)->results.at(0).offset);
}

// Small log files and frequent checkpoints, so a leader reclaims its log within a test.
void reclaiming(NodeConfig& c) {
  c.segment_bytes = 2048;
  c.durable_every_ms = 20;
  c.durable_every_bytes = 4096;
  c.snapshot_chunk_bytes = 1000;  // a snapshot takes several chunks, split across files
  c.raft_purge_hold_ms = 300;     // a follower away longer gets a snapshot
}

// `n` KV writes through node l, each answered: entries that carry no message, in the system
// log, whose files checkpoints make reclaimable.
void write_kv(TestCluster& c, int l, int n) {
  for (int i = 0; i < n; ++i) {
    KvOp op;
    op.op = KvOpKind::put;
    op.ns = "ns";
    op.key = "k" + std::to_string(i % 10);
    op.value = std::to_string(i);
    op.forever = true;
    ReplyHandle h = c.send(l, KvCmd{{op}});
    ASSERT_TRUE(c.run_until(500, [&] { return c.take(l, h).has_value(); })) << i;
  }
}

// A cluster with reclaiming logs whose follower f (returned) is down with its disk wiped;
// `*leader` is the leader it was taken from.
int wipe_a_follower(TestCluster& c, int* leader) {
  EXPECT_TRUE(c.run_until(2000, [&] { return c.leader() >= 0; }));
  *leader = c.leader();
  int f = (*leader + 1) % 3;
  c.crash(f);
  c.wipe(f);
  return f;
}

// Appends go on past the snapshot follower f installed, and f restarts from what it holds:
// `want` and then "after".
void expect_appends_past_the_snapshot_survive_a_restart(TestCluster& c, int f,
                                                        std::vector<std::string> want) {
  ASSERT_NE(as<PushReply>(c.push(c.leader(), "after")), nullptr);
  ASSERT_TRUE(c.run_until(2000, [&] { return c.converged(); }));
  c.crash(f);
  c.start(f);
  ASSERT_TRUE(c.run_until(2000, [&] { return c.converged(); }));
  want.push_back("\"after\"");
  EXPECT_EQ(c.payloads(f), want);
  EXPECT_FALSE(c.env(f).fatal_called);
}

TEST(Cluster, AWipedFollowerIsBroughtBackByASnapshotOfTheReclaimedLog) {
  TestCluster c(3, reclaiming);
  int l = -1;
  int f = wipe_a_follower(c, &l);
  ASSERT_GE(l, 0);
  // Messages stay (their log files ship with the snapshot); KV writes go to the system log,
  // whose files the checkpoints make reclaimable.
  std::vector<std::string> pushed;
  for (int i = 0; i < 20; ++i) {
    pushed.push_back("m" + std::to_string(i));
    ASSERT_NE(as<PushReply>(c.push(l, pushed.back())), nullptr) << i;
  }
  ASSERT_NO_FATAL_FAILURE(write_kv(c, l, 200));
  c.run_ms(500);  // checkpoints come and go; the down follower holds nothing back
  ASSERT_GT(c.node(l).stats().log_files_reclaimed, 0u);
  c.start(f);
  ASSERT_TRUE(c.run_until(5000, [&] { return c.converged(); }));
  EXPECT_GE(c.node(l).stats().snapshots_sent, 1u);
  EXPECT_EQ(c.node(f).stats().snapshots_installed, 1u);
  std::vector<std::string> want;
  for (const auto& p : pushed) want.push_back("\"" + p + "\"");
  EXPECT_EQ(c.payloads(f), want);
  EXPECT_EQ(c.node(f).store().kv(), c.node(l).store().kv());
  expect_appends_past_the_snapshot_survive_a_restart(c, f, want);
}

// The log layout is each node's own: a snapshot ships the leader's log files (qlog/q1 or
// qlog/s<k>), the follower installs them and appends past them in its own layout, and a
// restart reads both back.
TEST(Cluster, NodesWithDifferentLogLayoutsInstallEachOthersSnapshots) {
  TestCluster c(3, reclaiming);
  int l = -1;
  int f = wipe_a_follower(c, &l);
  ASSERT_GE(l, 0);
  c.qlog_shards[l] = 0;
  c.qlog_shards[f] = 3;
  c.crash(l);  // the leader comes back with its layout; a new leader may be elected
  c.start(l);
  ASSERT_TRUE(c.run_until(3000, [&] { return c.leader() >= 0; }));
  int now = c.leader();
  std::vector<std::string> want;
  for (int i = 0; i < 20; ++i) {
    ASSERT_NE(as<PushReply>(c.push(now, "m" + std::to_string(i))), nullptr) << i;
    want.push_back("\"m" + std::to_string(i) + "\"");
  }
  ASSERT_NO_FATAL_FAILURE(write_kv(c, now, 200));
  c.run_ms(500);
  c.start(f);
  ASSERT_TRUE(c.run_until(5000, [&] { return c.converged(); }));
  EXPECT_EQ(c.node(f).stats().snapshots_installed, 1u);
  EXPECT_EQ(c.payloads(f), want);
  expect_appends_past_the_snapshot_survive_a_restart(c, f, want);
  bool own_layout = false;
  for (const FileInfo& file : c.env(f).list()) own_layout |= file.name.starts_with("qlog/s");
  EXPECT_TRUE(own_layout) << "the follower appends in its own layout";
}

TEST(Cluster, AFollowerAwayForLessThanTheHoldCatchesUpFromTheLog) {
  TestCluster c(3, [](NodeConfig& cfg) {
    reclaiming(cfg);
    cfg.raft_purge_hold_ms = 60'000;
  });
  ASSERT_TRUE(c.run_until(2000, [&] { return c.leader() >= 0; }));
  int l = c.leader();
  int f = (l + 1) % 3;
  c.crash(f);
  ASSERT_NO_FATAL_FAILURE(write_kv(c, l, 200));
  c.run_ms(500);
  c.start(f);
  ASSERT_TRUE(c.run_until(5000, [&] { return c.converged(); }));
  EXPECT_EQ(c.node(l).stats().snapshots_sent, 0u);  // the log it needed was kept for it
  EXPECT_EQ(c.node(f).store().kv(), c.node(l).store().kv());
}

TEST(Cluster, IsolatedLeaderCannotCommitAndItsUnansweredWriteIsCut) {
  TestCluster c(3);
  ASSERT_TRUE(c.run_until(2000, [&] { return c.leader() >= 0; }));
  int l = c.leader();
  ASSERT_NE(as<PushReply>(c.push(l, "a")), nullptr);
  c.isolate(l);
  ReplyHandle lost = c.send(l, c.push_cmd("never"));
  int l2 = -1;
  ASSERT_TRUE(c.run_until(3000, [&] {
    for (int i = 0; i < 3; ++i)
      if (i != l && c.node(i).raft_view().writable) l2 = i;
    return l2 >= 0;
  }));
  ASSERT_NE(as<PushReply>(c.push(l2, "b")), nullptr);
  EXPECT_FALSE(c.take(l, lost).has_value());
  c.heal();
  std::optional<Reply> r;
  ASSERT_TRUE(c.run_until(3000, [&] { return (r = c.take(l, lost)).has_value(); }));
  const auto* e = as<ErrorReply>(r);
  ASSERT_NE(e, nullptr) << "a write cut by the new leader must not be answered 201";
  EXPECT_FALSE(api::is_refusal(e->code)) << static_cast<int>(e->code);
  ASSERT_TRUE(c.run_until(3000, [&] { return c.converged(); }));
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(c.payloads(i), (std::vector<std::string>{"\"a\"", "\"b\""}));
}

TEST(Cluster, NewLeaderServesPopsOnlyAfterItsWaitAndHonoursEarlierLeases) {
  TestCluster c(3);
  ASSERT_TRUE(c.run_until(2000, [&] { return c.leader() >= 0; }));
  int l = c.leader();
  ASSERT_NE(as<PushReply>(c.push(l, "a")), nullptr);
  ASSERT_TRUE(c.run_until(200, [&] {
    PopCmd probe;
    probe.queue = "none";
    probe.group = "g";
    ReplyHandle h = c.send(l, probe);
    c.run_ms(1);
    auto r = c.take(l, h);
    return r && !as<ErrorReply>(r);
  }));
  PopCmd pop;
  pop.queue = "q";
  pop.group = "g";
  pop.batch = 1;
  pop.lease_time_s = 30;
  pop.subscription_mode = SubscriptionMode::all;
  ReplyHandle h = c.send(l, pop);
  std::optional<Reply> r;
  ASSERT_TRUE(c.run_until(300, [&] { return (r = c.take(l, h)).has_value(); }));
  ASSERT_NE(as<PopReply>(r), nullptr);
  ASSERT_EQ(as<PopReply>(r)->messages.size(), 1u);
  c.crash(l);
  ASSERT_TRUE(c.run_until(3000, [&] { return c.leader() >= 0; }));
  int l2 = c.leader();
  // Right after taking over, consumption waits a checkpoint interval plus the clock skew.
  auto early = c.take(l2, c.send(l2, pop));
  ASSERT_NE(as<ErrorReply>(early), nullptr);
  EXPECT_EQ(as<ErrorReply>(early)->code, api::Errc::not_leader);
  c.run_ms(100);
  // The lease granted by the old leader was committed with its checkpoint: still held.
  ReplyHandle again = c.send(l2, pop);
  ASSERT_TRUE(c.run_until(300, [&] { return (r = c.take(l2, again)).has_value(); }));
  ASSERT_NE(as<PopReply>(r), nullptr);
  EXPECT_TRUE(as<PopReply>(r)->messages.empty());
}

TEST(Cluster, ARetryUnderTheSameRequestIdGetsTheFirstAnswerFromTheNextLeader) {
  TestCluster c(3);
  ASSERT_TRUE(c.run_until(2000, [&] { return c.leader() >= 0; }));
  int l = c.leader();
  ASSERT_NE(as<PushReply>(c.push(l, "before")), nullptr);
  RequestId request{make_uuid_v7(1, 2, 3)};
  ReplyHandle h = c.send(l, c.push_cmd("once"), request);
  std::optional<Reply> first;
  ASSERT_TRUE(c.run_until(500, [&] { return (first = c.take(l, h)).has_value(); }));
  ASSERT_NE(as<PushReply>(first), nullptr);
  ASSERT_TRUE(c.run_until(500, [&] { return c.converged(); }));
  c.crash(l);
  ASSERT_TRUE(c.run_until(3000, [&] { return c.leader() >= 0; }));
  int l2 = c.leader();
  // The same request again (new message ids, as a client's resend would mint at the edge).
  ReplyHandle again = c.send(l2, c.push_cmd("once"), request);
  std::optional<Reply> second;
  ASSERT_TRUE(c.run_until(500, [&] { return (second = c.take(l2, again)).has_value(); }));
  const PushReply* a = as<PushReply>(first);
  const PushReply* b = as<PushReply>(second);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->results.at(0).status, PushStatus::queued) << "the recorded outcome, not a dedup";
  EXPECT_EQ(b->results.at(0).message_id, a->results.at(0).message_id);
  EXPECT_EQ(b->results.at(0).offset, a->results.at(0).offset);
  EXPECT_EQ(c.payloads(l2).size(), 2u);
}

// ---------------------------------------------------------------------------- pieces

TEST(ReplicatedEntry, RoundTripCarriesFramesAndHashes) {
  Entry e;
  e.index = LogIndex(7);
  e.term = Term(3);
  e.now_us = 123456;
  EffAppend a;
  a.pid = PartitionId(2);
  a.queue = QueueId(1);
  a.base = Offset(10);
  a.count = 2;
  a.hashes = {hash_of("x"), hash_of("y")};
  a.frames = {MessageFrame{Uuid{}, "x", "", "\"px\""}, MessageFrame{Uuid{}, "y", "t", "\"py\""}};
  e.effects.push_back(EffCreatePartition{PartitionId(2), QueueId(1), "p"});
  e.effects.push_back(a);
  Bytes b = encode_replicated(e);
  auto d = decode_replicated(b.data(), b.size());
  ASSERT_TRUE(d.ok());
  // A follower keeps the frames packed as the leader encoded them: the hashes are decoded,
  // and the entry writes (and replicates) the very same bytes.
  auto& got = std::get<EffAppend>(d.value().effects.at(1));
  EXPECT_EQ(got.hashes, a.hashes);
  EXPECT_TRUE(got.frames.empty());
  EXPECT_EQ(got.packed, encode_frames(a));
  EXPECT_EQ(encode_replicated(d.value()), b);
  got.packed.clear();
  got.frames = a.frames;
  EXPECT_EQ(d.value(), e);
  b.pop_back();
  EXPECT_FALSE(decode_replicated(b.data(), b.size()).ok());
}

TEST(ReplicatedEntry, DamagedFramesAreRefusedThoughKeptPacked) {
  Entry e;
  e.index = LogIndex(7);
  e.term = Term(3);
  EffAppend a;
  a.pid = PartitionId(2);
  a.queue = QueueId(1);
  a.count = 1;
  a.hashes = {hash_of("x")};
  a.frames = {MessageFrame{Uuid{}, "x", "", "\"px\""}};
  e.effects.push_back(a);
  Bytes b = encode_replicated(e);
  // The payload's length, the frame's third string, claims more bytes than follow: after
  // it come the quoted payload (4 bytes) and the empty producer_sub's length (4).
  size_t payload_len_at = b.size() - 4 - 4 - 4;
  b[payload_len_at] = 0x7f;
  EXPECT_FALSE(decode_replicated(b.data(), b.size()).ok());
}

TEST(HardState, LoadsTheNewestIntactSlot) {
  MemEnv env;
  EXPECT_EQ(load_hard_state(env, env.list()).value().term, Term(0));
  PersistedState s1{1, Term(4), NodeId(2), LogIndex(9)};
  PersistedState s2{2, Term(5), std::nullopt, LogIndex(11)};
  env.append(hard_state_file(1), encode_hard_state(s1));
  env.append(hard_state_file(2), encode_hard_state(s2));
  auto got = load_hard_state(env, env.list()).value();
  EXPECT_EQ(got.term, Term(5));
  EXPECT_FALSE(got.vote.has_value());
  EXPECT_EQ(got.commit, LogIndex(11));
  env.files[hard_state_file(2)].resize(10);  // torn while being rewritten
  got = load_hard_state(env, env.list()).value();
  EXPECT_EQ(got.term, Term(4));
  EXPECT_EQ(got.vote, NodeId(2));
}

TEST(LogWriter, TruncateToCutsAnEntryAndEverythingAfterIt) {
  MemEnv env;
  Outputs out;
  LogWriter w(out, 1 << 20);
  std::vector<WrittenEntry> written;
  for (uint64_t i = 1; i <= 3; ++i) {
    Entry e;
    e.index = LogIndex(i);
    e.term = Term(1);
    e.now_us = static_cast<int64_t>(i);
    written.push_back(w.write(e));
  }
  w.truncate_to(written[1].starts.at(0));
  carry_out(env, std::move(out));
  Store store;
  Outputs unused;
  LogWriter w2(unused, 1 << 20);
  RecoveryStats rs;
  ASSERT_TRUE(recover(env, env.list(), RecoveryOptions{}, &store, &w2, &rs).ok());
  EXPECT_EQ(store.applied(), LogIndex(1));
}

TEST(Recovery, EntriesPastThePersistedCommitAreHeldBackNotApplied) {
  MemEnv env;
  Outputs out;
  LogWriter w(out, 1 << 20);
  for (uint64_t i = 1; i <= 3; ++i) {
    Entry e;
    e.index = LogIndex(i);
    e.term = Term(i);
    e.now_us = static_cast<int64_t>(i);
    w.write(e);
  }
  carry_out(env, std::move(out));
  Store store;
  Outputs unused;
  LogWriter w2(unused, 1 << 20);
  RecoveryStats rs;
  RecoveryOptions opt;
  opt.apply_upto = 1;
  std::vector<RecoveredEntry> held;
  ASSERT_TRUE(recover(env, env.list(), opt, &store, &w2, &rs, &held).ok());
  EXPECT_EQ(store.applied(), LogIndex(1));
  ASSERT_EQ(held.size(), 2u);
  EXPECT_EQ(held[0].entry.index, LogIndex(2));
  EXPECT_EQ(held[1].entry.term, Term(3));
  EXPECT_FALSE(held[0].applied);
  EXPECT_FALSE(held[0].starts.empty());
}

}  // namespace
}  // namespace queen::testing
