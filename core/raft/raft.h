// Raft consensus as a pure state machine, in the manner of etcd-raft: messages and ticks go
// in (step, tick, propose), and what must happen comes out (take_ready: a term/vote to
// persist, entries to append or a suffix to truncate, messages to send, a new commit index).
// The caller persists, sends, and reports durability back (on_persisted); it never decides.
//
// The log itself is the caller's (the queue log files): Raft sees it through LogView and
// holds only the entries it still has to replicate. Commit needs a majority of durable
// copies (the leader counts its own only once its sync completed) and an entry of the
// leader's own term. Election with pre-vote (a partitioned node does not inflate terms) and
// check-quorum (a leader that has not heard from a majority for an election timeout steps
// down). Leadership transfer sends TimeoutNow to a caught-up voter.
//
// Snapshots: the caller may drop entries up to a point it holds a snapshot of (compact). A
// follower that needs an entry at or below it gets a `snapshot` message in the Ready instead
// of appends: the caller sends the snapshot its own way (Raft never sees its bytes). The
// follower's caller installs it and restarts with a log that begins at the snapshot (a
// TermRuns reset there, compacted up to it); the leader's next append, which lies below the
// follower's commit index, is answered with that index, and appends go on from there.
//
// Membership (one server at a time, Raft dissertation §4.1): a configuration names the voters
// and the learners (members that get the log but are never counted). A server uses the latest
// configuration in its log, committed or not; the caller reports each one it writes
// (on_membership_entry), and a truncated one is forgotten. A leader proposes a change only
// once an entry of its own term has committed (the empty entry it proposes on election, the
// fix for the single-server change bug) and no earlier change is uncommitted, and a change adds
// or removes at most one voter (learners change freely beside it). A leader that is no voter
// of its configuration does not count itself, and steps down once that configuration commits.
//
// Fault model: messages may be lost, duplicated, reordered or delayed; nodes crash and
// restart with their persisted term, vote and durable log.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/common/bytes.h"
#include "core/common/types.h"

namespace queen::raft {

enum class Role : uint8_t { follower, pre_candidate, candidate, leader };

enum class MsgType : uint8_t {
  pre_vote = 1,
  pre_vote_resp = 2,
  vote = 3,
  vote_resp = 4,
  append = 5,
  append_resp = 6,
  timeout_now = 7,
  // Never sent as is: Ready asks the caller to send a snapshot of at least `index` to `to`.
  snapshot = 8,
  // The caller's snapshot transfer (core/node/snapshot.h), carried in `data`.
  snapshot_chunk = 9,
  snapshot_ack = 10,
};

struct LogEntry {
  LogIndex index;
  Term term;
  Bytes data;  // the encoded entry (core/state/entry.h), opaque here
  bool operator==(const LogEntry&) const = default;
};

struct Message {
  MsgType type = MsgType::append;
  NodeId from, to;
  Term term;
  // vote, pre_vote: the candidate's last log position. append: the position before entries.
  LogIndex index;
  Term log_term;
  std::vector<LogEntry> entries;
  LogIndex commit;
  bool reject = false;
  bool force = false;  // vote after a leadership transfer: ignore the leader lease
  LogIndex hint;       // append_resp: the follower's last index (on reject) or match (on success)
  // append: the leader's tick count when it sent it; append_resp: echoed back. A response
  // proves the follower took the sender as leader no earlier than that tick (leader lease).
  uint64_t ctx = 0;
  Bytes data;  // snapshot_chunk, snapshot_ack: the transfer's own encoding
  // The sender's identity, in every message (a trailer that decoders from format 2 on read, and
  // that they skip beyond the fields they know): the id of its disk, minted when its data
  // folder was created, and the highest cluster format it reads. 0 for a sender that sent none.
  uint64_t disk = 0;
  uint32_t kinds = 0;
  bool operator==(const Message&) const = default;
};

// Bounds no honest cluster reaches (a term a second would take nine million years to reach
// 2^48): a message past them is malformed, so term and index arithmetic can never wrap.
constexpr uint64_t kTermMax = 1ull << 48;
constexpr uint64_t kLogIndexMax = 1ull << 62;
// The identity trailer's fields (disk, kinds); a longer trailer is a later format's.
constexpr uint32_t kIdentityTrailerBytes = 12;

Bytes encode_message(const Message& m);
// False for bytes that are not a message.
bool decode_message(const uint8_t* data, size_t size, Message* out);
// Whether every term and index of the message is within kTermMax and kLogIndexMax; a message
// that is not must be refused (as malformed) before it reaches Raft.
bool within_bounds(const Message& m);

// Where Raft reads entries to replicate: the caller's log, including entries written but not
// yet synced. Raft keeps the (index, term) shape of the log itself (TermRuns).
class LogView {
 public:
  virtual ~LogView() = default;
  // Entries (from, to], at most bytes_max of data (at least one); empty if not available.
  virtual std::vector<LogEntry> entries(LogIndex from_exclusive, LogIndex to_inclusive,
                                        uint64_t bytes_max) const = 0;
};

// The terms of a log as runs: entry i has the term of the last run starting at or before i.
class TermRuns {
 public:
  void append(LogIndex index, Term term);
  void truncate_after(LogIndex index);
  // The log restarts from a snapshot: `index` has `term`, nothing is known below it.
  void reset(LogIndex index, Term term);
  LogIndex last() const { return last_; }
  std::optional<Term> term_at(LogIndex index) const;

