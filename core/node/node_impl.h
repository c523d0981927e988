// The node's state and the handlers over it, shared by the files that implement it (one
// concern each): node_pipeline.cpp (entries from open to committed, answers, request ids,
// the work after every event), node_raft.cpp (the replicated log and leadership),
// node_checkpoints.cpp (store checkpoints and log reclamation), node_snapshots.cpp (snapshot
// transfer), node_polls.cpp (long polls), node_handlers.cpp (one handler per command kind),
// node_admin.cpp (administration, traces, metrics and reads), node_lists.cpp (whole lists
// read a slice at a time) and node.cpp (the Node's events). Internal to core/node: the Node
// (core/node/node.h) is the interface.
#pragma once

#include "core/node/node.h"

#include <algorithm>
#include <climits>
#include <deque>
#include <map>
#include <optional>
#include <set>

#include <xxhash.h>

#include "core/consume/engine.h"
#include "core/kv/kv.h"
#include "core/kv/locks.h"
#include "core/kv/maintenance.h"
#include "core/node/entry_cache.h"
#include "core/node/hard_state.h"
#include "core/node/outcome.h"
#include "core/node/snapshot.h"
#include "core/node/store_reads.h"
#include "core/planner/planner.h"
#include "core/planner/retention.h"
#include "core/qlog/log.h"
#include "core/raft/raft.h"
#include "core/seal/seal.h"
#include "core/state/checkpoint.h"
#include "core/state/store.h"
#include "core/timers/timers.h"

