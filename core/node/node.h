// The node: an event-driven state machine that owns one broker's state (queues, partitions,
// cursors, leases) and its log. It is handed events and returns the work they call for.
//
// Events in: start (after the environment lists the data folder), a client command with a
// reply handle, a timer, a completed sync, a cancelled client, a peer's message, a forwarded
// command's reply. Out, from each: a record of outputs (io/outputs.h: appends and syncs of
// log files, checkpoint files, timers, messages, forwards, replies) that the caller carries
// out (io/carry_out.h) before the next event. The node asks the Env only what it reads: the
// clock, randomness, durable bytes of its files, and (at start) the data folder. A single
// node is a cluster of one: an entry commits once every log it touches has synced; the
// replicator seam is where Raft plugs in.
//
// Guarantees (checked by the simulator, see DESIGN.md): a push is answered only once its
// entry is durable; per partition offsets are gapless; pops and acks are answered only once
// the checkpoint holding their cursor change is durable (unless consume_fast); after a
// crash, start() recovers exactly the complete entries (present in every log they touch).
#pragma once

#include <memory>
#include <vector>

#include "core/api/replies.h"
#include "core/node/config.h"
#include "io/env.h"
#include "io/outputs.h"

namespace queen {

class Store;
struct NodeImpl;

struct NodeStats {
  uint64_t entries_committed = 0;
  uint64_t syncs = 0;
  uint64_t lease_expiries = 0;
  uint64_t redeliveries = 0;
  uint64_t dlq_moves = 0;
  uint64_t checkpoints = 0;
  uint64_t recovered_entries = 0;
  uint64_t recovery_files_skipped = 0;  // log files a single node's start left unread
  uint64_t store_checkpoints = 0;  // written and durable
  uint64_t log_files_reclaimed = 0;
  uint64_t torn_tails_cut = 0;
  uint64_t entries_read_back = 0;  // cluster: old entries read from the log for a follower
  uint64_t snapshots_sent = 0;     // transfers started (a leader)
  uint64_t snapshots_installed = 0;
  // Peer messages dropped: not decodable, out of bounds (kTermMax, kLogIndexMax), or from a
  // node that is not a member.
  uint64_t raft_messages_refused = 0;
  // Peer messages dropped by the identity fence: from a disk other than the one pinned.
  uint64_t raft_messages_fenced = 0;
  // Entries written of a cluster format above QUEEN_RAFT_FORMAT_MAX (a node of that format
  // could not read them): always 0 while the cluster version gate holds.
  uint64_t entries_unreadable = 0;
  // A follower's forwarding: commands sent to a leader (every attempt), attempts after the
  // first (a retry under the same request id, or following a new leader), and commands
  // answered outcome_unknown (an attempt may have been applied; the deadline came first).
  uint64_t forwarded = 0;
  uint64_t forward_retries = 0;
  uint64_t forward_unknown = 0;
  uint64_t transfers = 0;  // graceful stops that handed leadership over
  uint64_t row_hash_reads = 0;  // message records read for their hashes (RowHashes)
  // Partitions whose dedup ring a start read from a rings file.
  uint64_t rings_loaded = 0;
  uint64_t rings_files_written = 0;  // durable, at a store checkpoint or a graceful stop
  // Dedup rings dropped to keep within dedup_front_bytes_max (DedupStats::evictions, as of
  // the last store checkpoint tick).
  uint64_t rings_evicted = 0;
  // Slices of whole lists read after the request's own (node_lists.cpp): lists longer than
  // a slice, read between other events.
  uint64_t list_slices = 0;

  // Every counter with its name, once: sums and reports go through it.
  template <class F>
  void each(F&& f) {
    f("entries_committed", entries_committed);
    f("syncs", syncs);
    f("lease_expiries", lease_expiries);
    f("redeliveries", redeliveries);
    f("dlq_moves", dlq_moves);
    f("checkpoints", checkpoints);
    f("recovered_entries", recovered_entries);
    f("recovery_files_skipped", recovery_files_skipped);
    f("store_checkpoints", store_checkpoints);
    f("log_files_reclaimed", log_files_reclaimed);
    f("torn_tails_cut", torn_tails_cut);
    f("entries_read_back", entries_read_back);
    f("snapshots_sent", snapshots_sent);
    f("snapshots_installed", snapshots_installed);
    f("raft_messages_refused", raft_messages_refused);
    f("raft_messages_fenced", raft_messages_fenced);
    f("entries_unreadable", entries_unreadable);
    f("forwarded", forwarded);
    f("forward_retries", forward_retries);
    f("forward_unknown", forward_unknown);
    f("transfers", transfers);
    f("row_hash_reads", row_hash_reads);
    f("rings_loaded", rings_loaded);
    f("rings_files_written", rings_files_written);
    f("rings_evicted", rings_evicted);
    f("list_slices", list_slices);
  }
  NodeStats& operator+=(const NodeStats& other) {
    std::vector<uint64_t> add;
    NodeStats copy = other;
    copy.each([&](const char*, uint64_t& v) { add.push_back(v); });
    size_t i = 0;
    each([&](const char*, uint64_t& v) { v += add[i++]; });
    return *this;
  }
};
static_assert(sizeof(NodeStats) == 26 * sizeof(uint64_t), "a counter is missing from each()");

class Node {
 public:
  Node(Env& env, NodeConfig config);
  ~Node();
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  // Recovery from the files found in the data folder; reports progress through Env::log.
  // An error when the data cannot be trusted (the node must not serve).
  Result<Outputs> start(const std::vector<FileInfo>& files);

