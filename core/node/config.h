// A node's configuration: every knob the core reads, with the reference's defaults. The
// server fills it from QUEEN_* variables; the simulator from the seed.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace queen {

// Test-only switches that plant known bugs in the real code path; the simulator turns one
// on to prove its checker notices. Never set by the server.
struct Mutants {
  bool answer_before_fsync = false;         // answer a push before its entry is durable
  bool skip_lease_check = false;            // accept an ack for a lease that is not live
  bool replay_partial_entry = false;        // recovery replays an entry missing from a log
  bool commit_without_majority = false;     // Raft commits what only the leader holds
  bool vote_twice = false;                  // Raft grants a second vote in one term
  bool no_foreign_lease_grace = false;      // a new leader trusts its clock with old leases
  bool snapshot_without_log_files = false;  // a snapshot ships the checkpoint alone
  bool delta_after_recovery = false;        // the first checkpoint after a start is a delta, too
  bool unbounded_terms = false;  // peer messages past kTermMax / kLogIndexMax are accepted
  bool forward_fresh_request_id = false;     // a follower's retry at a leader mints a new id
  bool transfer_before_acks_commit = false;  // a graceful stop hands over at once
  bool learner_in_quorum = false;            // Raft counts a learner's match towards commit
  bool changes_in_flight = false;            // a membership change before the last commits
  bool removed_leader_serves = false;        // a leader removed by a committed change leads on
  bool no_fence = false;                     // a wiped or swapped disk votes and is counted
  bool ungated_version = false;  // the cluster version rises before every member reads it
};

