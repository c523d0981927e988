// The consumption engine: serves pops, acks and leases from memory on the leader, never
// through the planner. It owns the live cursor rows of every (group, partition) (the store's
// committed rows, overlaid with the ones it changed until the store applies them: see
// engine_rows.h), the claim order (a ready list per group and queue, oldest claimable first),
// lease expiry, the retry budget and moves to the dead-letter list. Every change marks its row dirty; the node logs
// dirty rows as a checkpoint entry and answers a pop or ack only once that entry commits.
//
// A lease is a change to the group's cursor row: [batch_start, batch_end) leased to a lease
// id until lease_expires_us (node clock). Acks settle offsets of the batch; the cursor moves
// over the settled prefix; the lease is released when the whole batch is settled, by a
// failed/retry ack (the rest is delivered again), or by expiry.
#pragma once

#include <climits>

#include <map>
#include <set>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "core/api/replies.h"
#include "core/consume/engine_rows.h"
#include "core/node/config.h"
#include "core/qlog/row_hashes.h"
#include "core/state/entry.h"
#include "core/state/store.h"
#include "io/env.h"

namespace queen {

struct SettleOutcome {
  bool released = false;  // the lease ended (batch settled or handed back)
  bool dlq = false;       // the message moved to the dead-letter list
  uint32_t retries = 0;   // the retry budget spent when the ack came
};

// A transaction's acks and positions checked on shadow copies of the cursor rows: nothing
// in the engine changes until commit_txn() and nothing does at all if one is refused.
struct TxnConsumePlan {
  bool ok = true;
  std::string reason;  // rejected_ack | queue_not_found
  std::string error;
  std::vector<AckResult> acks;
  std::map<CursorKey, CursorRow> rows;
  std::map<GroupKey, GroupMeta> metas;
  std::vector<EffDlq> dlq;
  std::vector<std::pair<CursorKey, SettleOutcome>> outcomes;
};

// Applies an ack's status to `row` for offset `o` of its live batch: completed settles it and
// every offset of its still-leased batch below it that no ack settled yet (an offset commit), and
// moves the cursor over the settled prefix; failed spends the retry budget and hands the batch
// back, or past the budget moves the message to the DLQ; retry hands back without spending;
// dlq moves it at once. Pure: the engine and transactions share it.
SettleOutcome apply_status(CursorRow& row, Offset o, AckStatus status, int64_t retry_limit);

// How far an ack's transactionId is looked for on each side of its group's cursor, outside
// the leased batch (Engine::resolve_ack): so many messages, in so many rows at most.
constexpr uint64_t kAckScanMessagesMax = 65536;
constexpr uint64_t kAckScanRowsMax = 1024;
// An ack call's acks of one group on one partition, next to each other in the call, find their
// window once; a run of so many or more looks in the leased batch's hashes sorted once rather
// than scanning the batch for each ack.
constexpr size_t kAckIndexedRunMin = 4;

struct EngineStats {
  uint64_t lease_expiries = 0;
  uint64_t redeliveries = 0;
  uint64_t dlq_moves = 0;
};

class Engine {
 public:
  static constexpr uint32_t kPopPartitionsMax = 64;

  Engine(Env& env, const Store& store, const NodeConfig& config, RowHashes& hashes)
      : env_(env), store_(store), config_(config), hashes_(hashes) {}

  // Takes the committed cursor rows and subscriptions as the live state (after recovery):
  // the rows are read in the store, not copied. A lease timed by another node's clock is held
  // `foreign_lease_grace_us` past its expiry (the clock-skew bound), so no lease it granted
  // is handed out again early by this node's clock.
  void load(int64_t foreign_lease_grace_us = 0);
  // Forgets everything in memory (a node that stopped leading); load() starts it again.
  void reset();

  enum class PopOutcome { delivered, empty, error };
  struct PopResult {
    PopOutcome outcome = PopOutcome::empty;
    PopReply reply;
    ErrorReply error;
  };
  PopResult pop(const PopCmd& cmd, int64_t now_us);

  // `changed` tells whether any row moved (the answer must then wait for a checkpoint).
  AckReply ack(AckCmd cmd, int64_t now_us, bool* changed);

