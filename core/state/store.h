// The committed state of one node: queues, partitions with their append rows (offset
// ranges, creation time, transactionId hashes and where the payloads lie in the queue log)
// and deleted messages, committed cursor rows, subscription metadata and dead letters.
// Apply is a pure function of (store, entry): no clock, no randomness, ordered containers
// only, so every node that applies the same entries holds the same store.
#pragma once

#include <algorithm>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/common/compact_vector.h"
#include "core/common/short_string.h"
#include "core/common/types.h"
#include "core/state/cursor.h"
#include "core/state/cursor_table.h"
#include "core/state/entry.h"
#include "core/state/id_table.h"
#include "core/state/partition_names.h"
#include "core/state/queue_options.h"

namespace queen {

// Where an append's message record lies in its queue log (node-local).
struct RecordLocation {
  LogId log;
  uint32_t file_no = 0;
  uint32_t len = 0;
  uint64_t pos = 0;
  bool operator==(const RecordLocation&) const = default;
};

// A shared log's id has this bit set (core/qlog/log.h: log_of_queue); a queue's own log's id
// is its queue id.
constexpr uint64_t kSharedLogBit = uint64_t{1} << 63;

// One log file: (log, file number).
using LogFileKey = std::pair<LogId, uint32_t>;

// A partition's append: 48 bytes, so that with its vector's header it takes a 56-byte block
// (10M partitions of one append each on a large node). Its record's location is held
// unpacked, the log id in 32 bits (where() and set_where()).
struct AppendRow {
  Offset base;
  int64_t created_us = 0;
  uint64_t record_pos = 0;
  // count of them (rows applied before cluster format 3), or none: read from the record
  // (RowHashes)
  CompactVector<Hash128> hashes;
  uint32_t record_log = 0;  // LogId, the shared-log bit moved from bit 63 to bit 31
  uint32_t record_file_no = 0;
  // 0 once retention released the payloads (a row whose hashes are only in its record keeps
  // it until the row goes)
  uint32_t record_len = 0;
  uint32_t count = 0;
  Offset end() const { return Offset(base.value + count); }
  bool hashes_inline() const { return !hashes.empty(); }
  RecordLocation where() const;
  // Whether `w`'s log id fits the row's 32 bits (a decoded one may not: the checkpoint is
  // then damaged); set_where asserts it.
  static bool fits(const RecordLocation& w) { return (w.log.value & ~kSharedLogBit) >> 31 == 0; }
  void set_where(const RecordLocation& w);
  bool operator==(const AppendRow&) const = default;
};
static_assert(sizeof(AppendRow) == 48, "an append row and its vector's header fit 56 bytes");

struct PartitionState {
  PartitionId id;
  QueueId queue;
  ShortString name;    // 16 bytes, not std::string's 32: 10M partitions on a large node
  Offset next_offset;  // one past the last message
  int64_t created_us = 0;
  CompactVector<AppendRow> rows;  // by base offset
  CompactVector<Offset> deleted;  // sorted: messages deleted by EffMessageDelete
  // Retention: messages below log_start are gone (their payloads released); rows keep their
  // hashes (or their records) for the dedup window until rows_start passes them.
  Offset log_start;
  int64_t last_append_us = 0;
  bool operator==(const PartitionState&) const = default;