 private:
  std::vector<std::pair<LogIndex, Term>> runs_;
  LogIndex last_;
};

// Who is counted (voters) and who only follows (learners); both sorted, disjoint. `disks` pins
// the disk a member was admitted with: its messages from any other disk are dropped (the
// identity fence), and a member whose own disk is not the pinned one neither campaigns nor
// votes. A member without a pin is not fenced.
struct Membership {
  std::vector<NodeId> voters;
  std::vector<NodeId> learners;
  std::map<NodeId, uint64_t> disks;
  uint64_t disk_of(NodeId id) const;
  bool is_voter(NodeId id) const;
  bool is_learner(NodeId id) const;
  bool is_member(NodeId id) const { return is_voter(id) || is_learner(id); }
  bool operator==(const Membership&) const = default;
};

// Why a membership change cannot be proposed now.
enum class ChangeRefusal : uint8_t {
  none,
  not_leader,     // only the leader proposes, and not while it hands leadership over
  not_settled,    // no entry of this leader's term has committed yet
  in_flight,      // an earlier change is not committed yet
  two_voters,     // the change adds or removes more than one voter
  no_voter_left,  // the change leaves no voter
};
const char* to_string(ChangeRefusal r);

struct Config {
  NodeId id;
  uint64_t disk = 0;   // this node's disk id (stamped on every message)
  uint32_t kinds = 1;  // the highest cluster format this node reads (stamped on every message)
  // The latest committed configuration the caller holds (its store's), at membership_index
  // (0: the first boot's). Later, uncommitted ones come through on_membership_entry.
  Membership membership;
  LogIndex membership_index;
  uint32_t election_ticks = 10;  // randomized in [election, 2 * election)
  uint32_t heartbeat_ticks = 1;
  bool pre_vote = true;
  bool check_quorum = true;
  uint64_t append_bytes_max = 1u << 20;  // per append message
  uint32_t inflight_max = 64;            // append messages unacknowledged per follower
  // A leader keeps the log a follower still needs while it heard from it within this many
  // ticks (counted from its own election for one it never heard from).
  uint64_t log_hold_ticks = 6000;
  // Test-only planted bugs: the checkers must notice them.
  bool mutant_commit_without_majority = false;
  bool mutant_vote_twice = false;
  bool mutant_learner_in_quorum = false;      // a learner's match counts towards commit
  bool mutant_changes_in_flight = false;      // a change is proposed before the last commits
  bool mutant_removed_leader_serves = false;  // a leader removed by a committed change leads on
  bool mutant_no_fence = false;               // a disk other than the pinned one counts
};

struct HardState {
  Term term;
  std::optional<NodeId> vote;
  bool operator==(const HardState&) const = default;
};

struct Ready {
  std::optional<HardState> hard_state;     // persist before sending the messages
  std::optional<LogIndex> truncate_after;  // drop the log suffix after this index first
  std::vector<LogEntry> append;            // then append these and sync them
  std::vector<Message> messages;
  std::optional<LogIndex> commit;  // the commit index moved here
  bool empty() const {
    return !hard_state && !truncate_after && append.empty() && messages.empty() && !commit;
  }
};

struct Stats {
  uint64_t elections = 0;
  uint64_t pre_vote_rejections = 0;
  uint64_t leaderships = 0;
  uint64_t step_downs_check_quorum = 0;
};

// What a member last said of itself (Message::disk and kinds).
struct PeerIdentity {
  uint64_t disk = 0;
  uint32_t kinds = 0;
  bool operator==(const PeerIdentity&) const = default;
};

class Raft {
 public:
  // `random` gives the election jitter (from the environment's seeded stream).
  Raft(Config config, HardState persisted, TermRuns durable_log, const LogView& log,
       LogIndex commit, uint64_t (*random)(void*), void* random_ctx);

