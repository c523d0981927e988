// Raft: one test per rule of the Raft paper that the core relies on, a randomized cluster
// with message loss, duplication, reordering and crashes checked for election safety, log
// matching, leader completeness and state machine safety, and mutants the checks must catch.
#include <gtest/gtest.h>

#include <deque>
#include <map>
#include <memory>
#include <random>

#include "core/raft/raft.h"

namespace queen::raft {
namespace {

uint64_t next_random(void* ctx) {
  return (*static_cast<std::mt19937_64*>(ctx))();
}

// A configuration entry of these tests: 0xC0, then the voters and the learners as bit masks
// (bit i: node i + 1).
constexpr uint8_t kConfTag = 0xC0;
Bytes conf_data(const Membership& m) {
  uint8_t voters = 0, learners = 0;
  for (NodeId v : m.voters) voters |= uint8_t(1u << (v.value - 1));
  for (NodeId l : m.learners) learners |= uint8_t(1u << (l.value - 1));
  return Bytes{kConfTag, voters, learners};
}
std::optional<Membership> conf_of(const LogEntry& e) {
  if (e.data.size() != 3 || e.data[0] != kConfTag) return std::nullopt;
  Membership m;
  for (uint64_t i = 0; i < 8; ++i) {
    if (e.data[1] & (1u << i)) m.voters.push_back(NodeId(i + 1));
    if (e.data[2] & (1u << i)) m.learners.push_back(NodeId(i + 1));
  }
  return m;
}

// One node: Raft over an in-memory log whose unsynced tail a crash loses.
struct SimNode : LogView {
  NodeId id;
  std::vector<LogEntry> log;  // log[i] has index i+1
  size_t durable = 0;
  HardState hs;
  LogIndex applied;
  std::unique_ptr<Raft> raft;
  std::mt19937_64 rng;
  bool up = true;

  std::vector<LogEntry> entries(LogIndex from, LogIndex to, uint64_t bytes_max) const override {
    std::vector<LogEntry> out;
    uint64_t bytes = 0;
    for (uint64_t i = from.value + 1; i <= to.value && i <= log.size(); ++i) {
      if (!out.empty() && bytes + log[i - 1].data.size() > bytes_max) break;
      bytes += log[i - 1].data.size();
      out.push_back(log[i - 1]);
    }
    return out;
  }

  // `joins`: a node that is no member at first (it waits to be added).
  void start(const Config& base, LogIndex commit, bool joins = false) {
    TermRuns runs;
    for (const auto& e : log) runs.append(e.index, e.term);
    Config c = base;
    c.id = id;
    if (joins) c.membership = Membership{};
    raft = std::make_unique<Raft>(c, hs, std::move(runs), *this, commit, next_random, &rng);
    for (const auto& e : log)
      if (auto m = conf_of(e)) raft->on_membership_entry(e.index, *m);
  }
};

struct Cluster {
  Config base;
  std::vector<std::unique_ptr<SimNode>> nodes;
  std::deque<Message> net;
  std::mt19937_64 rng;
  uint32_t drop_pct = 0, dup_pct = 0;
  std::map<uint64_t, NodeId> leader_of_term;
  std::map<uint64_t, LogEntry> committed;  // index -> entry, once any node saw it commit
  std::string violation;
  uint64_t proposals = 0;
  uint32_t voters_at_start = 0;
  uint32_t change_per_mille = 0;  // a leader proposes a random membership change this often
  uint64_t changes = 0;           // proposed

  // `spare` more nodes start as no members, to be added as learners.
  Cluster(uint32_t n, uint64_t seed, uint32_t spare = 0) : rng(seed), voters_at_start(n) {
    for (uint32_t i = 1; i <= n; ++i) base.membership.voters.push_back(NodeId(i));
    for (uint32_t i = 1; i <= n + spare; ++i) {
      auto node = std::make_unique<SimNode>();
      node->id = NodeId(i);
      node->rng.seed(seed * 31 + i);
      node->start(base, LogIndex(0), i > n);
      nodes.push_back(std::move(node));
    }
  }

  SimNode& node(NodeId id) { return *nodes[id.value - 1]; }

  void fail(const std::string& what) {
    if (violation.empty()) violation = what;
  }