  const AppendRow* row_of(Offset o) const;
  bool is_deleted(Offset o) const { return std::binary_search(deleted.begin(), deleted.end(), o); }
  // Deleted, or below log_start (retention): no reader sees it again.
  bool is_gone(Offset o) const { return o < log_start || is_deleted(o); }
  // Messages still kept: not deleted and not below log_start (a delete applied after
  // retention passed its offset is not counted twice).
  uint64_t kept() const {
    return next_offset.value - log_start.value - deleted_in(log_start, next_offset);
  }
  // Kept messages a group whose cursor is `cursor` has still to consume.
  uint64_t unconsumed(Offset cursor) const {
    Offset from = std::min(std::max(cursor, log_start), next_offset);
    return next_offset.value - from.value - deleted_in(from, next_offset);
  }
  // Deleted messages in [from, to).
  uint64_t deleted_in(Offset from, Offset to) const;
  // The first offset whose append was created at or after `us`.
  Offset first_at_or_after(int64_t us) const;
};

struct QueueState {
  QueueId id;
  std::string name;
  QueueOptions options;
  int64_t created_us = 0;
  // By id, the order they were made in (their names: Store::partition(queue, name)).
  std::vector<PartitionId> partitions;
  bool operator==(const QueueState&) const = default;
};

struct CursorKey {
  std::string group;
  PartitionId pid;
  auto operator<=>(const CursorKey&) const = default;
};

struct GroupKey {
  std::string group;
  QueueId queue;
  auto operator<=>(const GroupKey&) const = default;
};

using KvKey = std::pair<std::string, std::string>;     // (namespace, key)
using TimerKey = std::pair<std::string, std::string>;  // (queue, timerKey)

struct DlqEntry {
  uint64_t id = 0;  // store-wide, in the order dead letters were logged
  PartitionId pid;
  std::string group;
  Offset offset;
  std::string error;
  uint32_t retry_count = 0;
  int64_t failed_at_us = 0;
  // A dead-lettered timer (group __timer__): its message, which has no partition offset.
  std::optional<TimerRow> timer;
  bool operator==(const DlqEntry&) const = default;
};

struct TraceRow {
  EffTrace trace;
  int64_t created_us = 0;
  bool operator==(const TraceRow&) const = default;
};

// Traces are kept at most this many, the oldest going first (and for
// QUEEN_RAFT_TRACE_RETENTION_S: EffTraceTrim).
constexpr size_t kTraceRowsMax = 200000;

// The partitions appended to since some applied index, each with the base offset of its first
// append since then; sorted by partition, one pair each (see appends_since).
using AppendsSince = std::vector<std::pair<PartitionId, Offset>>;
// Sorts and folds a log of (partition, base offset) pairs, in apply order, into AppendsSince.
AppendsSince appends_since(std::vector<std::pair<PartitionId, Offset>> appended);

// A queue's message counts, summed over its partitions and kept as they change, so that a
// queue list or a metrics answer does not walk every partition (at 10M partitions such a
// walk held the node thread for 0.24 s).
struct QueueCounts {
  uint64_t kept = 0;        // kept(): neither deleted nor below log_start
  uint64_t unconsumed = 0;  // unconsumed() at the queue-mode group's committed cursor
  uint64_t deleted = 0;     // deleted.size()
  bool operator==(const QueueCounts&) const = default;
};

// The queue-mode group's name (queue mode: pops without a consumerGroup).
inline constexpr const char* kQueueModeGroup = "__QUEUE_MODE__";

// Partition ids stay below 2^48 (the name index keeps 48 bits of id): about 10^14 partitions
// ever made. A store or entry past it is refused as corrupt rather than crash the node.
constexpr uint64_t kPartitionIdsMax = PartitionNames::kIdsMax;

class Store {
 public:
  using Partitions = IdTable<PartitionState>;
  const QueueState* queue(const std::string& name) const;
  const QueueState* queue(QueueId id) const;
  const PartitionState* partition(PartitionId id) const;
  const PartitionState* partition(const std::string& queue, const std::string& name) const;
  const PartitionState* partition(QueueId queue, std::string_view name) const;
  const CursorRow* cursor(const std::string& group, PartitionId pid) const;
  const GroupMeta* group_meta(const std::string& group, QueueId queue) const;

  // Applies a committed entry. `locations` gives, per EffAppend in order, where its
  // message record lies. An entry whose effects contradict the store (a diverged log, a
  // damaged folder) is an error that says what it found and how to repair the node; the
  // store may then be half changed, and the node must stop.
  Status apply(const Entry& entry, const std::vector<RecordLocation>& locations);