namespace queen {

constexpr TimerId kFlushTimer = 1;
constexpr TimerId kCheckpointTimer = 2;
constexpr TimerId kWakeTimer = 3;
constexpr TimerId kTimerTick = 4;
constexpr TimerId kSweepTimer = 5;
constexpr TimerId kRaftTick = 6;
constexpr TimerId kCommitPersistTimer = 7;
constexpr TimerId kStoreCheckpointTimer = 8;
constexpr TimerId kRetentionTimer = 9;
constexpr TimerId kForwardTimer = 10;
constexpr TimerId kHandOverTimer = 11;
constexpr TimerId kLagWalkTimer = 12;
constexpr TimerId kListStepTimer = 13;
// A follower forwards one command at most this many times (a retry, a new leader).
constexpr uint32_t kForwardAttemptsMax = 300;
// A forwarded command's deadline at the leader ends this long before the follower's, so its
// answer has time to come back.
constexpr int64_t kForwardReplyMarginMs = 100;
// While a graceful stop waits for its acks to commit, it looks this often.
constexpr int64_t kHandOverPollMs = 10;
constexpr int64_t kClaimMarginMsMax = 250;
// A store checkpoint waits for the log to grow by its own size, but at most this many
// durable_every_ms intervals: a quiet node still checkpoints (and reclaims) now and then.
constexpr int64_t kCheckpointIdleFactor = 30;
// Deltas that weigh less than this in all never end their chain by their weight.
constexpr uint64_t kChainDeltasLightBytes = 1u << 20;
// Every checkpoint writes every row of the store's tables but the append rows (partitions,
// cursors, request outcomes...), one at a time: each costs about as much to encode as this
// many bytes of append rows (whose hashes, when they keep them, go as runs).
constexpr uint64_t kTableRowEncodeBytes = 1024;
// A request outcome (a push's answer is a few runs of results) encodes in about a quarter of
// that: 44 ns named by id in a delta, 58 ns in full, against 233 ns per KiB of append rows.
constexpr uint64_t kOutcomeEncodeBytes = 256;
// A snapshot chunk unanswered for this many Raft ticks is sent again; after this many
// resends in a row the transfer is given up (Raft asks for a new one later).
constexpr uint64_t kSnapshotResendTicks = 10;
constexpr uint32_t kSnapshotResendsMax = 30;
constexpr uint64_t kSnapshotWindow = 4;  // data chunks sent and not yet answered

struct Parked {
  ReplyHandle handle = 0;
  Reply reply;
};

// A queue's whole detail (QueueGetCmd without a limit), read a slice of partitions at a time:
// each partition's counts in id order, summed into the view.
struct QueueListing {
  QueuesReply reply;                     // the one queue, its header filled at the request
  PartitionId from;                      // where the walk goes on
  StoreReads::DeadLetterCounts dead;     // the queue's dead letters by partition
};

// A whole list being read a slice at a time (node_lists.cpp), answered when it is whole.
struct ListRead {
  ReplyHandle handle = 0;
  int64_t deadline_ms = 0;
  std::variant<Engine::GroupListing, QueueListing> list;
};

// A client command a follower forwards to the leader (core/node/node_forward.cpp).
struct Forward {
  ReplyHandle handle = 0;
  std::shared_ptr<const CommandEnvelope> envelope;
  uint64_t leader = 0;      // the node the attempt in flight waits at (0: none in flight)
  uint64_t attempt = 0;     // that attempt's forward id
  uint32_t attempts = 0;    // made so far
  int64_t retry_at_ms = 0;  // none in flight: the next attempt goes then
  Reply last;               // the last "retry" answer, given when no attempt can be made
};

// A membership change the leader carries out, one configuration per step (each after the one
// before committed), answered after the last.
struct MembershipJob {
  ReplyHandle handle = 0;
  std::vector<std::vector<Member>> steps;
  uint64_t proposed_at = 0;  // the entry of the step in flight (0: none yet)
};

raft::Membership to_raft(const EffConfiguration& c);
// The configuration an entry carries (EffMembership read as format 1's), if any.
std::optional<EffConfiguration> configuration_effect(const Entry& e);

struct InFlight {
  Entry entry;
  WrittenEntry written;
  uint32_t syncs_left = 0;
};

// The answer recorded for a request id, so a retry under it gets the first outcome.
struct Outcome {
  uint64_t index = 0;  // the entry that carries it
  Reply reply;
  int64_t at_ms = 0;
};

struct LongPoll {
  ReplyHandle handle = 0;
  PopCmd cmd;
  int64_t stop_at_ms = 0;  // claims stop here: a margin before the caller's deadline
};

// Queues whose pop lag is kept at once (TrafficCounters::pop_lag); more are not timed.
constexpr size_t kPopLagQueuesMax = 1u << 16;

inline Reply error_reply(api::Errc code, std::string message, int retry_after_s = 0,
                         uint64_t leader = 0) {
  return Reply{ErrorReply{code, std::move(message), retry_after_s, leader}};
}

inline uint64_t env_random(void* env) {
  return static_cast<Env*>(env)->random_u64();
}

// A running hash over the applied entries, so nodes can be compared entry by entry.
inline uint64_t chain_hash(uint64_t chain, const Entry& e) {
  Bytes b = encode_entry(e);
  return XXH3_64bits_withSeed(b.data(), b.size(), chain);
}

// What a node of a cluster adds to a single node: Raft, the replicated tail, its hard state.
struct Cluster {
  explicit Cluster(uint64_t cache_bytes_max) : cache(cache_bytes_max) {}
  EntryCache cache;
  std::unique_ptr<raft::Raft> raft;
  uint64_t commit = 0;   // the commit index Raft reported
  uint64_t durable = 0;  // the own log is durable up to here
  uint64_t written = 0;  // and written up to here
  PersistedState persisted;
  bool hs_file_exists[2] = {false, false};
  std::set<uint64_t> hs_tokens;    // hard-state syncs in flight: messages wait for them
  std::deque<raft::Message> held;  // messages waiting for the hard state to be durable
  uint64_t lead_term = 0;          // the term this node leads in (0: not leading)
  uint64_t lead_index = 0;         // its first entry of that term
  bool writable = false;           // leads, and has applied an entry of its term
  int64_t consume_from_ms = INT64_MAX;
  bool persist_armed = false;
  bool persist_again = false;  // a hard-state write waits for the one in flight
  // Configurations by their entry's index, as Raft keeps them: the newest committed one and
  // every later one (the last is in use).
  std::map<uint64_t, EffConfiguration> configs;
  uint64_t identity_ticks = 0;  // ticks since the leader last looked at the members' identities
  uint64_t reported_members = UINT64_MAX;  // the list last handed out (output::Members)
  std::optional<MembershipJob> job;
  bool force_recovering = false;  // QUEEN_RAFT_FORCE_RECOVER: its configuration is not logged yet
};

struct NodeImpl {
  NodeImpl(Env& e, NodeConfig c)
      : env(e),
        config(c),
        writer(out, c.segment_bytes, c.qlog_shards),
        hashes(e, c.row_hash_cache_bytes),
        planner(e, store, hashes),
        engine(e, store, config, hashes),
        kv(store),
        locks(kv),
        timers(store),
        reads(env, store, hashes) {
    planner.dedup().set_rings_bytes_max(c.dedup_front_bytes_max);
  }

