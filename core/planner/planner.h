// The planner: turns pushes and configures into effects of the open entry, against the
// committed store plus an overlay of what in-flight entries will create (queues, partitions,
// offsets). It mints queue and partition ids and assigns gapless offsets; the answer to a
// command is decided here and sent once the entry commits.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/api/replies.h"
#include "core/planner/dedup.h"
#include "core/state/entry.h"
#include "core/state/store.h"
#include "io/env.h"

namespace queen {

// The entry being built: sealed and written when the pipeline has room or it is full.
struct OpenEntry {
  Entry entry;
  std::map<PartitionId, size_t> append_at;  // effect index of each partition's append
  uint32_t commands = 0;
  uint64_t bytes = 0;
  bool empty() const { return entry.effects.empty(); }
};

class Planner {
 public:
  Planner(Env& env, const Store& store, RowHashes& hashes)
      : env_(env), store_(store), dedup_(store, hashes) {}

  // Dedup first (a duplicate keeps its original offset and message id and adds nothing),
  // then one gapless run of offsets per partition for the survivors. Payloads of encrypted
  // queues are sealed (core/seal/seal.h); when one cannot be, nothing is planned and the
  // reply is `refused`. Takes the items: their payloads move into the entry, not copied.
  PushReply plan_push(std::vector<PushItem> items, int64_t now_us, OpenEntry* open);
  // How many items ahead of the one being planned a push's dedup lookups are prefetched: far
  // enough for the loads to overlap, near enough that what they load is still in L1.
  static constexpr size_t kPrefetchAhead = 8;
  // Whether the payloads of `items` could be sealed, checked before a transaction plans
  // anything: the refusal plan_push would give, or nothing. Plans nothing.
  std::optional<ErrorReply> seal_refusal(const std::vector<PushItem>& items);
  // Seals, in place, the payload of each timer `ops` schedules into an encrypted queue, so
  // a timer's payload is never stored in the clear; the refusal when one cannot be sealed.
  std::optional<ErrorReply> seal_timer_payloads(std::vector<TimerOp>* ops);
  ConfigureReply plan_configure(const ConfigureCmd& cmd, OpenEntry* open);
  // Deletes a queue; a later push under its name creates a new one. False if none.
  bool plan_delete_queue(const std::string& name, OpenEntry* open);
  // Deletes an idle partition; a later push under its name creates a new one.
  void plan_delete_partition(const PartitionState& p, OpenEntry* open);
  // Whether appends to `pid` are planned but not applied yet.
  bool appending(PartitionId pid) const { return planned_next_.contains(pid); }
  // The first item that duplicates a message already stored or in flight (a repeat within
  // `items` itself is not one); plans nothing. An error when a row's hashes cannot be read.
  Result<std::optional<PushResult>> find_duplicate(const std::vector<PushItem>& items,
                                                   int64_t now_us);
  // Forgets what `entry` planned once the store holds it.
  void on_applied(const Entry& entry);
  // Forgets every plan not yet applied (a node that stopped leading); the store is the truth.
  void reset();
  // The options a queue has (or will have once in-flight entries land).
  std::optional<QueueOptions> queue_options(const std::string& name) const;
  const DedupIndex& dedup() const { return dedup_; }
  DedupIndex& dedup() { return dedup_; }

 private:
  struct QueueView {
    QueueId id;
    QueueOptions options;
  };
  std::optional<QueueView> find_queue(const std::string& name) const;
  QueueView ensure_queue(const std::string& name, const QueueOptions& created_with,
                         OpenEntry* open);
  PartitionId ensure_partition(QueueId queue, const std::string& name, OpenEntry* open);
  // Where a push item goes. The items of one push mostly name one queue and partition, so
  // plan_push resolves a target once per run of items naming the same.
  struct PushTarget {
    std::string queue, partition;
    QueueId queue_id;
    PartitionId pid;
    int64_t dedup_window_us = 0;
  };
  PushTarget push_target(const PushItem& item, OpenEntry* open);
  static size_t end_of_run(const std::vector<PushItem>& items, size_t first);
  static void prefetch_ahead(DedupIndex::Run& dedup, const std::vector<PushItem>& items, size_t i,
                             size_t run_end);
  static void reserve(EffAppend& a, size_t n);
  std::optional<PushTarget> dedup_target(const PushItem& item) const;
  Offset next_offset(PartitionId pid) const;
  EffAppend& append_of(PartitionId pid, QueueId queue, OpenEntry* open);

  Uuid message_id_at(PartitionId pid, Offset o);
  // Seals the payload of each item bound for an encrypted queue into `sealed`, by item index
  // (left empty when none is); the refusal when one cannot be sealed.
  std::optional<ErrorReply> seal_payloads(const std::vector<PushItem>& items,
                                          std::vector<std::optional<std::string>>* sealed);
  bool encrypted(const std::string& queue) const;

  Env& env_;
  const Store& store_;
  DedupIndex dedup_;
  std::map<std::string, QueueView> pending_queues_;
  std::map<std::string, QueueId> deleted_queues_;  // deletions in flight, by name
  std::map<std::pair<QueueId, std::string>, PartitionId> pending_partitions_;
  std::map<std::pair<QueueId, std::string>, PartitionId> deleted_partitions_;  // in flight
  std::map<PartitionId, Offset> planned_next_;
  uint64_t queues_planned_ = 0;  // ids minted beyond the store's
  uint64_t partitions_planned_ = 0;
};

QueueOptions push_created_options(const std::string& queue_name);

}  // namespace queen