  LogIndex applied() const { return applied_; }
  // Whether new append rows leave their transactionId hashes in their message records
  // (core/qlog/row_hashes.h) instead of memory and checkpoints: from cluster format 3, when
  // every member reads checkpoints without them, or on a node of its own (set_standalone,
  // which a decoded store must be told again).
  bool hashes_on_disk() const { return standalone_ || configuration_.cluster_version >= 3; }
  void set_standalone() { standalone_ = true; }
  QueueId next_queue_id() const { return QueueId(queue_ids_ + 1); }
  PartitionId next_partition_id() const { return PartitionId(partition_ids_ + 1); }
  const DlqEntry* dlq_entry(uint64_t id, QueueId* queue) const;
  int64_t last_now_us() const { return last_now_us_; }

  const std::map<QueueId, QueueState>& queues() const { return queues_; }
  const Partitions& partitions() const { return partitions_; }
  const CursorTable& cursors() const { return cursors_; }
  const std::map<GroupKey, GroupMeta>& groups() const { return groups_; }
  const std::map<QueueId, std::vector<DlqEntry>>& dlq() const { return dlq_; }
  const std::map<KvKey, KvRow>& kv() const { return kv_; }
  const KvRow* kv_row(const KvKey& key) const;
  uint64_t kv_version() const { return kv_version_; }
  // Rows with a lifetime, by expiry.
  const std::set<std::pair<int64_t, KvKey>>& kv_expiries() const { return kv_expiries_; }
  const std::map<TimerKey, TimerRow>& timers() const { return timers_; }
  // Timers by due time.
  const std::set<std::pair<int64_t, TimerKey>>& timers_due() const { return timers_due_; }

  // Answers recorded under request ids (EffRequestOutcome), until their keep_until_us passes
  // an applied entry's clock; past kRequestOutcomeBytesMax the oldest go first.
  static constexpr uint64_t kRequestOutcomeBytesMax = 64ull << 20;
  struct StoredOutcome {
    uint64_t index = 0;  // the entry that recorded it
    int64_t keep_until_us = 0;
    std::string reply;
    bool operator==(const StoredOutcome&) const = default;
  };
  const std::map<Uuid, StoredOutcome>& request_outcomes() const { return outcomes_; }
  // Oldest first.
  const std::deque<TraceRow>& traces() const { return traces_; }
  // How many append rows point into each log file: a file none points at holds no payload
  // the store still needs.
  const std::map<LogFileKey, uint64_t>& file_refs() const { return file_refs_; }
  // The sums of queue `q`'s partitions (zeros for a queue without partitions).
  QueueCounts queue_counts(QueueId q) const;
  // The partitions whose queue-mode cursor holds a lease, live or not yet released: the only
  // ones with messages in processing.
  const std::set<PartitionId>& queue_mode_leased() const { return leased_; }
  // The cluster's configuration as the newest applied EffMembership or EffConfiguration left
  // it (no members: none yet, the first boot's peer list holds), and that entry's index.
  const std::vector<Member>& membership() const { return configuration_.members; }
  const EffConfiguration& configuration() const { return configuration_; }
  LogIndex membership_index() const { return membership_index_; }

  // The checkpoint body: the whole store (derived indexes are rebuilt on decode), so that
  // decode(encode(s)) == s. Framing and checksum are the caller's (core/state/checkpoint.h).
  void encode(ByteWriter& w) const;
  static Result<Store> decode(ByteReader& r);
  // A delta body: the store with only the append rows `since` names written in full; every
  // older row is named by position and taken from the base store on decode. With `base` the
  // store as it was when `since` began, decode_delta(encode_delta(s, since), base) == s.
  // Old rows change after they are written only as retention does (released below log_start,
  // dropped from the front), which decode redoes from the partition's fields. Request
  // outcomes recorded at or below `base` (the base store's applied index) are named by id
  // and taken from the base too: an outcome never changes once recorded, and one recorded
  // again gets a newer index. `outcomes_by_id` false reads deltas written before that.
  void encode_delta(ByteWriter& w, const AppendsSince& since, LogIndex base) const;
  static Result<Store> decode_delta(ByteReader& r, Store&& base, bool outcomes_by_id);
  // The rows the body encodes one at a time: those of every table but the append rows and
  // the request outcomes (request_outcomes().size(), each far cheaper than such a row).
  uint64_t table_rows() const;
  bool operator==(const Store& o) const;