  Env& env;  // asked what the node reads: the clock, randomness, durable bytes
  // The work of the event being handled, returned at its end (Node::finish_event).
  Outputs out;
  NodeConfig config;
  Store store;
  LogWriter writer;
  RowHashes hashes;  // the append rows' transactionId hashes, read from their records
  Planner planner;
  Engine engine;
  KvPlanner kv;
  LockPlanner locks;
  TimerPlanner timers;
  StoreReads reads;
  NodeStats stats;
  TrafficCounters traffic;  // answers by kind, for /metrics/prometheus
  bool serving = false;
  bool stopped = false;

  OpenEntry open;
  std::deque<Entry> sealed;  // sealed, waiting for room in the pipeline
  std::map<uint64_t, InFlight> inflight;
  std::map<uint64_t, uint64_t> sync_tokens;  // token -> entry index
  uint64_t next_token = 1;
  uint64_t last_sealed = 0;
  uint64_t last_written = 0;
  uint64_t commit = 0;
  int64_t last_entry_now_us = 0;

  std::multimap<uint64_t, Parked> answers;  // sent once the entry at the key commits
  std::vector<Parked> checkpoint_waiters;   // sent after the next checkpoint commits
  std::set<ReplyHandle> cancelled;

  std::map<RequestId, Outcome> outcomes;
  std::deque<std::pair<int64_t, RequestId>> outcome_order;
  RequestId current_request;  // of the command being handled

  std::map<uint64_t, LongPoll> polls;
  std::map<std::string, std::set<uint64_t>> polls_by_queue;
  std::map<ReplyHandle, uint64_t> poll_of_handle;
  std::set<std::pair<int64_t, uint64_t>> poll_deadlines;
  uint64_t poll_seq = 0;

  // A follower's forwarded commands, by client handle, and their attempts by forward id.
  std::map<ReplyHandle, Forward> forwards;
  std::map<uint64_t, ReplyHandle> forward_attempts;
  uint64_t next_forward_id = 0;  // random at start: a reply meant for an earlier run misses
  bool forward_armed = false;
  // A graceful stop under way (Node::hand_over): commands are refused until it hands over.
  bool handing_over = false;
  // A graceful stop's checkpoint holds everything applied when the stop began (a follower
  // goes on applying its leader's entries: it does not chase them).
  std::optional<LogIndex> stop_checkpoint_upto;
  int64_t hand_over_at_ms = 0;  // hands over then at the latest

  std::unique_ptr<Cluster> cluster;  // null on a single node
  // Cluster: where entry i's records lie (at [i - 1]), to read it back for a follower.
  struct EntryRecords {
    RecordLocation record;
    std::vector<RecordLocation> messages;
  };
  std::vector<EntryRecords> entry_records;
  uint64_t applied_chain = 0;
  std::set<uint64_t> dead_tokens;  // syncs of entries a truncation removed