  void tick();
  void step(const Message& m);
  // Leader only: appends an entry of the current term; returns its index.
  std::optional<LogIndex> propose(Bytes data);
  // Whether `next` may be proposed now (ChangeRefusal::none), and proposing it: the entry's
  // `data` carries it for the caller; it takes effect here at once.
  ChangeRefusal check_change(const Membership& next) const;
  std::optional<LogIndex> propose_membership(Bytes data, const Membership& next);
  // The caller wrote an entry at `index` (a follower's, from an append) that carries `m`.
  void on_membership_entry(LogIndex index, const Membership& m);
  // The configuration in use (the latest in the log) and the index of its entry.
  const Membership& membership() const { return confs_.rbegin()->second; }
  LogIndex membership_index() const { return confs_.rbegin()->first; }
  // The latest committed configuration.
  const Membership& committed_membership() const;
  // Leader: a member's durable match (0 if unknown), for promotion and status.
  LogIndex match_of(NodeId id) const;
  // Leader: whether `id` answered within the last election timeout.
  bool recently_heard(NodeId id) const;
  // Whether `m` comes from a member's disk other than the one its configuration pins. Such a
  // message is dropped, except a follower's answer to appends, which moves its replication
  // (a fenced member still gets the log) but is never counted. A leader's appends and
  // snapshots are never fenced (elections are).
  bool fenced(const Message& m) const;
  // Whether this node's own disk is not the one its configuration pins for it: it was wiped or
  // swapped, and takes no part in elections until it is removed and added back.
  bool self_fenced() const;
  // The identity a member last sent (from any message taken since this process started).
  std::optional<PeerIdentity> identity_of(NodeId id) const;
  // The cluster format of the configuration in use (the caller's): from 2 on, entries and
  // snapshots go only to a member that said it reads it (an older build added later gets
  // heartbeats alone, so it never takes an entry it cannot read).
  void set_cluster_format(uint32_t format) { cluster_format_ = format; }
  bool reads_cluster_format(NodeId id) const;
  // The caller made entries up to `index` durable (leader: its own sync completed).
  void on_persisted(LogIndex index);
  // The caller can no longer read entries up to `upto` (committed): a follower that needs one
  // gets a snapshot instead.
  void compact(LogIndex upto);
  LogIndex log_start() const { return log_start_; }
  // Leader: the lowest match of a follower heard from within log_hold_ticks (the entries the
  // caller should keep to catch it up by appends); the commit index otherwise.
  LogIndex slowest_held_match() const;
  // Leader: a snapshot to `to` failed; ask for one again at the next probe.
  void snapshot_failed(NodeId to);
  // Leader: the snapshot to `to` is making progress (a chunk was answered): it is not asked
  // for again while it does.
  void snapshot_progress(NodeId to);
  // Asks `to` (a caught-up voter) to start an election now.
  bool transfer_leadership(NodeId to);
  // Leader: the follower with the longest durable log (the best successor), if any.
  std::optional<NodeId> most_caught_up() const;
  bool transferring() const { return transfer_to_.has_value(); }
  Ready take_ready();