 private:
  void add_trace(const EffTrace& e, int64_t now_us);
  void apply_retention(const EffRetention& e);
  void delete_partition(const EffPartitionDelete& e);
  // Drops a partition with its rows' file references and its name (not its cursors).
  void erase_partition(PartitionId pid);
  void erase_cursors_of(PartitionId pid);
  // Files `p` (already in partitions_) under its name; rebuilds the names when full.
  void name_partition(const PartitionState& p);
  void rebuild_names(PartitionNames::Fill fill);
  void ref_file(const RecordLocation& where, int delta);
  // Adds (sign 1) or takes away (-1) `p`'s share of its queue's counts; a change to a
  // partition or to its queue-mode cursor takes it away before and adds it after.
  void count(const PartitionState& p, int sign);
  void count_unconsumed(const PartitionState& p, Offset cursor, int sign);
  const CursorRow* queue_mode_cursor(PartitionId pid) const;
  // Sets (or, with nullopt, erases) a cursor row, keeping the counts and leased_.
  void set_cursor(const std::string& group, PartitionId pid, std::optional<CursorRow> row);
  // A checkpoint's partitions, each filed under its name, in its queue's list and in the log
  // files' references as it is decoded (those are not encoded).
  void decode_partitions(ByteReader& r, Store* base, uint32_t format);
  // What else a decoded checkpoint leaves out: the queue names; the KV, timer and outcome
  // orders.
  void rebuild_indexes();
  void encode_with(ByteWriter& w, const AppendsSince* since, LogIndex base) const;
  void encode_outcomes(ByteWriter& w, LogIndex base) const;
  static Result<Store> decode_with(ByteReader& r, Store* base, bool outcomes_by_id);
  std::map<LogFileKey, uint64_t> file_refs_;
  std::deque<TraceRow> traces_;
  void delete_queue(QueueId id);
  void delete_message(const EffMessageDelete& e);

  LogIndex applied_;
  bool standalone_ = false;
  bool disk_rows_ = false;  // some append row keeps its hashes only in its record
  EffConfiguration configuration_;
  LogIndex membership_index_;
  int64_t last_now_us_ = 0;
  uint64_t queue_ids_ = 0;  // ids minted so far (never reused)
  uint64_t partition_ids_ = 0;
  uint64_t dlq_ids_ = 0;
  std::map<std::string, QueueId> queue_names_;
  std::map<QueueId, QueueState> queues_;
  Partitions partitions_;           // by id
  PartitionNames partition_names_;  // (queue, name) -> id
  std::map<QueueId, QueueCounts> queue_counts_;  // derived; no entry: all zero
  std::set<PartitionId> leased_;
  CursorTable cursors_;
  std::map<GroupKey, GroupMeta> groups_;
  std::map<QueueId, std::vector<DlqEntry>> dlq_;
  std::map<KvKey, KvRow> kv_;
  uint64_t kv_version_ = 0;  // the highest version ever written
  std::set<std::pair<int64_t, KvKey>> kv_expiries_;
  std::map<TimerKey, TimerRow> timers_;
  std::set<std::pair<int64_t, TimerKey>> timers_due_;
  std::map<Uuid, StoredOutcome> outcomes_;
  std::set<std::pair<int64_t, Uuid>> outcome_expiry_;
  uint64_t outcome_bytes_ = 0;
};

}  // namespace queen
