// The identity fence and the cluster format version, on in-memory clusters: a voter whose disk
// was wiped comes back under its old id and is neither counted nor voted for until it is
// removed and added back; the leader raises the cluster version only once every member reads
// it, and pins each member's disk once it does.
#include <gtest/gtest.h>

#include "tests/core/test_cluster.h"

namespace queen::testing {
namespace {

void fast_identity(NodeConfig& c) {
  c.cluster_version_ms = 50;
}

std::optional<MembershipReply> view(TestCluster& c, int i) {
  auto r = c.membership(i, MembershipCmd{});
  const auto* m = as<MembershipReply>(r);
  if (m == nullptr) return std::nullopt;
  return *m;
}

// The refusal code of a membership answer ("" when it took effect, "none" with no answer).
std::string code_of(const std::optional<Reply>& r) {
  const auto* m = as<MembershipReply>(r);
  return m ? m->code : "none";
}

// Asks for a change until it is not refused as in_flight (the leader's identity round logs
// changes of its own); the final code.
std::string change(TestCluster& c, int leader, const MembershipCmd& cmd) {
  std::string code;
  c.run_until(3000, [&] {
    code = code_of(c.membership(leader, cmd));
    return code != "in_flight";
  });
  return code;
}

const MemberView* member(const MembershipReply& r, int i) {
  for (const MemberView& m : r.members)
    if (m.id.value == static_cast<uint64_t>(i) + 1) return &m;
  return nullptr;
}

// Every member pinned to the disk it speaks from, at the newest cluster version.
bool all_pinned(TestCluster& c, int leader) {
  auto v = view(c, leader);
  if (!v || v->cluster_version != kFormatMax) return false;
  for (const MemberView& m : v->members)
    if (m.disk == 0 || m.disk != m.heard_disk) return false;
  return true;
}

bool fenced(TestCluster& c, int leader, int i) {
  auto v = view(c, leader);
  const MemberView* m = v ? member(*v, i) : nullptr;
  return m != nullptr && m->disk != 0 && m->heard_disk != 0 && m->disk != m->heard_disk;
}

struct Wiped {
  int leader = -1;
  int wiped = -1;
  int other = -1;
};

// A pinned cluster of three whose follower `wiped` restarted on an empty disk.
Wiped wipe_a_pinned_follower(TestCluster& c) {
  Wiped w;
  EXPECT_TRUE(c.run_until(2000, [&] { return c.leader() >= 0; }));
  w.leader = c.leader();
  EXPECT_TRUE(c.run_until(3000, [&] { return all_pinned(c, w.leader); }));
  EXPECT_NE(as<PushReply>(c.push(w.leader, "before")), nullptr);
  w.wiped = (w.leader + 1) % 3;
  w.other = (w.leader + 2) % 3;
  c.crash(w.wiped);
  c.wipe(w.wiped);
  c.start(w.wiped);
  EXPECT_TRUE(c.run_until(2000, [&] { return fenced(c, w.leader, w.wiped); }));
  return w;
}

TEST(IdentityFence, AWipedVoterIsNotCountedUntilRemovedAndAddedBack) {
  TestCluster c(3, fast_identity);
  Wiped w = wipe_a_pinned_follower(c);
  // It still gets the log, and learns that it is fenced: it never campaigns.
  ASSERT_TRUE(c.run_until(2000, [&] { return c.node(w.wiped).raft_view().fenced; }));
  uint64_t term = c.node(w.wiped).raft_view().term;
  EXPECT_GT(c.node(w.leader).stats().raft_messages_fenced, 0u);
  // With the other follower down, the leader and the wiped disk are no majority.
  c.crash(w.other);
  EXPECT_EQ(as<PushReply>(c.push(w.leader, "unsafe", 1000)), nullptr);
  EXPECT_EQ(c.node(w.wiped).raft_view().role, std::string("follower"));
  EXPECT_LE(c.node(w.wiped).raft_view().term, term + 1);
  c.start(w.other);
  ASSERT_TRUE(c.run_until(3000, [&] { return c.leader() >= 0; }));
  int l = c.leader();
  ASSERT_NE(l, w.wiped);
  // The runbook: remove it, add it back as a learner, promote it.
  MembershipCmd remove{MembershipOp::remove, {NodeId(w.wiped + 1)}, NodeId(0), "", ""};
  ASSERT_NE(as<MembershipReply>(c.membership(l, remove)), nullptr);
  MembershipCmd add{MembershipOp::add_learner, {}, NodeId(w.wiped + 1), "r:1", "h:1"};
  auto added = c.membership(l, add);
  ASSERT_NE(as<MembershipReply>(added), nullptr);
  EXPECT_EQ(as<MembershipReply>(added)->code, "");
  ASSERT_TRUE(c.run_until(3000, [&] { return all_pinned(c, l); }));
  MembershipCmd promote{MembershipOp::promote, {NodeId(w.wiped + 1)}, NodeId(0), "", ""};
  ASSERT_EQ(change(c, l, promote), "");  // in_flight while the leader's pin commits
  // Now it counts: the leader and the re-added node commit without the third.
  int third = 3 - l - w.wiped;
  c.crash(third);
  EXPECT_NE(as<PushReply>(c.push(l, "counted", 1000)), nullptr);
}

// The planted bug: without the fence, the wiped disk is counted, and the push the test above
// refuses commits on a single durable copy.
TEST(IdentityFence, WithoutTheFenceTheWipedDiskIsCounted) {
  TestCluster c(3, [](NodeConfig& n) {
    fast_identity(n);
    n.mutants.no_fence = true;
  });
  EXPECT_TRUE(c.run_until(2000, [&] { return c.leader() >= 0; }));
  int l = c.leader();
  EXPECT_TRUE(c.run_until(3000, [&] {
    auto v = view(c, l);
    return v && v->cluster_version == kFormatMax;
  }));
  int f = (l + 1) % 3;
  c.crash(f);
  c.wipe(f);
  c.start(f);
  c.crash((l + 2) % 3);
  EXPECT_NE(as<PushReply>(c.push(l, "unsafe", 1000)), nullptr);
}

TEST(ClusterVersion, RisesOnlyOnceEveryMemberReadsIt) {
  // An older build stands in for node 3 (started again before any time passed): the version of
  // a new cluster with it stays 1, and no disk is pinned.
  TestCluster old(3, fast_identity);
  old.format_max[2] = 1;
  old.crash(2);
  old.wipe(2);
  old.start(2);
  ASSERT_TRUE(old.run_until(2000, [&] { return old.leader() >= 0; }));
  old.run_ms(1000);
  int l = old.leader();
  auto v = view(old, l);
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->cluster_version, 1u);
  for (const MemberView& m : v->members) EXPECT_EQ(m.disk, 0u) << m.id.value;
  ASSERT_NE(as<PushReply>(old.push(l, "mixed")), nullptr);
  // Node 3 is upgraded (restarted on the new build): the version rises, the disks are pinned,
  // and no node was ever sent an entry it could not read.
  old.format_max.erase(2);
  old.crash(2);
  old.start(2);
  ASSERT_TRUE(
      old.run_until(3000, [&] { return old.leader() >= 0 && all_pinned(old, old.leader()); }));
  for (int i = 0; i < 3; ++i) EXPECT_EQ(old.node(i).stats().entries_unreadable, 0u) << i;
}

// Whether every live node's rows of q/p keep their hashes in memory (`inline_rows`) or not.
bool rows_are(TestCluster& c, bool inline_rows) {
  for (int i = 0; i < 3; ++i) {
    const PartitionState* p = c.node(i).store().partition("q", "p");
    if (!p || p->rows.empty() || p->rows.back().hashes_inline() != inline_rows) return false;
  }
  return true;
}

// Below cluster format 3 append rows keep their hashes in memory and checkpoints, which a
// format-2 build reads; once every member reads format 3, new rows keep them only in their
// message records. Retries of pushes from both sides of the change are still duplicates.
TEST(ClusterVersion, RowsLeaveTheirHashesOnDiskOnlyFromFormatThree) {
  TestCluster c(3, fast_identity);
  c.format_max[2] = 2;
  // Node 3 restarts on the build `format_max` says; the leader then settles on `version`, and
  // a push lands as rows of the expected kind on every node.
  auto step = [&](uint32_t version, const std::string& txn, bool inline_rows) {
    c.crash(2);
    c.start(2);
    ASSERT_TRUE(c.run_until(3000, [&] {
      auto v = c.leader() >= 0 ? view(c, c.leader()) : std::nullopt;
      return v && v->cluster_version == version;
    }));
    ASSERT_NE(as<PushReply>(c.push(c.leader(), txn)), nullptr);
    ASSERT_TRUE(c.run_until(1000, [&] { return c.converged() && rows_are(c, inline_rows); }));
  };
  step(2, "before", true);
  c.format_max.erase(2);
  step(3, "after", false);
  for (const char* txn : {"before", "after"}) {
    auto reply = c.push(c.leader(), txn);
    const auto* r = as<PushReply>(reply);
    ASSERT_NE(r, nullptr) << txn;
    EXPECT_EQ(r->results.at(0).status, PushStatus::duplicate) << txn;
  }
}

// An older build added once the version has risen (an operator re-adds a lost node on an old
// binary) is sent no entry it cannot read: it gets heartbeats alone, and promoting it is
// refused. Once upgraded, it catches up and is promoted.
TEST(ClusterVersion, AnOlderBuildAddedLaterGetsNoEntryUntilItIsUpgraded) {
  TestCluster c(3, fast_identity);
  ASSERT_TRUE(c.run_until(2000, [&] { return c.leader() >= 0; }));
  int l = c.leader();
  ASSERT_TRUE(c.run_until(3000, [&] { return all_pinned(c, l); }));
  int old = (l + 1) % 3;
  MembershipCmd remove{MembershipOp::remove, {NodeId(old + 1)}, NodeId(0), "", ""};
  ASSERT_EQ(change(c, l, remove), "");
  ASSERT_NE(as<PushReply>(c.push(l, "before")), nullptr);
  c.crash(old);
  c.wipe(old);
  c.format_max[old] = 1;
  c.joins.insert(old);
  c.start(old);
  MembershipCmd add{MembershipOp::add_learner, {}, NodeId(old + 1), "r:1", "h:1"};
  ASSERT_EQ(change(c, l, add), "");
  c.run_ms(500);
  EXPECT_EQ(c.node(old).raft_view().last_index, 0u);
  EXPECT_EQ(c.node(old).stats().entries_unreadable, 0u);
  MembershipCmd promote{MembershipOp::promote, {NodeId(old + 1)}, NodeId(0), "", ""};
  ASSERT_EQ(change(c, l, promote), "learner_behind");
  auto refused = c.membership(l, promote);
  ASSERT_NE(as<MembershipReply>(refused), nullptr);
  EXPECT_NE(as<MembershipReply>(refused)->error.find("reads cluster format 1"), std::string::npos)
      << as<MembershipReply>(refused)->error;
  c.format_max.erase(old);
  c.crash(old);
  c.start(old);
  ASSERT_TRUE(c.run_until(
      3000, [&] { return c.node(old).raft_view().applied >= c.node(l).raft_view().commit; }));
  std::string code;  // in_flight while the leader pins the upgraded disk: asked again
  EXPECT_TRUE(c.run_until(3000, [&] { return (code = code_of(c.membership(l, promote))).empty(); }))
      << code;
  EXPECT_EQ(c.payloads(old), c.payloads(l));
}

// The planted bug: a leader that raises the version without asking sends node 3 an entry it
// cannot read.
TEST(ClusterVersion, AnUngatedRaiseIsCaught) {
  TestCluster c(3, [](NodeConfig& n) {
    fast_identity(n);
    n.mutants.ungated_version = true;
  });
  c.format_max[2] = 1;
  c.crash(2);
  c.wipe(2);
  c.start(2);
  ASSERT_TRUE(c.run_until(3000, [&] { return c.node(2).stats().entries_unreadable > 0; }));
}

}  // namespace
}  // namespace queen::testing