  Role role() const { return role_; }
  Term term() const { return hs_.term; }
  std::optional<NodeId> vote() const { return hs_.vote; }
  std::optional<NodeId> leader() const { return leader_; }
  LogIndex commit() const { return commit_; }
  NodeId id() const { return cfg_.id; }
  // Leader: ticks since the latest send that a majority has answered (itself included), so a
  // lease dated from it never outlives the followers' view of this leader. 0 on one voter.
  uint64_t ticks_since_quorum() const;
  const Stats& stats() const { return stats_; }
  // The durable last index of this node's own log as Raft tracks it.
  LogIndex last_index() const;
  // How far this node's own log is durable (reported through on_persisted).
  LogIndex durable_index() const { return durable_; }
  // The term of the own log's entry at `index`, if it has one.
  std::optional<Term> term_of(LogIndex index) const { return runs_.term_at(index); }

 private:
  struct Progress {
    LogIndex match;
    LogIndex next;
    uint32_t inflight = 0;
    bool active = false;      // heard from since the last check-quorum round
    uint64_t acked_tick = 0;  // the latest send tick this follower answered in our term
    uint64_t match_tick = 0;  // when match last moved (or the follower was last re-probed)
    LogIndex snapshot;        // a snapshot of this index is on its way: no appends meanwhile
    uint64_t heard_tick = 0;  // its latest answer (or this leader's election)
    uint64_t answered_tick = 0;  // its latest answer (0: none yet in this leadership)
  };

  void become_follower(Term term, std::optional<NodeId> leader);
  void become_pre_candidate();
  void become_candidate();
  void become_leader();
  void campaign(bool pre);
  void reset_election_timer();
  uint32_t quorum() const { return static_cast<uint32_t>(membership().voters.size() / 2 + 1); }
  bool self_voter() const { return membership().is_voter(cfg_.id); }
  bool may_campaign() const;
  bool counted(NodeId peer) const;  // its match and answers count towards a majority
  bool peer_fenced(NodeId peer) const;
  void note_identity(const Message& m);
  // Progress for every member but this node, kept for those already tracked.
  void track_members();
  // After a commit: forget configurations the newest committed one replaced, and step down
  // when that one has this leader as no voter.
  void after_commit();
  void send(Message m);
  void send_append(NodeId to, bool heartbeat_only);
  void broadcast_append();
  void reprobe_stalled();
  void maybe_commit();
  void handle_vote_request(const Message& m);
  void handle_vote_response(const Message& m);
  void handle_append(const Message& m);
  void handle_append_response(const Message& m);
  bool log_up_to_date(LogIndex index, Term term) const;
  std::optional<Term> term_at(LogIndex index) const { return runs_.term_at(index); }
  void set_hard_state(Term term, std::optional<NodeId> vote);
  void respond_append(NodeId to, LogIndex match, uint64_t ctx);
  void send_snapshot(NodeId to, Progress& pr);

  Config cfg_;
  HardState hs_;
  const LogView& log_;
  uint64_t (*random_)(void*);
  void* random_ctx_;
  Role role_ = Role::follower;
  std::optional<NodeId> leader_;
  LogIndex commit_;
  TermRuns runs_;       // the shape of the own log, written or not
  LogIndex durable_;    // own log durable up to here
  LogIndex log_start_;  // entries up to here are compacted (only their terms are known)
  struct AckPending {
    NodeId to;
    LogIndex match;
    uint64_t ctx = 0;
  };
  std::optional<AckPending> ack_pending_;  // follower: answer once durable
  uint64_t ticks_ = 0;                     // ticks since this process started
  uint32_t election_elapsed_ = 0;
  uint32_t election_timeout_ = 0;
  uint32_t heartbeat_elapsed_ = 0;
  std::set<NodeId> votes_granted_;
  std::set<NodeId> votes_rejected_;
  std::map<NodeId, Progress> progress_;
  std::optional<NodeId> transfer_to_;
  // Configurations by the index of their entry: the newest committed one and every later one.
  std::map<LogIndex, Membership> confs_;
  std::map<NodeId, PeerIdentity> identities_;
  uint32_t cluster_format_ = 1;
  Ready ready_;
  bool hs_dirty_ = false;
  LogIndex reported_commit_;
  Stats stats_;
};

}  // namespace queen::raft