  // Store checkpoints: the durable ones the two newest need (their chains, oldest first;
  // more while a snapshot is being sent) and the write in flight. Log files below the older
  // of the two newest are reclaimed.
  struct CheckpointFile {
    LogIndex at;
    LogIndex base;  // a delta's base; 0 for a full checkpoint
    std::string file;
    uint64_t size_bytes = 0;
    std::vector<LogFileKey> refs;  // the log files its store points at (a snapshot ships them)
    uint64_t log_bytes = 0;        // the log's growth since the checkpoint before it
  };
  std::deque<CheckpointFile> checkpoints;
  uint64_t checkpoint_token = 0;  // 0: none in flight
  // A graceful stop's dedup rings (core/planner/ring_file.h): not decided yet, written (its
  // write in flight under rings_token), or settled (durable, failed or not written at all).
  enum class StopRings { undecided, writing, settled };
  StopRings stop_rings = StopRings::undecided;
  // The rings file in flight (0: none) and its index, and the newest durable one's (0: none
  // since the start). A store checkpoint takes a rings file beside it once the log has grown
  // kRingsLogRatio times the rings' size since the last (and the rings hold at least
  // NodeConfig::rings_file_bytes_min), so that a start after a crash finds rings that catch up
  // from the rows written since.
  uint64_t rings_token = 0;
  LogIndex rings_writing_at;
  LogIndex rings_file_at;
  uint64_t log_bytes_since_rings = 0;
  static constexpr uint64_t kRingsLogRatio = 8;
  CheckpointFile checkpoint_writing;
  // (partition, base offset) of each append applied since the newest checkpoint was started:
  // the rows the next delta checkpoint writes in full. Recovery replays entries without
  // noting them, so the first checkpoint after a start is a full one.
  std::vector<std::pair<PartitionId, Offset>> appended_since_checkpoint;
  bool appends_noted = config.mutants.delta_after_recovery;
  // Snapshots (core/node/snapshot.h). Leader: the transfers under way, by follower.
  struct SnapshotSend {
    SnapshotManifest manifest;
    Bytes manifest_bytes;
    uint64_t chunks = 0;    // data chunks (chunk 0, the manifest, not counted)
    uint64_t acked = 0;     // the first chunk the follower has not answered
    uint64_t sent_end = 0;  // chunks below this were sent
    uint64_t rewound = 0;   // sent_end was last moved back to `acked` at this value of it
    uint64_t sent_tick = 0;
    uint32_t resends = 0;
  };
  std::map<uint64_t, SnapshotSend> snapshot_sends;
  uint64_t raft_ticks = 0;
  // Follower: the snapshot being received, staged under snap/.
  struct SnapshotRecv {
    uint64_t from = 0;
    SnapshotManifest manifest;
    uint64_t chunks = 0;
    uint64_t next_seq = 1;
    std::set<uint64_t> tokens;  // syncs in flight: the staged files, then the manifest
    bool deciding = false;      // the manifest is being written
    bool decided = false;       // it is durable: install once no sync is in flight
  };
  std::optional<SnapshotRecv> snapshot_recv;
  bool restart_requested = false;  // installed: the Node restarts in place
  uint64_t log_bytes_since_checkpoint = 0;
  uint64_t last_full_checkpoint_bytes = 0;
  uint64_t last_delta_bytes = 0;      // the newest delta's size, 0 before the first
  uint64_t last_delta_log_bytes = 0;  // and the log's growth it covered
  int64_t last_checkpoint_ms = 0;
  bool checkpoint_due = false;  // the timer came: maybe_write_checkpoint ends the event
  Term applied_term;
  bool require_next_entry = false;  // see load_store_checkpoint

  bool flush_armed = false;
  bool checkpoint_armed = false;
  bool timer_tick_armed = false;
  bool sweep_armed = false;
  bool retention_armed = false;
  bool lag_walk_armed = false;
  std::deque<ListRead> list_reads;  // at most config.list_reads_max, the next to step first
  bool list_step_armed = false;
  RetentionScanner retention;
  int64_t wake_at_ms = INT64_MAX;

  // -------------------------------------------------------------- entries
  void request_flush();

  void seal();

  int64_t stamp_now();

  // Writes the entry to every log it touches and syncs them; it applies once durable (and,
  // in a cluster, committed).
  void write_entry(Entry e);

  void write_sealed();

  void on_flush();

  void note_appends(const Entry& entry);

  void commit_ready();

  void send_answers();

  void send(Parked p);

  void park_at(uint64_t index, ReplyHandle h, Reply r);

  // Parks the answer of a planned command at the entry that carries it, or at the last
  // sealed entry when it planned nothing new (all duplicates, a no-op configure).
  void park_planned(ReplyHandle h, Reply r);

  // -------------------------------------------------------------- cluster (Raft)
  // Leader: hands a sealed entry to Raft, which appends it at the next index.
  bool propose(const Entry& e);

  void process_ready();

  // Writes Raft's hard state and the applied index (known committed) to the next slot. One
  // write at a time: a second one waits, so a crash always leaves one durable slot.
  void persist_state();

  void on_state_synced(uint64_t token);

  void send_message(raft::Message m);