  void process(SimNode& n) {
    Ready r = n.raft->take_ready();
    if (r.hard_state) n.hs = *r.hard_state;
    if (r.truncate_after) {
      n.log.resize(r.truncate_after->value);
      n.durable = std::min(n.durable, n.log.size());
    }
    for (auto& e : r.append) {
      if (e.index.value != n.log.size() + 1) fail("append out of order");
      n.log.push_back(e);
      // A follower's caller reports the configurations it writes (the leader's took effect
      // when proposed).
      if (auto m = conf_of(e); m && e.index > n.raft->membership_index())
        n.raft->on_membership_entry(e.index, *m);
    }
    for (auto& m : r.messages) net.push_back(m);
    if (r.commit) check_commit(n, *r.commit);
    if (n.raft->role() == Role::leader) {
      auto [it, fresh] = leader_of_term.emplace(n.raft->term().value, n.id);
      if (!fresh && it->second != n.id) fail("election safety: two leaders in one term");
      if (n.raft->membership_index() <= n.raft->commit() && !n.raft->membership().is_voter(n.id))
        fail("a leader removed by a committed configuration still leads");
    }
  }

  void check_commit(SimNode& n, LogIndex commit) {
    for (uint64_t i = 1; i <= commit.value; ++i) {
      if (i > n.log.size()) return fail("commit beyond the log");
      auto [it, fresh] = committed.emplace(i, n.log[i - 1]);
      if (!fresh && !(it->second == n.log[i - 1]))
        return fail("state machine safety: two entries committed at index " + std::to_string(i));
    }
  }

  void sync_some() {
    for (auto& n : nodes) {
      if (!n->up || n->durable == n->log.size() || rng() % 3 == 0) continue;
      n->durable = n->log.size();
      n->raft->on_persisted(LogIndex(n->durable));
      process(*n);
    }
  }

  void deliver_some() {
    size_t k = net.size();  // everything sent so far, mildly reordered
    for (size_t i = 0; i < k && !net.empty(); ++i) {
      size_t pick = rng() % std::min<size_t>(net.size(), 3);  // mild reordering
      Message m = net[pick];
      net.erase(net.begin() + pick);
      if (rng() % 100 < drop_pct) continue;
      if (rng() % 100 < dup_pct) net.push_back(m);
      SimNode& to = node(m.to);
      if (!to.up) continue;
      to.raft->step(m);
      process(to);
    }
  }

  void crash(SimNode& n) {
    n.up = false;
    n.log.resize(n.durable);  // the unsynced tail is lost
  }

  void restart(SimNode& n) {
    n.up = true;
    n.start(base, LogIndex(0), n.id.value > voters_at_start);
  }

  // A random change of one member: add a spare node as a learner, promote a learner, demote
  // or remove a voter (the leader itself, too). Proposed only when the rule allows it.
  void maybe_change(SimNode& l) {
    Membership next = l.raft->membership();
    NodeId pick(rng() % nodes.size() + 1);
    auto drop = [](std::vector<NodeId>& v, NodeId id) { std::erase(v, id); };
    auto add = [](std::vector<NodeId>& v, NodeId id) {
      v.push_back(id);
      std::sort(v.begin(), v.end());
    };
    if (next.is_learner(pick)) {
      drop(next.learners, pick);
      if (rng() % 4 != 0) add(next.voters, pick);  // promoted, or removed
    } else if (next.is_voter(pick)) {
      drop(next.voters, pick);
      if (rng() % 2 == 0) add(next.learners, pick);  // demoted, or removed
    } else {
      add(next.learners, pick);
    }
    if (l.raft->check_change(next) != ChangeRefusal::none) return;
    l.raft->propose_membership(conf_data(next), next);
    ++changes;
  }

  void step_all() {
    for (auto& n : nodes) {
      if (!n->up) continue;
      n->raft->tick();
      if (n->raft->role() == Role::leader && rng() % 4 == 0) {
        Bytes data{static_cast<uint8_t>(proposals), static_cast<uint8_t>(proposals >> 8)};
        if (n->raft->propose(data)) ++proposals;
      }
      bool change = change_per_mille > 0 && n->raft->role() == Role::leader;
      if (change && rng() % 1000 < change_per_mille) maybe_change(*n);
      process(*n);
    }
    deliver_some();
    sync_some();
  }