  Outputs on_command(ReplyHandle handle, CommandEnvelope command);
  Outputs on_timer(TimerId id);
  Outputs on_sync_done(uint64_t token, bool ok);
  // The client behind `handle` went away (e.g. it closed a long poll): a held pop is
  // dropped and whatever it claimed is handed back. No reply is sent for it.
  Outputs on_cancel(ReplyHandle handle);
  // The leader's reply to a command this node forwarded (output::Forward); nullopt: the
  // stream to it failed.
  Outputs on_forward_reply(uint64_t forward_id, std::optional<Reply> reply);
  // A message from another node of the cluster (see output::Send).
  Outputs on_message(uint64_t from, const Bytes& message);
  // A graceful stop: a leader stops taking commands, waits up to
  // NodeConfig::hand_over_ack_wait_ms for what it took (acks) to commit, then hands
  // leadership to its most caught-up voter (which starts an election at once). `leading`:
  // false when this node does not lead. raft_view() tells when another node took over.
  Outputs hand_over(bool* leading = nullptr);
  // A graceful stop's last step: writes a full store checkpoint holding everything applied
  // at the first call (unless the newest durable one does, or one is being written), so the
  // next start replays nothing and decodes one file (a chain's deltas each decode every
  // partition they name again). `current`: the newest durable checkpoint holds it (or the
  // node halted). Call again, once the outputs were carried out, until it does.
  Outputs checkpoint_before_stop(bool* current);
  // After outputs that asked for it (Outputs::restart) were carried out: a follower that
  // installed a snapshot starts again from its files, as after a restart.
  Outputs restart_in_place();

  // Read-only views for tests and the simulator's checker.
  const Store& store() const;
  // Up to `max` committed messages of a partition from `from`, read back from the log.
  Result<std::vector<PopMessage>> read_messages(PartitionId pid, Offset from, uint32_t max) const;
  const NodeStats& stats() const;
  // The cursor rows the consumption engine holds beside the store's: changed or erased and not
  // yet applied as they are (the rest are read from the store, not copied).
  size_t cursor_rows_held() const;
  // The leases the consumption engine keeps for expiry and extension, one per row: released
  // and expired ones are dropped.
  size_t leases_held() const;
  bool serving() const;

  // The node's place in the cluster, for /health, tests and the simulator's checker.
  struct RaftView {
    const char* role = "leader";  // leader, follower, pre_candidate, candidate
    uint64_t term = 0;
    uint64_t leader = 0;  // 0: none known
    uint64_t commit = 0;  // known committed
    uint64_t applied = 0;
    uint64_t last_index = 0;     // of its own log
    uint64_t durable_index = 0;  // how far its own log is durable, and that entry's term
    uint64_t durable_term = 0;
    bool writable = false;       // a leader that applied an entry of its term: plans commands
    uint64_t applied_chain = 0;  // with NodeConfig::track_applied_chain: over applied entries
    // The configuration in use: whether this node votes in it, and whether it has committed
    // (a leader that is no voter of a committed one must have stepped down).
    bool voter = true;
    bool membership_committed = true;
    uint64_t membership_index = 0;  // the entry the configuration in use came from
    uint32_t cluster_version = 0;   // of the configuration in use
    // Its own disk is not the one its configuration pins (wiped or swapped): it does not vote.
    bool fenced = false;
  };
  RaftView raft_view() const;
  // The identity fence (cluster only, else 0): this node's disk id, and the disk its
  // configuration in use pins for `member` (0: none).
  uint64_t disk_id() const;
  uint64_t pinned_disk(uint64_t member) const;
  // The number of voters of the configuration in use (0 on a single node).
  size_t voters() const;
  bool is_voter(uint64_t member) const;  // in the configuration in use

 private:
  // What the event left to do: a checkpoint write (last, see io/outputs.h), the outputs.
  Outputs finish_event();
  std::unique_ptr<NodeImpl> impl_;
};

}  // namespace queen