  // -------------------------------------------------------------- store checkpoints
  // Loads the newest valid checkpoint into the store (before the log is replayed after it).
  Status load_store_checkpoint(const std::vector<FileInfo>& files);

  std::vector<LogFileKey> file_refs_now() const;

  void arm_store_checkpoints();

  // Whether the store applied entries past its newest checkpoint, and none is being written.
  bool checkpoint_behind() const;
  // Writes one when the log grew enough since the last, or a long while passed.
  void maybe_write_checkpoint();
  // `full`: a whole one, starting a new chain; else a delta when delta_base() says so.
  void write_store_checkpoint(bool full);

  // A guess at the work of checkpoint `c` in bytes, so that io may write a small one in place
  // rather than in a copy of the process: a delta weighs as much as the newest delta did per
  // byte of log (at least as much), a full one as the chain before it (its rows are there)
  // and such a delta; each table row counts kTableRowEncodeBytes more and each request
  // outcome kOutcomeEncodeBytes (rows made since the newest delta are in neither).
  // UINT64_MAX when there is nothing to go by (no delta since the start).
  uint64_t expected_checkpoint_bytes(const CheckpointFile& c) const;

  // The size of the deltas after the full checkpoint at `root`, up to the newest.
  uint64_t deltas_bytes(size_t root) const;

  // The checkpoint the next one builds on, or 0 for a full one: a chain ends once its deltas
  // weigh half as much as its full checkpoint and more than kChainDeltasLightBytes (a restart
  // reads at most 1.5 times a full one, or 1 MiB more), or number config.checkpoint_deltas_max.
  LogIndex delta_base() const;

  void on_checkpoint_synced(bool ok);

  // A graceful stop: writes the dedup rings once, named after the applied index, when the
  // stop's checkpoint is (being) written at that index; settles at once otherwise.
  void write_stop_rings(bool checkpoint_started);
  // Beside the store checkpoint just started at `at`, when the rings are due one.
  void maybe_write_rings(LogIndex at);
  void write_rings_file(LogIndex at);
  void on_rings_synced(bool ok);
  // At start, once the store checkpoint is loaded and before any entry is replayed: the
  // newest rings file written at its index or below, if any, becomes the dedup rings (one
  // that cannot be read is left: they warm from the rows), and they are kept through the
  // replay to catch up from the rows. Every rings file is removed.
  Status load_rings(const std::vector<FileInfo>& files);

  // Where in `checkpoints` the chain of the one at `i` starts: its full checkpoint.
  size_t chain_start(size_t i) const;

  // Log files that hold nothing past `upto` and no payload the store (or the newest
  // checkpoint, which a snapshot ships) points at. A leader keeps what a follower it heard
  // from within QUEEN_RAFT_PURGE_HOLD_S still needs; one away longer gets a snapshot.
  void reclaim_log_files(LogIndex upto);

  void halt(const std::string& why);

  // -------------------------------------------------------------- snapshots: leader
  void start_snapshot_send(NodeId to, LogIndex at_least);

  // The newest checkpoint (its chain) and the log files its store points at, cut after its entry.
  Result<SnapshotManifest> build_manifest();

  // Sends the chunks of the window not sent yet: the manifest alone until it is answered,
  // then up to kSnapshotWindow unanswered data chunks (go-back-N: a resend starts over from
  // the first unanswered one). False when the transfer had to be given up.
  bool send_window(uint64_t to, SnapshotSend& s);

  bool send_chunk(uint64_t to, SnapshotSend& s, uint64_t seq);

  void abort_send(uint64_t to, const std::string& why);

  void on_snapshot_ack(uint64_t from, const raft::Message& m);

  void tick_snapshots();

  // -------------------------------------------------------------- snapshots: follower
  void answer_chunk(uint64_t to, const raft::Message& m, uint64_t next_seq);

  // A message of a snapshot transfer (a chunk or its answer) for the snapshot at `index`.
  void send_transfer(raft::MsgType type, uint64_t to, LogIndex index, Term term, Bytes data);

  void on_snapshot_chunk(uint64_t from, const raft::Message& m);

  void sync_staged();

  // A staged snapshot that will not be installed: its files go, its syncs are ignored.
  void discard_staged();

