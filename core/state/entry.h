// A log entry: the effects the planner (or the consumption engine's checkpoint) decided,
// stamped with index, term and the planner's clock. Effects are absolute facts ("append these
// frames to partition 17 at offset 4210"), so apply needs no clock and no randomness.
// The binary form of an entry's record omits the message frames, which live in their
// queue's message records (core/qlog/record.h); decode_entry + attach_frames rebuild it.
#pragma once

#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/common/bytes.h"
#include "core/common/result.h"
#include "core/common/types.h"
#include "core/state/cursor.h"
#include "core/state/queue_options.h"

namespace queen {

struct MessageFrame {
  Uuid message_id;
  std::string transaction_id;
  std::string trace_id;
  std::string payload;
  std::string producer_sub;
  bool operator==(const MessageFrame&) const = default;
};

struct EffCreateQueue {
  QueueId id;
  std::string name;
  QueueOptions options;
  bool operator==(const EffCreateQueue&) const = default;
};

struct EffConfigureQueue {
  QueueId id;
  QueueOptions options;
  bool operator==(const EffConfigureQueue&) const = default;
};

struct EffCreatePartition {
  PartitionId id;
  QueueId queue;
  std::string name;
  bool operator==(const EffCreatePartition&) const = default;
};

struct EffAppend {
  PartitionId pid;
  QueueId queue;
  Offset base;
  uint32_t count = 0;
  std::vector<Hash128> hashes;       // count of them (in the message record on disk)
  std::vector<MessageFrame> frames;  // count of them (in the message record on disk)
  // Or, in an entry a follower took from its leader, no frames but the message record's body
  // as the leader encoded it (hashes and frames): written as is, never decoded into strings.
  Bytes packed;
  bool operator==(const EffAppend&) const = default;
};

struct EffCursor {
  std::string group;
  PartitionId pid;
  CursorRow row;
  bool operator==(const EffCursor&) const = default;
};

struct EffGroupMeta {
  std::string group;
  QueueId queue;
  GroupMeta meta;
  bool operator==(const EffGroupMeta&) const = default;
};

struct EffDlq {
  QueueId queue;
  PartitionId pid;
  std::string group;
  Offset offset;
  std::string error;
  uint32_t retry_count = 0;
  bool operator==(const EffDlq&) const = default;
};

struct KvRow {
  std::string value = "null";  // compact JSON
  uint64_t version = 0;        // from one store-wide counter, so tokens only grow
  int64_t expires_us = 0;      // 0: forever
  int64_t updated_us = 0;
  bool live(int64_t now_us) const { return expires_us == 0 || now_us < expires_us; }
  bool operator==(const KvRow&) const = default;
};

struct EffKvPut {
  std::string ns;
  std::string key;
  KvRow row;
  bool operator==(const EffKvPut&) const = default;
};

struct EffKvDelete {
  std::string ns;
  std::string key;
  bool operator==(const EffKvDelete&) const = default;
};

struct TimerRow {
  std::string partition = "Default";
  int64_t deliver_at_us = 0;
  std::string txn;
  Hash128 txn_hash;
  Uuid message_id;
  std::string payload = "null";
  uint32_t attempts = 0;
  bool operator==(const TimerRow&) const = default;
};

struct EffTimerPut {
  std::string queue;
  std::string timer_key;
  TimerRow row;
  bool operator==(const EffTimerPut&) const = default;
};

struct EffTimerDelete {
  std::string queue;
  std::string timer_key;
  bool operator==(const EffTimerDelete&) const = default;
};

struct EffDlqRemove {
  QueueId queue;
  uint64_t id = 0;
  bool operator==(const EffDlqRemove&) const = default;
};

struct EffCursorDelete {
  std::string group;
  PartitionId pid;
  bool operator==(const EffCursorDelete&) const = default;
};

struct EffGroupMetaDelete {
  std::string group;
  QueueId queue;
  bool operator==(const EffGroupMetaDelete&) const = default;
};

// Removes a queue with its partitions, cursors, subscriptions and dead letters from the
// store. Its log stays on disk (other entries' copies may live there) until compaction.
struct EffDeleteQueue {
  QueueId id;
  bool operator==(const EffDeleteQueue&) const = default;
};

// Marks one message deleted: no group is delivered it again (a live batch holding it can
// still be acked), reads no longer return it, its dead letters go. Its offset stays taken
// and its transactionId stays in the dedup window. Applying it twice changes nothing.
struct EffMessageDelete {
  QueueId queue;
  PartitionId pid;
  Offset offset;
  bool operator==(const EffMessageDelete&) const = default;
};

// The consumer group a dead-lettered timer is listed under.
inline constexpr std::string_view kTimerDlqGroup = "__timer__";

// A timer whose fire failed kTimerFireAttemptsMax times, dead-lettered under group
// `__timer__`: the letter carries the timer's message itself, which never reached its
// partition. Applied with the timer's delete in the same entry.
struct EffTimerDlq {
  QueueId queue;
  std::string timer_key;
  TimerRow row;
  std::string error;
  bool operator==(const EffTimerDlq&) const = default;
};

// A trace event recorded on a stored message (POST /api/v1/traces).
struct EffTrace {
  Uuid id;
  PartitionId pid;
  std::string transaction_id;
  std::string event_type;
  std::string data;
  std::string group;
  std::string worker_id;
  std::vector<std::string> names;
  bool operator==(const EffTrace&) const = default;
};

// A command's answer under its request id, kept until keep_until_us (the request-id window),
// so that a retry under the same id gets the same answer from whichever node leads later, and
// after a restart. `reply` is opaque here (core/node/outcome.h encodes it).
struct EffRequestOutcome {
  Uuid id;
  int64_t keep_until_us = 0;
  std::string reply;
  bool operator==(const EffRequestOutcome&) const = default;
};

// Retention moved a partition's watermarks (the leader's scanner decides; see
// core/node/retention.h): messages below log_start are gone (reads, pops and lag skip them,
// their dead letters go, their payloads' log files may be reclaimed); append rows below
// rows_start (<= log_start) are dropped with their dedup hashes. Watermarks only move up.
struct EffRetention {
  QueueId queue;
  PartitionId pid;
  Offset log_start;
  Offset rows_start;
  bool operator==(const EffRetention&) const = default;
};

// Removes an idle, empty partition (no message kept, no append row left, no dead letter, no
// live lease) with its cursors: the retention scan's cleanup after PARTITION_CLEANUP_DAYS. A
// later push under its name creates a new partition.
struct EffPartitionDelete {
  QueueId queue;
  PartitionId pid;
  bool operator==(const EffPartitionDelete&) const = default;
};

// Drops the traces recorded before `before_us` (QUEEN_RAFT_TRACE_RETENTION_S, decided by the
// leader's retention pass).
struct EffTraceTrim {
  int64_t before_us = 0;
  bool operator==(const EffTraceTrim&) const = default;
};

// One member of the cluster: its id, whether it votes, and where the other nodes (raft_addr)
// and clients (http_addr) reach it, as `host:port` (opaque here: the server parses them).
struct Member {
  NodeId id;
  bool voter = false;
  std::string raft_addr;
  std::string http_addr;
  bool operator==(const Member&) const = default;
};

// The cluster's configuration from this entry on (core/raft/raft.h, Membership): every member,
// by id. Raft takes it into use when the entry is written, and the store keeps it once applied.
struct EffMembership {
  std::vector<Member> members;
  bool operator==(const EffMembership&) const = default;
};

// The disk a member was admitted with (core/raft/raft.h, Membership::disks).
struct DiskPin {
  NodeId id;
  uint64_t disk = 0;
  bool operator==(const DiskPin&) const = default;
};

// Cluster format 2's configuration: EffMembership's members, the disks they are pinned to (the
// identity fence), and the cluster format version, which only rises. Written only once every
// member reads format 2 (core/node/node_membership.cpp raises the version when they all do).
struct EffConfiguration {
  std::vector<Member> members;
  std::vector<DiskPin> disks;  // sorted by id, members only
  uint32_t cluster_version = 1;
  bool operator==(const EffConfiguration&) const = default;
};

// The highest cluster format this build reads and writes. 1: everything before EffConfiguration
// (and a Raft message without its identity trailer); 2: EffConfiguration; 3: store checkpoints
// whose append rows may leave their hashes in their message records (Store::hashes_on_disk).
constexpr uint32_t kFormatMax = 3;

using Effect =
    std::variant<EffCreateQueue, EffConfigureQueue, EffCreatePartition, EffAppend, EffCursor,
                 EffGroupMeta, EffDlq, EffKvPut, EffKvDelete, EffTimerPut, EffTimerDelete,
                 EffDlqRemove, EffCursorDelete, EffGroupMetaDelete, EffDeleteQueue,
                 EffMessageDelete, EffRequestOutcome, EffTimerDlq, EffTrace, EffRetention,
                 EffPartitionDelete, EffTraceTrim, EffMembership, EffConfiguration>;

struct Entry {
  LogIndex index;
  Term term;
  int64_t now_us = 0;
  std::vector<Effect> effects;
  bool operator==(const Entry&) const = default;
};

// The lowest cluster format that reads `e` (a node of a lower one could not decode it).
uint32_t entry_format(const Entry& e);

// One effect's binary form (a tag, then its walk), as in an entry record; the store
// checkpoint reuses it for rows shaped like effects. put_binary/get_binary are the same for
// the binary walk (core/api/binary.h), which finds them by argument-dependent lookup.
void put_binary(ByteWriter& w, const Effect* effect);
void get_binary(ByteReader& r, Effect* out);
void encode_effect(ByteWriter& w, const Effect& effect);
bool decode_effect(ByteReader& r, Effect* out);

// The entry record's body: everything but the frames and hashes of appends.
Bytes encode_entry(const Entry& entry);
void encode_entry(const Entry& entry, ByteWriter& w);
Result<Entry> decode_entry(const uint8_t* data, size_t size);

// The message record's body for one append: hashes and frames; frames_bytes is its size.
Bytes encode_frames(const EffAppend& append);
void encode_frames(const EffAppend& append, ByteWriter& w);
size_t frames_bytes(const EffAppend& append);
Status decode_frames(const uint8_t* data, size_t size, EffAppend* append);
// Decodes the hashes only and keeps the body packed, after checking the frames' framing.
Status decode_frames_packed(const uint8_t* data, size_t size, EffAppend* append);

// The whole entry, frames included: what Raft carries from the leader to its followers.
// Decoded, its appends come packed (EffAppend::packed).
Bytes encode_replicated(const Entry& entry);
Result<Entry> decode_replicated(const uint8_t* data, size_t size);

}  // namespace queen