struct NodeConfig {
  int64_t checkpoint_ms = 5;            // QUEEN_CONSUME_CHECKPOINT_MS
  bool consume_fast = false;            // QUEEN_CONSUME_FAST: answer pops/acks before commit
  uint32_t pipeline_max = 8;            // QUEEN_RAFT_PIPELINE: entries in flight
  uint32_t batch_cmds_max = 4096;       // QUEEN_RAFT_BATCH_MAX_CMDS per entry
  uint64_t batch_bytes_max = 4u << 20;  // QUEEN_RAFT_BATCH_MAX_BYTES per entry
  uint64_t segment_bytes = 64u << 20;   // QUEEN_RAFT_SEGMENT_BYTES: a log file rolls past it
  uint32_t qlog_shards = 0;          // QUEEN_QLOG_SHARDS: queues share this many logs (0: one each)
  // QUEEN_ROW_HASH_CACHE_MB: the cache of append rows' hashes read back from their records
  // (core/qlog/row_hashes.h), in bytes.
  uint64_t row_hash_cache_bytes = 64u << 20;
  // QUEEN_RAFT_DEDUP_FRONT_MB: the most the partitions' dedup rings hold, in bytes (0: no
  // bound); past it the least recently used go (DedupIndex::set_rings_bytes_max says when).
  uint64_t dedup_front_bytes_max = 512ull << 20;
  // QUEEN_RAFT_RINGS_FILE_MIN_MB: a store checkpoint takes a rings file beside it only while
  // the rings hold at least this many bytes (0: whatever they hold). Each such file costs a
  // fork, whose stall grows with the process, not with the rings; smaller rings warm from
  // their rows after a crash at about the cost of the catch-up a file would save.
  uint64_t rings_file_bytes_min = 64ull << 20;
  uint32_t pop_batch_max = 10000;    // largest batch one pop may lease
  int64_t pop_reply_margin_ms = 50;  // QUEEN_RAFT_POP_REPLY_MARGIN_MS
  uint32_t long_poll_waiters_max = 100000;
  int64_t timer_tick_ms = 50;            // QUEEN_RAFT_TIMER_TICK_MS (0: timers never fire)
  int64_t kv_sweep_ms = 1000;            // QUEEN_RAFT_KV_SWEEP_MS
  int64_t retention_interval_ms = 5000;  // RETENTION_INTERVAL: a retention pass this often
  uint32_t retention_visit_max = 8192;   // QUEEN_RAFT_RETENTION_VISIT: partitions per pass
  // QUEEN_RAFT_TXN_WINDOW_MIN_S: an append row (and, from cluster format 3, its record) stays
  // at least this long, whatever the queue's dedup window (kRowsWindowMinS).
  int64_t rows_window_min_s = 900;
  // PARTITION_CLEANUP_DAYS x 86400: an empty partition idle this long is deleted (0: never,
  // QUEEN_PARTITION_CLEANUP_ENABLED=false).
  int64_t partition_cleanup_after_s = 30 * 86400;
  int64_t trace_retention_s = 604800;    // QUEEN_RAFT_TRACE_RETENTION_S (0: kept, up to the cap)
  int64_t request_id_window_ms = 60000;  // QUEEN_RAFT_REQUEST_ID_WINDOW_S x 1000
  uint32_t request_outcomes_max = 1u << 20;
  // Answers are kept under request ids for a command resubmitted under the same id (a
  // follower's edge does so after a leader change). A single server node mints a fresh id
  // per HTTP request and has no peer to resubmit, so it keeps none (server/config.cpp): its
  // entries and checkpoints carry no answers.
  bool keep_request_outcomes = true;
  // Cluster: the voters' ids (this node's included). Empty or one voter: a single node, on
  // which an entry commits once it is durable.
  uint64_t node_id = 1;                        // QUEEN_RAFT_NODE_ID
  std::vector<uint64_t> voters;                // QUEEN_RAFT_PEERS
  // Where each of `voters` is reached, in the same order ("raft host:port", "http host:port"):
  // with them the first boot's membership. Later ones live in the log (EffMembership).
  std::vector<std::pair<std::string, std::string>> voter_addrs;
  // QUEEN_RAFT_JOIN: a new node starts with no membership, votes for nobody and campaigns
  // never; it follows whichever leader adds it (as a learner) and serves once it has.
  bool join = false;
  uint64_t promote_max_lag = 1000;  // QUEEN_RAFT_PROMOTE_MAX_LAG: entries a promoted learner lags
  // QUEEN_RAFT_FORCE_RECOVER: this node (when it names it) makes itself the only voter, from its
  // own log, after a majority of the voters was lost for good.
  uint64_t force_recover = 0;
  std::string cluster_id;  // shown with the membership (a node that joins is given it)
  // QUEEN_RAFT_FORMAT_MAX: the highest cluster format this node says it reads (kFormatMax; lower
  // it to stage a rollout, or to stand for an older build in tests).
  uint32_t format_max = 3;  // kFormatMax (core/state/entry.h)
  // QUEEN_RAFT_CLUSTER_VERSION_MS: how often the leader looks at whether every member reads a
  // higher cluster format, and pins the disks of new members (0: the version stays).
  int64_t cluster_version_ms = 1000;
  int64_t raft_heartbeat_ms = 100;             // QUEEN_RAFT_HEARTBEAT_MS (a Raft tick)
  int64_t raft_election_ms = 1000;             // QUEEN_RAFT_ELECTION_MS (timeout 1-2x)
  int64_t leader_lease_ms = 400;               // QUEEN_CONSUME_LEADER_LEASE_MS
  int64_t max_clock_skew_ms = 500;             // QUEEN_RAFT_MAX_CLOCK_SKEW_MS
  uint64_t raft_cache_bytes_max = 256u << 20;  // entries kept in memory for followers
  uint32_t raft_recovered_cached_max = 4096;   // applied entries cached again at start
  uint32_t raft_inflight_max = 64;             // append messages unanswered per follower
  uint64_t snapshot_chunk_bytes = 1u << 20;    // a snapshot travels in chunks of this size
  // A follower forwards client commands to the leader itself (output::Forward) and answers them
  // with the leader's reply, retrying under the same request id until their deadline
  // (QUEEN_RAFT_CLIENT_OFFLOAD); off: it answers not_leader naming the leader.
  bool forward_commands = false;
  uint32_t forwards_max = 65536;  // commands a follower holds while forwarding them
  // Work a leader holds for commands it took; past a cap a new command is answered
  // overloaded (429, Retry-After) instead of queued without bound.
  uint32_t sealed_entries_max = 1024;  // entries sealed, waiting for room in the pipeline
  uint32_t answers_max = 1u << 20;     // answers parked until their entry commits
  // A whole list of partitions (a group's details without a limit, the lagging list, a
  // queue's whole detail) is read this many partitions at a time, the node's other work
  // going on between slices; at most list_reads_max such lists are read at once, a further
  // one that takes more than a slice is answered overloaded.
  uint32_t list_slice_partitions = 1u << 15;
  uint32_t list_reads_max = 8;
  // Raft messages held while the hard state is being made durable; past it the newest is
  // dropped (Raft sends again: appends at the next heartbeat, votes at the next election).
  uint32_t held_messages_max = 4096;
  int64_t forward_retry_ms = 100;      // the pause before a command is forwarded again
  int64_t forward_timeout_ms = 30000;  // a command without a deadline waits this long
  // A graceful stop of a leader (Node::hand_over) waits this long for the acks it took to
  // commit before it hands leadership over.
  int64_t hand_over_ack_wait_ms = 500;
  int64_t raft_purge_hold_ms = 600'000;        // QUEEN_RAFT_PURGE_HOLD_S: log kept for the absent
  int64_t commit_persist_ms = 1000;            // how often a moved commit index is persisted
  // Store checkpoints (core/state/checkpoint.h): at most one per durable_every_ms, and only
  // once the log has grown by the last full checkpoint's size (capped at durable_every_bytes),
  // so checkpoint writes never outweigh log writes, or 30 intervals have passed. A single node
  // then reclaims log files below the older of its two newest checkpoints, at most
  // reclaim_files_per_pass_max per pass.
  int64_t durable_every_ms = 1000;              // QUEEN_RAFT_DURABLE_EVERY_MS
  uint64_t durable_every_bytes = 256ull << 20;  // QUEEN_RAFT_DURABLE_EVERY_BYTES
  uint32_t reclaim_files_per_pass_max = 256;
  // Deltas in a chain of checkpoints (core/state/checkpoint.h) before the next full one, at
  // most kCheckpointChainMax; 0 writes full checkpoints only.
  uint32_t checkpoint_deltas_max = 64;
  // Keep RaftView::applied_chain, a hash over every applied entry (one more encoding of each):
  // the simulator's and the tests' state machine safety check; off in the server.
  bool track_applied_chain = false;
  Mutants mutants;
};

}  // namespace queen
