// One walk over the fields of every command and reply struct (core/api), in declaration
// order: `walk(c, x)` calls `c(x.field1, x.field2, ...)` once with every field of x. The
// command codec encodes and decodes through it; tests count the fields it names against the
// struct's members, so a field added to a struct and left out here fails a test.
#pragma once

#include "core/api/replies.h"

namespace queen {

// The last value of each enum a walk meets, so a decoder can refuse a byte past it.
constexpr SubscriptionMode enum_last(SubscriptionMode) {
  return SubscriptionMode::from_time;
}
constexpr AckStatus enum_last(AckStatus) {
  return AckStatus::dlq;
}
constexpr KvOpKind enum_last(KvOpKind) {
  return KvOpKind::check;
}
constexpr LockOpKind enum_last(LockOpKind) {
  return LockOpKind::get;
}
constexpr TimerOpKind enum_last(TimerOpKind) {
  return TimerOpKind::cancel;
}
constexpr TimerQueryKind enum_last(TimerQueryKind) {
  return TimerQueryKind::count;
}
constexpr PushStatus enum_last(PushStatus) {
  return PushStatus::buffered;
}
constexpr TxnResultType enum_last(TxnResultType) {
  return TxnResultType::position;
}
constexpr TraceQueryKind enum_last(TraceQueryKind) {
  return TraceQueryKind::names;
}

// ---- commands ----

template <class C>
void walk(C& c, QueueOptions& x) {
  c(x.lease_time_s, x.retry_limit, x.retry_delay_ms, x.priority, x.max_size, x.ttl_s,
    x.dead_letter_queue, x.dlq_after_max_retries, x.dedup_window_s, x.delayed_processing_s,
    x.window_buffer_s, x.retention_enabled, x.retention_s, x.completed_retention_s,
    x.max_wait_time_s, x.encryption_enabled, x.ns, x.task, x.min_pop_wait_time_ms);
}
template <class C>
void walk(C& c, QueueOptionsPatch& x) {
  c(x.lease_time_s, x.retry_limit, x.retry_delay_ms, x.priority, x.max_size, x.ttl_s,
    x.dead_letter_queue, x.dlq_after_max_retries, x.dedup_window_s, x.delayed_processing_s,
    x.window_buffer_s, x.retention_enabled, x.retention_s, x.completed_retention_s,
    x.max_wait_time_s, x.encryption_enabled, x.ns, x.task, x.min_pop_wait_time_ms);
}
template <class C>
void walk(C& c, PushItem& x) {
  c(x.queue, x.partition, x.transaction_id, x.txn_hash, x.message_id, x.payload, x.trace_id,
    x.payload_sealed, x.producer_sub, x.txn_minted);
}
template <class C>
void walk(C& c, PushCmd& x) {
  c(x.items);
}
template <class C>
void walk(C& c, PopCmd& x) {
  c(x.queue, x.ns, x.task, x.partition, x.group, x.batch, x.wait, x.subscription_mode,
    x.subscription_from_us, x.auto_ack, x.lease_time_s, x.partitions, x.conflation);
}
template <class C>
void walk(C& c, AckItem& x) {
  c(x.transaction_id, x.txn_hash, x.partition_id, x.lease_id, x.status, x.error, x.group);
}
template <class C>
void walk(C& c, AckCmd& x) {
  c(x.items);
}
template <class C>
void walk(C& c, ConfigureCmd& x) {
  c(x.queue, x.patch, x.replace);
}
template <class C>
void walk(C& c, HealthCmd&) {
  c();
}
template <class C>
void walk(C& c, DlqQueryCmd& x) {
  c(x.queue, x.group, x.partition, x.from_us, x.to_us, x.limit, x.offset);
}
template <class C>
void walk(C& c, KvOp& x) {
  c(x.op, x.ns, x.key, x.keys, x.value, x.ttl_s, x.forever, x.expect, x.required, x.delta, x.min,
    x.max, x.prefix, x.after, x.limit, x.keys_only);
}
template <class C>
void walk(C& c, KvCmd& x) {
  c(x.ops);
}
template <class C>
void walk(C& c, LockOp& x) {
  c(x.op, x.name, x.owner, x.ttl_s, x.limit, x.slot, x.token);
}
template <class C>
void walk(C& c, LockCmd& x) {
  c(x.ops);
}
template <class C>
void walk(C& c, TimerOp& x) {
  c(x.op, x.queue, x.timer_key, x.partition, x.delay_ms, x.txn, x.txn_hash, x.message_id, x.payload,
    x.check_txn);
}
template <class C>
void walk(C& c, TimerCmd& x) {
  c(x.ops);
}
template <class C>
void walk(C& c, TimerQueryCmd& x) {
  c(x.kind, x.queue, x.timer_key, x.after, x.prefix, x.limit);
}
template <class C>
void walk(C& c, PositionOp& x) {
  c(x.queue, x.group, x.partition, x.offset);
}
template <class C>
void walk(C& c, TxnOperation& x) {
  c(x.is_ack, x.ack, x.items);
}
template <class C>
void walk(C& c, TxnCmd& x) {
  c(x.transaction_id, x.operations, x.kv, x.timers, x.positions, x.required_leases);
}
template <class C>
void walk(C& c, LeaseExtendCmd& x) {
  c(x.lease_id, x.seconds);
}
template <class C>
void walk(C& c, GroupListCmd& x) {
  c(x.lagging_min_s);
}
template <class C>
void walk(C& c, GroupDetailsCmd& x) {
  c(x.group, x.queue, x.offset, x.limit, x.search);
}
template <class C>
void walk(C& c, GroupDeleteCmd& x) {
  c(x.group, x.queue, x.delete_metadata);
}
template <class C>
void walk(C& c, SeekCmd& x) {
  c(x.group, x.queue, x.partition, x.to_end, x.timestamp_us);
}
template <class C>
void walk(C& c, SubscriptionCmd& x) {
  c(x.group, x.timestamp_us);
}
template <class C>
void walk(C& c, DlqReplayCmd& x) {
  c(x.dlq_id, x.message_id, x.listed_id, x.partition_id, x.txn_hash);
}
template <class C>
void walk(C& c, QueueListCmd& x) {
  c(x.ns, x.task);
}
template <class C>
void walk(C& c, QueueGetCmd& x) {
  c(x.queue, x.offset, x.limit, x.search);
}
template <class C>
void walk(C& c, QueueDeleteCmd& x) {
  c(x.queue);
}
template <class C>
void walk(C& c, MessageGetCmd& x) {
  c(x.partition_id, x.transaction_id, x.txn_hash);
}
template <class C>
void walk(C& c, MessageBrowseCmd& x) {
  c(x.queue, x.partition, x.ns, x.task, x.status, x.limit, x.from_us, x.to_us);
}
template <class C>
void walk(C& c, MaintenanceCmd& x) {
  c(x.pop, x.enabled);
}
template <class C>
void walk(C& c, MembershipCmd& x) {
  c(x.op, x.ids, x.id, x.raft_addr, x.http_addr);
}
template <class C>
void walk(C& c, FetchEntry& x) {
  c(x.queue, x.partition, x.offset, x.max_bytes);
}
template <class C>
void walk(C& c, FetchCmd& x) {
  c(x.entries, x.min_bytes, x.max_wait_ms);
}
template <class C>
void walk(C& c, FetchOffsetsEntry& x) {
  c(x.queue, x.partition, x.timestamp_us);
}
template <class C>
void walk(C& c, FetchOffsetsCmd& x) {
  c(x.entries);
}
template <class C>
void walk(C& c, PartitionsChangedCmd& x) {
  c(x.queue, x.since_us, x.after, x.limit);
}
template <class C>
void walk(C& c, MetricsCmd&) {
  c();
}
template <class C>
void walk(C& c, MessageDeleteCmd& x) {
  c(x.partition_id, x.transaction_id, x.txn_hash);
}
template <class C>
void walk(C& c, TraceRecordCmd& x) {
  c(x.partition_id, x.transaction_id, x.txn_hash, x.trace_id, x.event_type, x.data, x.group,
    x.worker_id, x.names);
}
template <class C>
void walk(C& c, TraceQueryCmd& x) {
  c(x.kind, x.partition_id, x.transaction_id, x.name, x.limit, x.offset);
}

// ---- replies ----

template <class C>
void walk(C& c, ErrorReply& x) {
  c(x.code, x.message, x.retry_after_s, x.leader);
}
template <class C>
void walk(C& c, PushResult& x) {
  c(x.index, x.status, x.message_id, x.transaction_id, x.queue, x.partition, x.partition_id,
    x.offset, x.error);
}
template <class C>
void walk(C& c, PushReply& x) {
  c(x.results, x.refused);
}
template <class C>
void walk(C& c, PopMessage& x) {
  c(x.queue, x.partition, x.partition_id, x.offset, x.transaction_id, x.message_id, x.trace_id,
    x.created_us, x.payload, x.delivery_attempt, x.lease_id, x.producer_sub);
}
template <class C>
void walk(C& c, PopReply& x) {
  c(x.queue, x.group, x.lease_id, x.partitions_claimed, x.messages, x.empty_reason);
}
template <class C>
void walk(C& c, AckResult& x) {
  c(x.index, x.transaction_id, x.success, x.error, x.lease_released, x.dlq, x.noop, x.queue,
    x.partition);
}
template <class C>
void walk(C& c, AckReply& x) {
  c(x.results);
}
template <class C>
void walk(C& c, ConfigureReply& x) {
  c(x.queue, x.queue_id, x.default_partition_id, x.options);
}
template <class C>
void walk(C& c, HealthReply& x) {
  c(x.role, x.node_id, x.leader, x.settled, x.term, x.commit_index, x.applied_index, x.queues,
    x.partitions, x.cluster_version, x.format_max, x.fenced);
}
template <class C>
void walk(C& c, DlqRecord& x) {
  c(x.id, x.queue, x.partition, x.partition_id, x.group, x.offset, x.message_id, x.transaction_id,
    x.error, x.retry_count, x.failed_at_us, x.payload, x.created_us, x.producer_sub);
}
template <class C>
void walk(C& c, DlqReply& x) {
  c(x.records, x.total);
}
template <class C>
void walk(C& c, KvRowView& x) {
  c(x.key, x.value, x.version, x.expires_us, x.updated_us);
}
template <class C>
void walk(C& c, KvResult& x) {
  c(x.index, x.op, x.applied, x.reason, x.found, x.row, x.rows, x.missing, x.truncated,
    x.next_after);
}
template <class C>
void walk(C& c, KvReply& x) {
  c(x.ok, x.results, x.failed_index, x.kv_reason, x.failed_row);
}
template <class C>
void walk(C& c, LockHolder& x) {
  c(x.slot, x.owner, x.token, x.expires_us, x.since_us, x.renewed_us);
}
template <class C>
void walk(C& c, LockResult& x) {
  c(x.index, x.op, x.ok, x.already, x.reason, x.name, x.slot, x.token, x.owner, x.expires_us,
    x.holders);
}
template <class C>
void walk(C& c, LockReply& x) {
  c(x.results);
}
template <class C>
void walk(C& c, TimerResult& x) {
  c(x.index, x.ok, x.status, x.queue, x.timer_key, x.txn, x.message_id, x.deliver_at_us);
}
template <class C>
void walk(C& c, TimerReply& x) {
  c(x.results);
}
template <class C>
void walk(C& c, TimerView& x) {
  c(x.queue, x.timer_key, x.partition, x.txn, x.message_id, x.deliver_at_us, x.attempts, x.payload);
}
template <class C>
void walk(C& c, TimerQueryReply& x) {
  c(x.timers, x.count, x.found, x.truncated);
}
template <class C>
void walk(C& c, TxnResult& x) {
  c(x.index, x.type, x.op_index, x.success, x.ack, x.pushes, x.kv, x.timer);
}
template <class C>
void walk(C& c, TxnReply& x) {
  c(x.transaction_id, x.success, x.reason, x.error, x.results, x.failed_index, x.kv_reason,
    x.failed_row);
}
template <class C>
void walk(C& c, LeaseExtendReply& x) {
  c(x.lease_id, x.success, x.error, x.expires_us, x.renewed);
}
template <class C>
void walk(C& c, GroupPartitionView& x) {
  c(x.queue, x.partition, x.partition_id, x.cursor, x.offset_lag, x.time_lag_s, x.lease_active,
    x.lease_id, x.total_consumed, x.last_consumed_us, x.oldest_unconsumed_us);
}
template <class C>
void walk(C& c, GroupView& x) {
  c(x.group, x.queue, x.mode, x.subscription_us, x.members, x.partitions_with_lag, x.total_lag,
    x.max_time_lag_s, x.partitions, x.partitions_matched);
}
template <class C>
void walk(C& c, GroupsReply& x) {
  c(x.groups, x.lagging);
}
template <class C>
void walk(C& c, GroupChangeReply& x) {
  c(x.group, x.queue, x.partitions, x.metadata_deleted, x.partition, x.to_end, x.timestamp_us,
    x.moved_to);
}
template <class C>
void walk(C& c, DlqReplayReply& x) {
  c(x.success, x.error, x.push);
}
template <class C>
void walk(C& c, PartitionStatsView& x) {
  c(x.name, x.id, x.created_us, x.total, x.pending, x.processing, x.completed, x.dead_letter,
    x.oldest_us, x.newest_us);
}
template <class C>
void walk(C& c, QueueView& x) {
  c(x.name, x.id, x.options, x.created_us, x.partition_count, x.messages, x.pending, x.processing,
    x.dlq, x.partitions, x.partitions_matched);
}
template <class C>
void walk(C& c, QueuesReply& x) {
  c(x.queues);
}
template <class C>
void walk(C& c, MessageGroupView& x) {
  c(x.group, x.consumed, x.lease_expires_us);
}
template <class C>
void walk(C& c, MessageStateView& x) {
  c(x.status, x.lease_expires_us, x.error, x.retry_count, x.groups, x.ns, x.task);
}
template <class C>
void walk(C& c, MessagesReply& x) {
  c(x.messages, x.states, x.found, x.options);
}
template <class C>
void walk(C& c, MaintenanceReply& x) {
  c(x.push, x.pop, x.buffered);
}
template <class C>
void walk(C& c, MemberView& x) {
  c(x.id, x.voter, x.raft_addr, x.http_addr, x.match, x.disk, x.heard_disk, x.kinds);
}
template <class C>
void walk(C& c, MembershipReply& x) {
  c(x.cluster_id, x.code, x.error, x.leader, x.term, x.commit, x.index, x.committed,
    x.cluster_version, x.format_max, x.fenced, x.members);
}
template <class C>
void walk(C& c, FetchEntryReply& x) {
  c(x.queue, x.partition, x.partition_id, x.error, x.high_watermark, x.log_start, x.records);
}
template <class C>
void walk(C& c, FetchReply& x) {
  c(x.entries);
}
template <class C>
void walk(C& c, FetchOffsetsEntryReply& x) {
  c(x.queue, x.partition, x.error, x.offset, x.high_watermark);
}
template <class C>
void walk(C& c, FetchOffsetsReply& x) {
  c(x.entries);
}
template <class C>
void walk(C& c, PartitionChange& x) {
  c(x.queue, x.partition, x.partition_id, x.last_offset, x.log_start, x.last_write_us);
}
template <class C>
void walk(C& c, PartitionsChangedReply& x) {
  c(x.partitions, x.next_after);
}
template <class C>
void walk(C& c, MessageDeleteReply& x) {
  c(x.deleted, x.partition_id, x.transaction_id);
}
template <class C>
void walk(C& c, TraceView& x) {
  c(x.id, x.partition_id, x.transaction_id, x.event_type, x.data, x.group, x.worker_id, x.names,
    x.created_us, x.queue, x.partition, x.payload);
}
template <class C>
void walk(C& c, TraceNameView& x) {
  c(x.name, x.traces, x.messages, x.last_seen_us);
}
template <class C>
void walk(C& c, TraceReply& x) {
  c(x.kind, x.recorded, x.traces, x.names, x.total, x.limit, x.offset);
}
// Metrics are answered by the node asked and never forwarded: a walker refuses them.
template <class C>
void walk(C& c, MetricsReply&) {
  c.refuse();
}

}  // namespace queen
