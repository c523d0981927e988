// The walks (core/api/binary.h) of the log's effects and of the rows a store checkpoint
// writes: `walk(c, x)` calls `c(x.field1, ...)` with every field of x that its record holds, in
// the order the record has always held them (files written before the walk read the same). An
// append's hashes and frames are not in the entry record (they live in their queue's message
// record, entry.h), so its walk names only the four fields that are.
// tests/core/effect_walk_test.cpp checks every effect's walk against its members.
#pragma once

#include "core/api/walk.h"
#include "core/state/entry.h"
#include "core/state/store.h"

namespace queen {

constexpr MsgState enum_last(MsgState) {
  return MsgState::retried;
}

template <class C>
void walk(C& c, CursorRow& x) {
  c(x.next, x.lease_id, x.lease_expires_us, x.batch_start, x.batch_end, x.retry_count,
    x.delivery_attempt, x.settled, x.consumed_total, x.last_consumed_us, x.handed_back);
}
template <class C>
void walk(C& c, GroupMeta& x) {
  c(x.mode, x.from_us);
}
template <class C>
void walk(C& c, KvRow& x) {
  c(x.value, x.version, x.expires_us, x.updated_us);
}
template <class C>
void walk(C& c, TimerRow& x) {
  c(x.partition, x.deliver_at_us, x.txn, x.txn_hash, x.message_id, x.payload, x.attempts);
}

// ---- effects ----

template <class C>
void walk(C& c, EffCreateQueue& x) {
  c(x.id, x.name, x.options);
}
template <class C>
void walk(C& c, EffConfigureQueue& x) {
  c(x.id, x.options);
}
template <class C>
void walk(C& c, EffCreatePartition& x) {
  c(x.id, x.queue, x.name);
}
template <class C>
void walk(C& c, EffAppend& x) {  // hashes, frames and packed: in the message record
  c(x.pid, x.queue, x.base, x.count);
}
template <class C>
void walk(C& c, EffCursor& x) {
  c(x.group, x.pid, x.row);
}
template <class C>
void walk(C& c, EffGroupMeta& x) {
  c(x.group, x.queue, x.meta);
}
template <class C>
void walk(C& c, EffDlq& x) {
  c(x.queue, x.pid, x.group, x.offset, x.error, x.retry_count);
}
template <class C>
void walk(C& c, EffKvPut& x) {
  c(x.ns, x.key, x.row);
}
template <class C>
void walk(C& c, EffKvDelete& x) {
  c(x.ns, x.key);
}
template <class C>
void walk(C& c, EffTimerPut& x) {
  c(x.queue, x.timer_key, x.row);
}
template <class C>
void walk(C& c, EffTimerDelete& x) {
  c(x.queue, x.timer_key);
}
template <class C>
void walk(C& c, EffDlqRemove& x) {
  c(x.queue, x.id);
}
template <class C>
void walk(C& c, EffCursorDelete& x) {
  c(x.group, x.pid);
}
template <class C>
void walk(C& c, EffGroupMetaDelete& x) {
  c(x.group, x.queue);
}
template <class C>
void walk(C& c, EffDeleteQueue& x) {
  c(x.id);
}
template <class C>
void walk(C& c, EffMessageDelete& x) {
  c(x.queue, x.pid, x.offset);
}
template <class C>
void walk(C& c, EffRequestOutcome& x) {
  c(x.id, x.keep_until_us, x.reply);
}
template <class C>
void walk(C& c, EffTimerDlq& x) {
  c(x.queue, x.timer_key, x.row, x.error);
}
template <class C>
void walk(C& c, EffTrace& x) {
  c(x.id, x.pid, x.transaction_id, x.event_type, x.data, x.group, x.worker_id, x.names);
}
template <class C>
void walk(C& c, EffRetention& x) {
  c(x.queue, x.pid, x.log_start, x.rows_start);
}
template <class C>
void walk(C& c, EffPartitionDelete& x) {
  c(x.queue, x.pid);
}
template <class C>
void walk(C& c, EffTraceTrim& x) {
  c(x.before_us);
}
template <class C>
void walk(C& c, Member& x) {
  c(x.id, x.voter, x.raft_addr, x.http_addr);
}
template <class C>
void walk(C& c, EffMembership& x) {
  c(x.members);
}
template <class C>
void walk(C& c, DiskPin& x) {
  c(x.id, x.disk);
}
template <class C>
void walk(C& c, EffConfiguration& x) {
  c(x.members, x.disks, x.cluster_version);
}

// ---- store checkpoint rows ----

template <class C>
void walk(C& c, RecordLocation& x) {
  c(x.log, x.file_no, x.pos, x.len);
}
template <class C>
void walk(C& c, DlqEntry& x) {
  c(x.id, x.pid, x.group, x.offset, x.error, x.retry_count, x.failed_at_us, x.timer);
}
template <class C>
void walk(C& c, TraceRow& x) {
  c(x.trace, x.created_us);
}

}  // namespace queen