  // Staged files synced: the manifest decides the install; once it is durable, install.
  void on_staged_synced(uint64_t token, bool ok);

  // Once a decided snapshot waits for no sync of the old log, asks for a restart in place
  // (Outputs::restart): Node::restart_in_place installs its files, start() the rest.
  void maybe_install();

  // Follower (or a new leader's first entry): writes what Raft appended to the own log.
  void append_replicated(raft::LogEntry e);

  // Raft overwrites the uncommitted suffix after `keep`: cut it from every log and answer
  // what waited on it (it never took effect).
  void truncate_log(uint64_t keep);

  uint64_t leader_id() const;

  Reply not_serving_reply() const;

  // Answers not_leader (a retry) everything parked at an entry after `index`: never proposed, or
  // cut.
  void fail_answers_after(uint64_t index, const std::string& why);

  void check_role();

  // An entry of this leader's term has applied: everything before it is applied too, so the
  // planner and the engine start from the committed store.
  void become_writable();

  void step_down();

  bool consume_ok();

  void persist_commit_later();

  Status start_cluster(const std::vector<FileInfo>& files, RecoveryOptions opt);

  // -------------------------------------------------------------- membership
  std::vector<Member> bootstrap_members() const;
  void start_membership(raft::Config* rc, LogIndex last);
  void recovered_membership(const Entry& e);
  void follow_membership(const Entry& e);
  void settle_membership();
  MembershipReply membership_view() const;
  std::optional<MembershipReply> plan_membership(const MembershipCmd& cmd,
                                                 std::vector<std::vector<Member>>* steps);
  std::optional<MembershipReply> plan_promotions(const std::vector<NodeId>& ids,
                                                 std::vector<Member> now,
                                                 std::vector<std::vector<Member>>* steps);
  std::optional<MembershipReply> plan_voters(const std::vector<NodeId>& voters,
                                             std::vector<Member> now,
                                             std::vector<std::vector<Member>>* steps);
  std::optional<MembershipReply> learner_behind(NodeId id) const;
  bool reachable_majority(const std::vector<Member>& next) const;
  void membership_step();
  void drop_membership_job();
  void force_recover_step();
  // The effect that makes `members` the configuration: EffConfiguration (keeping the pins of
  // members that stay, and pinning those heard from) once the cluster version is 2,
  // EffMembership before.
  Effect configuration_for(std::vector<Member> members) const;
  EffConfiguration pinned_configuration(std::vector<Member> members, uint32_t version) const;
  // Leader, every QUEEN_RAFT_CLUSTER_VERSION_MS: raises the cluster version once every member
  // reads a higher one, and pins the disks of members heard from.
  void identity_tick();
  // Counts an entry (at `index`, of cluster format `format`: entry_format) this node writes of
  // a format above config.format_max (a node of that format could not read it: the gate
  // failed).
  void check_format(LogIndex index, uint32_t format);

  // -------------------------------------------------------------- forwarding (a follower)
  // Whether this node forwards `c` rather than serving it (a follower, not a peer's command).
  bool forwards_it(const CommandEnvelope& c, const CommandTraits& traits) const;
  void start_forward(ReplyHandle h, CommandEnvelope c);
  // The next attempt of `f`: to the leader, here once this node leads, or later.
  void try_forward(Forward& f);
  void on_forward_reply(uint64_t id, std::optional<Reply> reply);
  void forward_tick();
  void arm_forward_timer();
  // The deadline came before a definite answer.
  void give_up_forward(Forward& f);
  void end_forward(ReplyHandle h, std::optional<Reply> reply);
  bool cancel_forward(ReplyHandle h);

  // Whether the sealed entries or the parked answers are at their caps (config *_max).
  bool queues_full() const {
    return sealed.size() >= config.sealed_entries_max ||
           answers.size() + checkpoint_waiters.size() >= config.answers_max;
  }

  // -------------------------------------------------------------- graceful stop
  void hand_over_tick();
  bool acks_in_flight() const;

  // -------------------------------------------------------------- request ids
  void expire_outcomes(int64_t now_ms);

  void record_outcome(uint64_t index, const Reply& r);

  // The outcomes the store holds (committed) replace what memory had: after a restart, or
  // when this node starts to lead.
  void load_outcomes();