  // Pushes the expiry of every live partition of a lease to now + seconds (never earlier).
  LeaseExtendReply extend(const LeaseExtendCmd& cmd, int64_t now_us);
  // Group administration; changes ride the next checkpoint like acks do.
  GroupChangeReply delete_group(const GroupDeleteCmd& cmd);
  GroupChangeReply seek(const SeekCmd& cmd);
  GroupChangeReply update_subscription(const SubscriptionCmd& cmd);
  // The partitions on which some group holds a live lease (every row is visited).
  std::set<PartitionId> leased_partitions(int64_t now_us) const;
  // A whole list of partitions, read a slice at a time so that a list of millions does not
  // hold the node while it is read: one group's details (every partition of each queue it
  // reads; with `group` empty, of every group), or with `lagging_min_s` set every group's
  // partitions that lag (something unconsumed, the oldest of it more than that many seconds
  // old; only those are held). A group's partitions come in id order; its sums count every
  // partition read. Groups and partitions added or deleted between slices are listed as the
  // walk finds them (a group deleted behind the walk keeps what was read of it).
  struct GroupListing {
    std::string group;
    std::optional<int64_t> lagging_min_s;
    int64_t now_us = 0;  // the request's time: every slice counts lag against it
    GroupsReply reply;
    // Where the walk goes on: this group (or the next one after it), from this partition.
    std::optional<GroupKey> at;
    PartitionId from;
    bool open = false;  // reply.groups.back() is the view of *at, partly read
  };
  // Goes on with `l` for at most *budget partitions (taken from it); true once it is whole.
  bool list_groups(GroupListing* l, size_t* budget) const;
  // The capacity a lagging list grows to when its `rows` fill it after `read` of its queue's
  // `total` partitions: doubled until kLaggingSamplePartitions are read, then the share that
  // lags so far projected over the queue, a quarter more, never more than rows + (total - read).
  static constexpr size_t kLaggingSamplePartitions = 4096;
  static size_t lagging_rows_ahead(size_t rows, size_t read, size_t total);

  // One group's details a page of partitions at a time (GroupDetailsCmd with a limit): every
  // partition's lag counted, only the page's partitions listed.
  GroupsReply group_page(const GroupDetailsCmd& cmd, int64_t now_us) const;

  static constexpr size_t kLagWalkSlicePartitions = size_t{1} << 15;
  // How often the node calls lag_step() while lag_walks_due().
  static constexpr int64_t kLagStepEveryMs = 100;
  // Each group's lag without its partitions, for metrics and the group list. A group on a
  // queue of at most kLagWalkSlicePartitions partitions is counted at the call. A larger one
  // shows the figures of its last complete walk by lag_step(), which goes over at most that
  // many partitions a call, so no call holds the node for a walk of millions of partitions;
  // before its first walk it is counted at the call if `walk_unknown`, else left out.
  GroupsReply lag_summary(int64_t now_us, bool walk_unknown);
  void lag_step(int64_t now_us);
  // Whether some group's lag is walked (lag_step() has work).
  bool lag_walks_due() const { return !lag_walks_.empty() || !lag_shown_.empty(); }

  TxnConsumePlan plan_txn(const TxnCmd& cmd, int64_t now_us);
  // Makes the plan live and returns the effects that carry it, for the transaction's entry.
  std::vector<Effect> commit_txn(TxnConsumePlan&& plan);

  // Hands a delivered lease back (its client went away before the answer).
  void hand_back(const PopReply& reply);

  bool dirty() const {
    return !dirty_rows_.empty() || !dirty_metas_.empty() || !dlq_.empty() ||
           !deleted_rows_.empty() || !deleted_metas_.empty();
  }
  // The changed rows, subscriptions and dead letters since the last call, as effects.
  std::vector<Effect> take_checkpoint();

  // Called for each committed entry: appends make partitions claimable.
  void on_applied(const Entry& entry);
  // Releases leases that expired by `now_us`.
  void expire(int64_t now_us);
  // The earliest live lease expiry, or INT64_MAX.
  int64_t next_expiry_us() const;
  // Queues where something became claimable since the last call (to wake long polls).
  std::vector<QueueId> take_woken();

  const EngineStats& stats() const { return stats_; }
  // The cursor rows held beside the store's (EngineRows::overlay_size()).
  size_t rows_held() const { return rows_.overlay_size(); }
  // The leases held for expiry and extension: each row's live (or expired, not yet reaped)
  // lease counts once.
  size_t leases_held() const { return expiries_.size(); }