  // Log matching: same index and term imply the same entries up to there.
  void check_log_matching() {
    for (auto& a : nodes)
      for (auto& b : nodes) {
        size_t n = std::min(a->log.size(), b->log.size());
        for (size_t i = n; i-- > 0;) {
          if (a->log[i].term != b->log[i].term) continue;
          for (size_t j = 0; j <= i; ++j)
            if (!(a->log[j] == b->log[j])) return fail("log matching violated");
          break;
        }
      }
  }

  // `steps` rounds; in one round of `one_in` on average a random node crashes (or, when down,
  // restarts). Stops at the first violation.
  void run_with_crashes(int steps, uint64_t one_in) {
    for (int t = 0; t < steps && violation.empty(); ++t) {
      step_all();
      if (rng() % one_in != 0) continue;
      SimNode& victim = *nodes[rng() % nodes.size()];
      if (victim.up) {
        crash(victim);
      } else {
        restart(victim);
      }
    }
  }

  std::optional<NodeId> leader() {
    for (auto& n : nodes)
      if (n->up && n->raft->role() == Role::leader) return n->id;
    return std::nullopt;
  }
};

TEST(RaftMessage, CodecRoundTrip) {
  Message m;
  m.type = MsgType::append;
  m.from = NodeId(1);
  m.to = NodeId(2);
  m.term = Term(3);
  m.index = LogIndex(4);
  m.log_term = Term(2);
  m.commit = LogIndex(3);
  m.force = true;
  m.entries = {LogEntry{LogIndex(5), Term(3), Bytes{1, 2, 3}}, LogEntry{LogIndex(6), Term(3), {}}};
  m.data = Bytes{7, 8};
  m.disk = 0x1234567890abcdefull;
  m.kinds = 2;
  Bytes b = encode_message(m);
  Message d;
  ASSERT_TRUE(decode_message(b.data(), b.size(), &d));
  EXPECT_EQ(d, m);
  // Cut anywhere, the message is refused, except right before the identity trailer: that is a
  // message of format 1, which carries none.
  size_t trailer = 4 + kIdentityTrailerBytes;
  for (size_t n = 0; n < b.size(); ++n) {
    bool decoded = decode_message(b.data(), n, &d);
    EXPECT_EQ(decoded, n == b.size() - trailer) << n;
  }
  Message old = m;
  old.disk = 0;
  old.kinds = 0;
  ASSERT_TRUE(decode_message(b.data(), b.size() - trailer, &d));
  EXPECT_EQ(d, old);
  // A later format's longer trailer: the fields known are read, the rest skipped.
  Bytes longer(b.begin(), b.end() - trailer);
  ByteWriter w(&longer);
  w.u32(kIdentityTrailerBytes + 3);
  w.u64(m.disk);
  w.u32(m.kinds);
  for (uint8_t x : {9, 9, 9}) w.u8(x);
  ASSERT_TRUE(decode_message(longer.data(), longer.size(), &d));
  EXPECT_EQ(d, m);
}

// A forged term or index at the top of the range would wrap on the next election or append:
// such a message is refused before it reaches Raft; the bounds themselves are accepted.
TEST(RaftMessage, TermsAndIndexesPastTheirBoundsAreRefused) {
  Message m;
  m.type = MsgType::append_resp;
  m.term = Term(kTermMax);
  m.commit = LogIndex(kLogIndexMax);
  m.entries = {LogEntry{LogIndex(kLogIndexMax), Term(kTermMax), {}}};
  EXPECT_TRUE(within_bounds(m));
  auto refused = [](Message x) { return !within_bounds(x); };
  Message t = m;
  t.term = Term(UINT64_MAX);
  EXPECT_TRUE(refused(t));
  Message lt = m;
  lt.log_term = Term(kTermMax + 1);
  EXPECT_TRUE(refused(lt));
  for (LogIndex Message::*field : {&Message::index, &Message::commit, &Message::hint}) {
    Message i = m;
    i.*field = LogIndex(kLogIndexMax + 1);
    EXPECT_TRUE(refused(i));
  }
  Message e = m;
  e.entries[0].term = Term(kTermMax + 1);
  EXPECT_TRUE(refused(e));
  e = m;
  e.entries[0].index = LogIndex(UINT64_MAX);
  EXPECT_TRUE(refused(e));
}

TEST(Raft, SingleVoterElectsItselfAndCommitsOnItsOwnSync) {
  Cluster c(1, 1);
  for (int i = 0; i < 30 && !c.leader(); ++i) c.step_all();
  ASSERT_TRUE(c.leader());
  SimNode& n = c.node(NodeId(1));
  auto idx = n.raft->propose(Bytes{9});
  ASSERT_TRUE(idx);
  c.process(n);
  EXPECT_LT(n.raft->commit(), *idx);  // not durable yet: not committed
  n.durable = n.log.size();
  n.raft->on_persisted(LogIndex(n.durable));
  EXPECT_EQ(n.raft->commit(), *idx);
}

TEST(Raft, ElectionSafetyAndLogMatchingUnderLossDuplicationAndCrashes) {
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    Cluster c(seed % 2 ? 3 : 5, seed);
    c.drop_pct = 10;
    c.dup_pct = 5;
    c.run_with_crashes(600, 50);
    for (auto& n : c.nodes)
      if (!n->up) c.restart(*n);
    c.drop_pct = c.dup_pct = 0;
    for (int t = 0; t < 400 && c.violation.empty(); ++t) c.step_all();
    c.check_log_matching();
    ASSERT_EQ(c.violation, "") << "seed " << seed;
    // Liveness once faults stop: a leader exists and commits its own term's entries.
    ASSERT_TRUE(c.leader()) << "seed " << seed;
    EXPECT_GT(c.committed.size(), 0u) << "seed " << seed;
  }
}

TEST(Raft, LeaderCompletenessCommittedEntriesSurviveEveryLeaderChange) {
  Cluster c(3, 77);
  for (int t = 0; t < 300; ++t) c.step_all();
  ASSERT_TRUE(c.leader());
  size_t committed = c.committed.size();
  ASSERT_GT(committed, 0u);
  for (int round = 0; round < 5; ++round) {
    NodeId old = *c.leader();
    c.crash(c.node(old));
    for (int t = 0; t < 300 && (!c.leader() || *c.leader() == old); ++t) c.step_all();
    ASSERT_TRUE(c.leader());
    SimNode& l = c.node(*c.leader());
    for (const auto& [idx, e] : c.committed) {
      ASSERT_LE(idx, l.log.size());
      EXPECT_EQ(l.log[idx - 1], e);
    }
    c.restart(c.node(old));
  }
  EXPECT_EQ(c.violation, "");
}

TEST(Raft, PreVoteKeepsAPartitionedNodeFromRaisingTheTerm) {
  Cluster c(3, 5);
  for (int t = 0; t < 200 && !c.leader(); ++t) c.step_all();
  ASSERT_TRUE(c.leader());
  for (int t = 0; t < 50; ++t) c.step_all();
  NodeId cut = c.leader()->value == 1 ? NodeId(2) : NodeId(1);
  Term before = c.node(cut).raft->term();
  // Cut one follower off: it ticks alone for many election timeouts.
  for (int t = 0; t < 200; ++t) {
    c.node(cut).raft->tick();
    c.node(cut).raft->take_ready();  // its messages go nowhere
  }
  EXPECT_EQ(c.node(cut).raft->term(), before);
  EXPECT_EQ(c.node(cut).raft->stats().elections, 0u);  // it never became a candidate
}

TEST(Raft, CheckQuorumLeaderStepsDownWhenItHearsFromNoMajority) {
  Cluster c(3, 9);
  for (int t = 0; t < 200 && !c.leader(); ++t) c.step_all();
  ASSERT_TRUE(c.leader());
  SimNode& l = c.node(*c.leader());
  for (int t = 0; t < 100; ++t) {
    l.raft->tick();
    l.raft->take_ready();  // isolated: nothing arrives, nothing leaves
  }
  EXPECT_NE(l.raft->role(), Role::leader);
  EXPECT_GE(l.raft->stats().step_downs_check_quorum, 1u);
}

TEST(Raft, CommitNeedsAMajorityOfDurableCopies) {
  Cluster c(3, 11);
  for (int t = 0; t < 200 && !c.leader(); ++t) c.step_all();
  ASSERT_TRUE(c.leader());
  for (int t = 0; t < 50; ++t) c.step_all();
  SimNode& l = c.node(*c.leader());
  LogIndex before = l.raft->commit();
  auto idx = l.raft->propose(Bytes{42});
  c.process(l);
  l.durable = l.log.size();
  l.raft->on_persisted(LogIndex(l.durable));
  c.process(l);
  // Deliver appends but let no follower sync: the entry must not commit.
  while (!c.net.empty()) {
    Message m = c.net.front();
    c.net.pop_front();
    SimNode& to = c.node(m.to);
    to.raft->step(m);
    Ready r = to.raft->take_ready();
    for (auto& e : r.append) to.log.push_back(e);
    for (auto& out : r.messages) c.net.push_back(out);
    if (c.net.size() > 100) break;
  }
  EXPECT_LT(l.raft->commit(), *idx);
  EXPECT_GE(l.raft->commit(), before);
}

TEST(Raft, LeadershipTransferHandsOverToACaughtUpVoter) {
  Cluster c(3, 13);
  for (int t = 0; t < 200 && !c.leader(); ++t) c.step_all();
  for (int t = 0; t < 50; ++t) c.step_all();
  NodeId old = *c.leader();
  NodeId target = old.value == 3 ? NodeId(1) : NodeId(old.value + 1);
  ASSERT_TRUE(c.node(old).raft->transfer_leadership(target));
  c.process(c.node(old));
  for (int t = 0; t < 100 && c.leader() != target; ++t) {
    c.deliver_some();
    c.sync_some();
  }
  EXPECT_EQ(c.leader(), target);
  EXPECT_EQ(c.violation, "");
}

TEST(Raft, AFollowerBelowTheCompactedLogIsSentASnapshotThenAppendsResume) {
  Cluster c(3, 17);
  for (int t = 0; t < 200 && !c.leader(); ++t) c.step_all();
  ASSERT_TRUE(c.leader());
  NodeId lid = *c.leader();
  SimNode& f = c.node(lid.value == 3 ? NodeId(1) : NodeId(lid.value + 1));
  c.crash(f);
  for (int t = 0; t < 100; ++t) c.step_all();
  SimNode& l = c.node(lid);
  ASSERT_EQ(c.leader(), lid);
  LogIndex upto = l.raft->commit();
  ASSERT_GT(upto.value, 20u);
  l.raft->compact(upto);
  // The follower comes back with an empty log: it can only get a snapshot.
  f.log.clear();
  f.durable = 0;
  c.restart(f);
  std::optional<Message> ask;
  for (int t = 0; t < 50 && !ask; ++t) {
    c.step_all();
    for (const Message& m : c.net) {
      if (m.to == f.id && m.type == MsgType::snapshot) ask = m;
      bool stale = m.to == f.id && m.type == MsgType::append && !m.entries.empty() &&
                   m.entries.front().index <= upto;
      EXPECT_FALSE(stale) << "an append of a compacted entry";
    }
  }
  ASSERT_TRUE(ask);
  EXPECT_EQ(ask->index, upto);
  EXPECT_EQ(ask->log_term, *l.raft->term_of(upto));
  // Installing it: the follower restarts with everything up to there, committed; the
  // leader's appends pick up after it.
  f.log.assign(l.log.begin(), l.log.begin() + static_cast<ptrdiff_t>(upto.value));
  f.durable = f.log.size();
  f.start(c.base, upto);
  f.raft->compact(upto);
  for (int t = 0; t < 200 && f.raft->commit() < l.raft->commit(); ++t) c.step_all();
  EXPECT_EQ(f.raft->commit(), l.raft->commit());
  c.check_log_matching();
  EXPECT_EQ(c.violation, "");
}

TEST(Raft, AnAppendBelowARestoredSnapshotIsAnsweredWithItsCommitIndex) {
  struct NoLog : LogView {
    std::vector<LogEntry> entries(LogIndex, LogIndex, uint64_t) const override { return {}; }
  } none;
  std::mt19937_64 rng(5);
  Config cfg;
  cfg.id = NodeId(2);
  cfg.membership.voters = {NodeId(1), NodeId(2), NodeId(3)};
  TermRuns runs;
  runs.reset(LogIndex(10), Term(2));  // a snapshot at 10: nothing known below
  Raft r(cfg, HardState{Term(3), std::nullopt}, runs, none, LogIndex(10), next_random, &rng);
  r.compact(LogIndex(10));
  Message m;
  m.type = MsgType::append;
  m.from = NodeId(1);
  m.to = NodeId(2);
  m.term = Term(3);
  m.index = LogIndex(5);
  m.log_term = Term(1);
  m.commit = LogIndex(11);
  for (uint64_t i = 6; i <= 12; ++i)
    m.entries.push_back(LogEntry{LogIndex(i), Term(i > 10 ? 3 : 2), {}});
  r.step(m);
  Ready rd = r.take_ready();
  ASSERT_EQ(rd.append.size(), 2u);  // only what lies past the snapshot
  EXPECT_EQ(rd.append.front().index, LogIndex(11));
  EXPECT_FALSE(rd.truncate_after);
  r.on_persisted(LogIndex(12));
  rd = r.take_ready();
  ASSERT_EQ(rd.messages.size(), 1u);
  EXPECT_FALSE(rd.messages[0].reject);
  EXPECT_EQ(rd.messages[0].hint, LogIndex(12));
  EXPECT_EQ(r.commit(), LogIndex(11));
  // A heartbeat probing far below: answered with what it holds, not refused.
  Message hb = m;
  hb.entries.clear();
  hb.index = LogIndex(3);
  r.step(hb);
  rd = r.take_ready();
  ASSERT_EQ(rd.messages.size(), 1u);
  EXPECT_FALSE(rd.messages[0].reject);
  EXPECT_EQ(rd.messages[0].hint, LogIndex(11));
}

// Runs a cluster of 3 voters and 2 spare nodes through random membership changes under loss,
// duplication and crashes; returns the first violation ("" for none) and counts the changes.
std::string run_membership(uint64_t seed, const Config& mutants, uint64_t* changes) {
  Cluster c(3, seed, 2);
  c.base.mutant_learner_in_quorum = mutants.mutant_learner_in_quorum;
  c.base.mutant_changes_in_flight = mutants.mutant_changes_in_flight;
  c.base.mutant_removed_leader_serves = mutants.mutant_removed_leader_serves;
  for (auto& n : c.nodes) n->start(c.base, LogIndex(0), n->id.value > 3);
  c.change_per_mille = 40;
  c.drop_pct = 10;
  c.dup_pct = 5;
  c.run_with_crashes(800, 60);
  for (auto& n : c.nodes)
    if (!n->up) c.restart(*n);
  c.drop_pct = c.dup_pct = 0;
  c.change_per_mille = 0;
  for (int t = 0; t < 400 && c.violation.empty(); ++t) c.step_all();
  c.check_log_matching();
  if (c.violation.empty() && !c.leader()) {
    std::string why = "no leader once the faults stopped:";
    for (auto& n : c.nodes) {
      const Membership& m = n->raft->membership();
      why += " [" + std::to_string(n->id.value) + " role " + std::to_string(int(n->raft->role())) +
             " term " + std::to_string(n->raft->term().value) + " last " +
             std::to_string(n->raft->last_index().value) + " commit " +
             std::to_string(n->raft->commit().value) + " conf@" +
             std::to_string(n->raft->membership_index().value) + " v";
      for (NodeId v : m.voters) why += std::to_string(v.value);
      why += " l";
      for (NodeId v : m.learners) why += std::to_string(v.value);
      why += "]";
    }
    c.fail(why);
  }
  *changes += c.changes;
  return c.violation;
}

TEST(RaftMembership, ChangesUnderFaultsKeepEverySafetyProperty) {
  uint64_t changes = 0;
  for (uint64_t seed = 1; seed <= 40; ++seed)
    ASSERT_EQ(run_membership(seed, Config{}, &changes), "") << "seed " << seed;
  EXPECT_GT(changes, 100u);  // the runs did change the membership, many times
}

// Three voters; the leader is elected and has committed an entry of its term.
Cluster settled_cluster(uint64_t seed, uint32_t spare) {
  Cluster c(3, seed, spare);
  for (int t = 0; t < 300 && !(c.leader() && c.node(*c.leader()).raft->commit().value > 0); ++t)
    c.step_all();
  return c;
}

TEST(RaftMembership, AChangeWaitsForTheLeadersOwnTermAndForTheChangeBefore) {
  Cluster c(3, 21, 1);
  for (int t = 0; t < 300 && !c.leader(); ++t) {
    for (auto& n : c.nodes) n->raft->tick();
    for (auto& n : c.nodes) c.process(*n);
    c.deliver_some();  // no sync: nothing commits
  }
  ASSERT_TRUE(c.leader());
  SimNode& l = c.node(*c.leader());
  Membership next = l.raft->membership();
  next.learners = {NodeId(4)};
  EXPECT_EQ(l.raft->check_change(next), ChangeRefusal::not_settled);
  for (int t = 0; t < 100 && l.raft->check_change(next) != ChangeRefusal::none; ++t) c.step_all();
  ASSERT_EQ(l.raft->check_change(next), ChangeRefusal::none);
  ASSERT_TRUE(l.raft->propose_membership(conf_data(next), next));
  EXPECT_EQ(l.raft->membership(), next);  // in use once in the log
  Membership after = next;
  after.learners = {};
  after.voters.push_back(NodeId(4));
  EXPECT_EQ(l.raft->check_change(after), ChangeRefusal::in_flight);
  Membership two = l.raft->membership();
  two.voters = {NodeId(1)};
  c.process(l);
  for (int t = 0; t < 100 && l.raft->membership_index() > l.raft->commit(); ++t) c.step_all();
  ASSERT_LE(l.raft->membership_index(), l.raft->commit());
  EXPECT_EQ(l.raft->check_change(two), ChangeRefusal::two_voters);
  EXPECT_EQ(l.raft->check_change(Membership{}), ChangeRefusal::no_voter_left);
}

TEST(RaftMembership, ALearnerGetsTheLogButIsNeverCounted) {
  Cluster c = settled_cluster(23, 1);
  ASSERT_TRUE(c.leader());
  SimNode& l = c.node(*c.leader());
  Membership next = l.raft->membership();
  next.learners = {NodeId(4)};
  ASSERT_TRUE(l.raft->propose_membership(conf_data(next), next));
  for (int t = 0; t < 100; ++t) c.step_all();
  SimNode& learner = c.node(NodeId(4));
  EXPECT_EQ(learner.log.size(), l.log.size());  // caught up by appends
  EXPECT_EQ(learner.raft->role(), Role::follower);
  EXPECT_EQ(learner.raft->stats().elections, 0u);  // a learner never campaigns
  // With both other voters down, the leader and the learner hold an entry: it must not commit.
  for (auto& n : c.nodes)
    if (n->id != l.id && n->id != NodeId(4)) c.crash(*n);
  auto idx = l.raft->propose(Bytes{7});
  ASSERT_TRUE(idx);
  for (int t = 0; t < 5; ++t) c.step_all();
  EXPECT_GE(c.node(NodeId(4)).log.size(), idx->value);
  EXPECT_LT(l.raft->commit(), *idx);
}

TEST(RaftMembership, ALeaderThatRemovesItselfStepsDownOnceTheChangeCommits) {
  Cluster c = settled_cluster(25, 0);
  ASSERT_TRUE(c.leader());
  NodeId old = *c.leader();
  SimNode& l = c.node(old);
  uint64_t elections = l.raft->stats().elections;
  Membership next = l.raft->membership();
  std::erase(next.voters, old);
  ASSERT_TRUE(l.raft->propose_membership(conf_data(next), next));
  EXPECT_EQ(l.raft->role(), Role::leader);  // until the change commits
  for (int t = 0; t < 300 && (!c.leader() || *c.leader() == old); ++t) c.step_all();
  ASSERT_TRUE(c.leader());
  EXPECT_NE(*c.leader(), old);
  EXPECT_NE(l.raft->role(), Role::leader);
  for (int t = 0; t < 100; ++t) c.step_all();
  EXPECT_EQ(l.raft->stats().elections, elections);  // removed, it never campaigns
  EXPECT_EQ(c.violation, "");
}

// From cluster format 2 on, a leader sends entries only to a member that said it reads the
// format (an older build added later would take entries it cannot read); the others get
// heartbeats alone, and commit goes on with the members that read it.
TEST(RaftFormat, EntriesGoOnlyToAMemberHeardToReadTheClusterFormat) {
  Cluster c = settled_cluster(27, 0);
  ASSERT_TRUE(c.leader());
  SimNode& l = c.node(*c.leader());
  l.raft->set_cluster_format(3);
  SimNode& newer = c.node(NodeId(l.id.value % 3 + 1));
  SimNode& older = c.node(NodeId((l.id.value + 1) % 3 + 1));
  c.crash(newer);
  c.base.kinds = 3;  // the other nodes keep saying 1
  c.restart(newer);
  size_t older_had = older.log.size();
  LogIndex last;
  for (int t = 0; t < 200; ++t) {
    if (auto idx = l.raft->propose(Bytes{static_cast<uint8_t>(t)})) last = *idx;
    c.step_all();
  }
  for (int t = 0; t < 20; ++t) c.step_all();  // the last proposals reach the newer node
  ASSERT_EQ(*c.leader(), l.id);
  EXPECT_EQ(older.log.size(), older_had);
  EXPECT_TRUE(l.raft->reads_cluster_format(newer.id));
  EXPECT_FALSE(l.raft->reads_cluster_format(older.id));
  EXPECT_GE(newer.log.size(), last.value);
  EXPECT_GE(l.raft->commit(), last);
  // Back at format 1, the older node catches up.
  l.raft->set_cluster_format(1);
  for (int t = 0; t < 100; ++t) c.step_all();
  EXPECT_EQ(older.log.size(), l.log.size());
  EXPECT_EQ(c.violation, "");
}

// The identity fence counts no vote from a disk other than the pinned one, but a leader's log
// is taken from any disk: a follower whose configuration predates the leader's new disk learns
// the configuration that admitted it only from that log.
TEST(RaftFence, ALeadersLogIsTakenFromAnyDiskItsVoteRequestsAreNot) {
  SimNode f;
  f.id = NodeId(2);
  Config c;
  c.disk = 22;
  c.membership.voters = {NodeId(1), NodeId(2), NodeId(3)};
  c.membership.disks = {{NodeId(1), 11}, {NodeId(2), 22}, {NodeId(3), 33}};
  f.start(c, LogIndex(0));
  Message vote;
  vote.type = MsgType::vote;
  vote.from = NodeId(1);
  vote.to = f.id;
  vote.term = Term(5);
  vote.disk = 99;  // node 1 on a new disk
  f.raft->step(vote);
  EXPECT_EQ(f.raft->term(), Term(0));
  EXPECT_TRUE(f.raft->take_ready().messages.empty());
  Message append = vote;
  append.type = MsgType::append;
  append.entries = {LogEntry{LogIndex(1), Term(5), Bytes{1}}};
  f.raft->step(append);
  Ready r = f.raft->take_ready();
  EXPECT_EQ(f.raft->term(), Term(5));
  EXPECT_EQ(f.raft->leader(), NodeId(1));
  ASSERT_EQ(r.append.size(), 1u);
  EXPECT_EQ(r.append[0].index, LogIndex(1));
}

bool membership_mutant_caught(Config mutant) {
  uint64_t changes = 0;
  for (uint64_t seed = 1; seed <= 100; ++seed)
    if (!run_membership(seed, mutant, &changes).empty()) return true;
  return false;
}

TEST(RaftMutants, ALearnerCountedInTheQuorumIsCaught) {
  Config m;
  m.mutant_learner_in_quorum = true;
  EXPECT_TRUE(membership_mutant_caught(m));
}
TEST(RaftMutants, TwoChangesInFlightAreCaught) {
  Config m;
  m.mutant_changes_in_flight = true;
  EXPECT_TRUE(membership_mutant_caught(m));
}
TEST(RaftMutants, ARemovedLeaderThatLeadsOnIsCaught) {
  Config m;
  m.mutant_removed_leader_serves = true;
  EXPECT_TRUE(membership_mutant_caught(m));
}

// The checks are not vacuous: planted bugs are caught within a bounded seed range.
bool mutant_caught(bool commit_without_majority, bool vote_twice) {
  for (uint64_t seed = 1; seed <= 100; ++seed) {
    Cluster c(3, seed);
    c.base.mutant_commit_without_majority = commit_without_majority;
    c.base.mutant_vote_twice = vote_twice;
    for (auto& n : c.nodes) n->start(c.base, LogIndex(0));
    c.drop_pct = 15;
    c.run_with_crashes(600, 40);
    c.check_log_matching();
    if (!c.violation.empty()) return true;
  }
  return false;
}

TEST(RaftMutants, CommitWithoutMajorityIsCaught) {
  EXPECT_TRUE(mutant_caught(true, false));
}
TEST(RaftMutants, VoteTwiceIsCaught) {
  EXPECT_TRUE(mutant_caught(false, true));
}

}  // namespace
}  // namespace queen::raft