  // A retry under a request id already planned gets the first outcome, once it commits.
  bool answer_known(ReplyHandle h, const RequestId& id, const Command& retried);

  void after_plan();

  // -------------------------------------------------------------- checkpoints
  // The consumption engine's changed rows go into the open entry, and the pops and acks
  // waiting for them are answered once it commits; true when there were rows.
  bool take_checkpoint_into_open();

  // The timer's checkpoint, for rows no entry sealed since took along (seal() takes them:
  // under load they ride the next entry instead of waiting for the timer).
  void on_checkpoint();

  void answer_after_checkpoint(ReplyHandle h, Reply r);

  // -------------------------------------------------------------- pops

  void drop_poll(uint64_t seq);

  void serve_polls(const std::string& queue);

  void expire_polls(int64_t now_ms);

  // -------------------------------------------------------------- after every event
  void after_event();

  // -------------------------------------------------------------- KV, locks, timers, txns
  void handle_kv(ReplyHandle h, const KvCmd& cmd);

  void commit_kv_or_answer(ReplyHandle h, KvScratch scratch, Reply r, bool changed);

  void handle_locks(ReplyHandle h, const LockCmd& cmd);

  void handle_timers(ReplyHandle h, const TimerCmd& cmd);

  void fire_timers();

  // A fire refused (a clear payload for a queue encrypted since, and no key): the timer is
  // retried after a backoff; the last allowed failure dead-letters it under __timer__.
  void fire_failed(const TimerKey& key, TimerRow row, const std::string& error, int64_t now_us);

  void sweep_kv();

  void run_retention();

  static TxnReply rollback(TxnReply r, std::string reason, std::string error);

  // Every item the transaction pushes, in order: one operation's own list when only one
  // operation pushes, else copied into `joined`.
  static const std::vector<PushItem>& pushed_items(const TxnCmd& cmd,
                                                   std::vector<PushItem>* joined);

  // Checks every part of the call before changing anything, so a refusal leaves no trace;
  // then plans all of it into the open entry: one entry, all or nothing on disk. Takes the
  // pushed items out of `cmd` as it plans them.
  void handle_txn(ReplyHandle h, TxnCmd& cmd);

  // -------------------------------------------------------------- administration

  // ---- maintenance ----

  MaintenanceReply maintenance_reply(const Maintenance& m) const;

  // A read answers the switches as applied; a switch is a KV write of their row.
  void handle_maintenance(ReplyHandle h, const MaintenanceCmd& cmd);

  // ---- traces ----

  void record_trace(ReplyHandle h, const TraceRecordCmd& cmd);

  static TraceView trace_view(const TraceRow& row);

  // The trace's message: its queue and partition names and payload (empty when gone).
  void locate(TraceView* v);

  TraceReply traces(const TraceQueryCmd& cmd);

  TraceReply trace_names(const TraceQueryCmd& cmd, TraceReply reply);

  // The first message of the partition with this transactionId that is not deleted.
  std::optional<Offset> live_message(const PartitionState& p, const Hash128& txn_hash) const;

  // Whether a delete of this message is planned but not applied yet (a second one answers
  // "not found", as it will once the first applies). Deletes are rare: a scan will do.
  bool delete_planned(PartitionId pid, Offset o) const;

  void delete_message(ReplyHandle h, const MessageDeleteCmd& cmd);

  // Counts an answer leaving the node thread, by kind (TrafficCounters).
  void count_answer(const Reply& r);

  // Answered on any node (like /health): a follower reports its own view and no group lag.
  MetricsReply metrics(const Node::RaftView& v, int64_t now_us);

  void replay_dlq(ReplyHandle h, const DlqReplayCmd& named);

  // The queues `filter` and `only` (a name, or "" for all) select. With all of them listed,
  // `deleted` (when given) gets each queue's count of deleted messages from the same pass.
  // The queues `filter` lists, or the one `get` names with its partitions (or a page of them).
  QueuesReply queues(const QueueListCmd& filter, const QueueGetCmd* get,
                     std::map<QueueId, uint64_t>* deleted = nullptr);