 private:
  // A group's claim order on one queue. The partitions the queue had when the set was made
  // are not listed up front: [scan_from, scan_end) is the part of them a pop has not looked
  // at yet, in id order, and comes before `order` (partitions made claimable since, or passed
  // over by the scan). So a group's first pop on a queue of millions of partitions looks only
  // as far as it needs, and the set holds only what became claimable after the scan.
  struct ReadySet {
    bool initialized = false;
    PartitionId scan_from;
    PartitionId scan_end;
    std::set<std::pair<uint64_t, PartitionId>> order;
    std::map<PartitionId, uint64_t> seq_of;
    bool scanning(PartitionId pid) const { return pid >= scan_from && pid < scan_end; }
  };

  const GroupMeta& ensure_group(const std::string& group, const QueueState& q, const PopCmd& cmd,
                                int64_t now_us);
  Offset start_offset(const GroupMeta& meta, const PartitionState& p) const;
  CursorRow& ensure_row(const std::string& group, const PartitionState& p);
  void make_ready(const std::string& group, const PartitionState& p);
  ReadySet& ready_set(const std::string& group, const QueueState& q);
  // The next partition of the set's scan that has something for the group, or none once the
  // scan reached its end. Moves the scan past what it looked at.
  const PartitionState* scan_next(const std::string& group, const QueueState& q, ReadySet& rs);
  PopResult pop_queue(const PopCmd& cmd, int64_t now_us);
  // Leases the deliverable messages of `p` (at most *budget) into `res`, under res's lease id.
  void claim(const std::string& group, const PartitionState& p, const PopCmd& cmd, int64_t now_us,
             uint32_t* budget, PopResult* res);
  // When the partition's next message is not yet deliverable (delayedProcessing, windowBuffer)
  // it is set aside until it is; returns true then.
  bool defer_until_visible(const std::string& group, const PartitionState& p, const CursorRow& row,
                           int64_t now_us);
  int64_t visible_at_us(const PartitionState& p, Offset next) const;
  bool read_messages(const PartitionState& p, const std::vector<Offset>& offsets,
                     std::vector<PopMessage>* out, std::string* error);
  // Checks and applies the call's ack number `index` on the plan's shadow rows.
  // `found`: the ack's offset as resolve_ack found it.
  bool plan_txn_ack(const TxnAck& ack, uint32_t index, const Result<std::optional<Offset>>& found,
                    const std::optional<LeaseId>& lease, int64_t now_us, TxnConsumePlan* plan);
  bool plan_position(const PositionOp& pos, TxnConsumePlan* plan);
  CursorRow shadow_row(const std::string& group, const PartitionState& p,
                       const TxnConsumePlan& plan) const;
  // The offset an ack names: looked up in the group's leased batch first, then in the
  // messages just ahead of the group's cursor (the first match), then in those just behind it
  // (the last match: a repeat of an ack that applied), each side within kAckScanMessagesMax
  // messages and kAckScanRowsMax rows, so that an ack never reads the whole partition. An
  // error when a row's hashes cannot be read.
  Result<std::optional<Offset>> resolve_ack(const std::string& group, const PartitionState& p,
                                            const Hash128& txn_hash);
  // Where resolve_ack looks for a group's ack on a partition: the leased batch and the cursor.
  struct AckWindow {
    Offset batch_start;
    Offset batch_end;
    Offset cursor;
  };
  // A leased batch's hashes sorted by (hash, offset): a hash's first offset in the batch.
  using BatchHashes = std::vector<std::pair<Hash128, Offset>>;
  AckWindow ack_window(const std::string& group, const PartitionState& p) const;
  Result<std::optional<Offset>> resolve_in(const PartitionState& p, const AckWindow& w,
                                           const Hash128& txn_hash, const BatchHashes* batch);
  // resolve_ack for each item of `run` (acks of one group on `p`), into `found` in order.
  void resolve_run(const PartitionState& p, std::span<const AckItem> run,
                   std::vector<Result<std::optional<Offset>>>* found);
  // A group's partition while a call applies its acks there, looked up once for them.
  struct AckTarget {
    const PartitionState* p = nullptr;
    const QueueState* q = nullptr;
    const CursorRow* row = nullptr;  // the row as the acks before left it, or none yet
    CursorRow* changing = nullptr;   // the same row once an ack of the run changed it
  };
  AckTarget ack_target(const std::string& group, PartitionId pid) const;
  // Each moves the item's transaction id into the result: an ack applied at offset `o`, an
  // ack whose message was not found, an ack not applied as an earlier signal stopped it.
  AckResult ack_one(AckItem& item, uint32_t index, Offset o, int64_t now_us, AckTarget* t,
                    bool* changed);
  AckResult refuse_unresolved(AckItem& item, uint32_t index, const PartitionState* p);
  // The answer's frame: its index, transaction id, queue and partition names.
  AckResult result_for(AckItem& item, uint32_t index, const PartitionState& p) const;
  AckResult result_for(AckItem& item, uint32_t index, const PartitionState& p,
                       const QueueState& q) const;
  AckResult redelivered(AckItem& item, uint32_t index, Offset stop);
  // Side effects of an applied ack: the DLQ record, and a released partition made claimable.
  void finish(const std::string& group, const PartitionState& p, CursorRow& row, Offset o,
              const std::string& error, const SettleOutcome& out, std::vector<EffDlq>* dlq_sink);
  void mark_dirty(const std::string& group, PartitionId pid) {
    dirty_rows_.insert(CursorKey{group, pid});
    deleted_rows_.erase(CursorKey{group, pid});
  }
  // Forgets the lease `lease` of the row at `key`, which expired at or was released before
  // `expires_us`: its expiry and its place in the lease's rows.
  void forget_lease(const CursorKey& key, LeaseId lease, int64_t expires_us);
  void drop_queue(QueueId queue);
  void drop_partition(const EffPartitionDelete& e);
  GroupView view_of(const GroupKey& key, const GroupMeta& meta, int64_t now_us) const;
  // Reads partitions of `q` from l->from into l's open view, at most *budget of them; true
  // when the queue's last partition is read.
  bool list_partitions(GroupListing* l, const GroupMeta& meta, const QueueState& q,
                       size_t* budget) const;
  GroupView view_header(const GroupKey& key, const GroupMeta& meta) const;
  // Adds partition `p`'s lag for the group (whose cursor row on it is `row`, if any) to `v`,
  // and fills `pv` with the partition's detail when given.
  void tally(const GroupMeta& meta, const PartitionState& p, const CursorRow* row, int64_t now_us,
             GroupView* v, GroupPartitionView* pv) const;
  // Whether the group's lag is walked a slice at a time (its queue is larger than a slice).
  bool walked_lag(const GroupKey& key) const;
  // Goes on with the group's walk for at most *budget partitions (taken from it); true when
  // the walk finished and its figures are shown.
  bool walk_slice(const GroupKey& key, const GroupMeta& meta, const QueueState& q, int64_t now_us,
                  size_t* budget);

  Env& env_;
  const Store& store_;
  const NodeConfig& config_;
  RowHashes& hashes_;
  // Set by each pop: messages created at or after it are held back (push maintenance).
  int64_t hidden_from_us_ = INT64_MAX;
  EngineRows rows_{store_.cursors()};
  std::map<GroupKey, GroupMeta> metas_;
  std::map<GroupKey, ReadySet> ready_;
  std::map<QueueId, std::set<std::string>> groups_of_queue_;
  // Each lease a row was given, at its expiry: (expires_us, row, lease). One per row and lease
  // (an extension moves it); a lease released before it expires leaves at once.
  std::set<std::tuple<int64_t, CursorKey, LeaseId>> expiries_;
  std::set<std::pair<int64_t, CursorKey>> deferred_;  // not deliverable before the time
  // For lease extension: each lease's rows, until each has released or expired it.
  std::map<LeaseId, std::vector<CursorKey>> leases_;
  std::set<CursorKey> dirty_rows_;
  std::set<GroupKey> dirty_metas_;
  std::set<CursorKey> deleted_rows_;
  std::set<GroupKey> deleted_metas_;
  std::vector<EffDlq> dlq_;
  std::set<QueueId> woken_;
  uint64_t ready_seq_ = 0;
  struct LagWalk {
    PartitionId from;  // the next partition to count
    GroupView sum;     // what the walk counted so far
  };
  std::map<GroupKey, LagWalk> lag_walks_;
  std::map<GroupKey, GroupView> lag_shown_;  // each walked group's last complete walk
  GroupKey lag_at_;                          // the group lag_step() goes on with
  EngineStats stats_;
};

}  // namespace queen