  // -------------------------------------------------------------- whole lists
  // Reads the first slice of `r` at once: answers it when that makes it whole, else keeps it
  // for the next steps (or answers overloaded when list_reads_max are being read).
  void start_list(ListRead r);
  // One slice of config.list_slice_partitions partitions, shared by the lists being read in
  // turn; answers those it makes whole and those past their deadline.
  void step_lists();
  // Goes on with `r` for at most *budget partitions; true once it is whole.
  bool step_list(ListRead& r, size_t* budget);
  bool step_queue_listing(QueueListing& l, size_t* budget);
  // Answers `r`, which is whole, with what it read.
  void answer_list(ListRead& r);
  // Answers every list being read with `reply` (the node stopped leading).
  void fail_lists(const Reply& reply);
  bool drop_list(ReplyHandle h);

  // -------------------------------------------------------------- reads
  Result<std::vector<PopMessage>> read(PartitionId pid, Offset from, uint32_t max);

  // -------------------------------------------------------------- one handler per kind
  // The node dispatches a command with std::visit over these: a kind without its overload
  // does not compile. After the traits' checks (node.cpp: on_command).
  void handle(ReplyHandle h, CommandEnvelope& c, PushCmd& x);
  void handle(ReplyHandle h, CommandEnvelope& c, PopCmd& x);
  void handle(ReplyHandle h, CommandEnvelope& c, AckCmd& x);
  void handle(ReplyHandle h, CommandEnvelope& c, ConfigureCmd& x);
  void handle(ReplyHandle h, CommandEnvelope& c, HealthCmd& x);
  void handle(ReplyHandle h, CommandEnvelope& c, DlqQueryCmd& x);
  void handle(ReplyHandle h, CommandEnvelope& c, KvCmd& x);
  void handle(ReplyHandle h, CommandEnvelope& c, LockCmd& x);
  void handle(ReplyHandle h, CommandEnvelope& c, TimerCmd& x);
  void handle(ReplyHandle h, CommandEnvelope& c, TimerQueryCmd& x);
  void handle(ReplyHandle h, CommandEnvelope& c, TxnCmd& x);
  void handle(ReplyHandle h, CommandEnvelope& c, LeaseExtendCmd& x);
  void handle(ReplyHandle h, CommandEnvelope& c, GroupListCmd& x);
  void handle(ReplyHandle h, CommandEnvelope& c, GroupDetailsCmd& x);
  void handle(ReplyHandle h, CommandEnvelope& c, GroupDeleteCmd& x);
  void handle(ReplyHandle h, CommandEnvelope& c, SeekCmd& x);
  void handle(ReplyHandle h, CommandEnvelope& c, SubscriptionCmd& x);
  void handle(ReplyHandle h, CommandEnvelope& c, DlqReplayCmd& x);
  void handle(ReplyHandle h, CommandEnvelope& c, QueueListCmd& x);
  void handle(ReplyHandle h, CommandEnvelope& c, QueueGetCmd& x);
  void handle(ReplyHandle h, CommandEnvelope& c, QueueDeleteCmd& x);
  void handle(ReplyHandle h, CommandEnvelope& c, MessageGetCmd& x);
  void handle(ReplyHandle h, CommandEnvelope& c, MessageBrowseCmd& x);
  void handle(ReplyHandle h, CommandEnvelope& c, MetricsCmd& x);
  void handle(ReplyHandle h, CommandEnvelope& c, MessageDeleteCmd& x);
  void handle(ReplyHandle h, CommandEnvelope& c, TraceRecordCmd& x);
  void handle(ReplyHandle h, CommandEnvelope& c, TraceQueryCmd& x);
  void handle(ReplyHandle h, CommandEnvelope& c, MaintenanceCmd& x);
  void handle(ReplyHandle h, CommandEnvelope& c, MembershipCmd& x);
  void handle(ReplyHandle h, CommandEnvelope& c, FetchCmd& x);
  void handle(ReplyHandle h, CommandEnvelope& c, FetchOffsetsCmd& x);
  void handle(ReplyHandle h, CommandEnvelope& c, PartitionsChangedCmd& x);
  Node::RaftView raft_view() const;
};

void sync_done(NodeImpl& n, uint64_t token, bool ok);
// A client command (Node::on_command, or one a follower held and now serves as the leader).
void serve_command(NodeImpl& n, ReplyHandle h, CommandEnvelope c);
void timer_fired(NodeImpl& n, TimerId id);

}  // namespace queen
