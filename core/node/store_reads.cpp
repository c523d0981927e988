#include "core/node/store_reads.h"

#include <algorithm>

#include "core/qlog/log.h"
#include "core/seal/seal.h"

namespace queen {
namespace {

// A change feed visits at most this many partitions per page, matching or not.
constexpr uint32_t kChangedVisitMax = 100000;

bool settled(const CursorRow& row, Offset o) {
  if (o < row.next) return true;
  const MsgState* st = row.state_of(o);
  return st && (*st == MsgState::acked || *st == MsgState::dlq);
}

// An entry of a read by offset: its names copied into its answer, and its partition, or the
// answer's error when there is no such partition.
template <class Entry, class Out>
const PartitionState* entry_partition(const Store& store, const Entry& e, Out* out) {
  out->queue = e.queue;
  out->partition = e.partition;
  const PartitionState* p = store.partition(e.queue, e.partition);
  if (!p) out->error = "UNKNOWN_TOPIC_OR_PARTITION";
  return p;
}

int64_t last_write_us(const PartitionState& p) {
  return p.rows.empty() ? p.created_us : p.rows.back().created_us;
}

}  // namespace

Result<std::vector<PopMessage>> StoreReads::read(PartitionId pid, Offset from, uint32_t max) const {
  const PartitionState* p = store_.partition(pid);
  if (!p) return make_error(Errc::not_found, "no partition " + std::to_string(pid.value));
  std::vector<PopMessage> out;
  const QueueState* q = store_.queue(p->queue);
  from = std::max(from, p->log_start);  // below it, retention took the messages
  for (const AppendRow& row : p->rows) {
    if (row.end() <= from) continue;
    if (out.size() >= max) break;
    auto a = read_append(env_, row, pid);
    if (!a.ok()) return a.error();
    for (uint32_t i = 0; i < row.count && out.size() < max; ++i) {
      Offset o(row.base.value + i);
      if (o < from) continue;
      const MessageFrame& f = a.value().frames[i];
      out.push_back(PopMessage{q->name, p->name.str(), pid, o, f.transaction_id, f.message_id,
                               f.trace_id, row.created_us, readable_payload(env_, f.payload), 1,
                               LeaseId{}, f.producer_sub});
    }
  }
  return out;
}

std::optional<Offset> StoreReads::live_message(const PartitionState& p,
                                               const Hash128& txn_hash) const {
  for (Offset from(0);;) {
    auto found = hashes_.find(p, txn_hash, from, p.next_offset);
    if (!found.ok()) return std::nullopt;
    std::optional<Offset> o = found.value();
    if (!o || !p.is_gone(*o)) return o;
    from = o->next();
  }
}

// ---------------------------------------------------------------------------- dead letters

DlqReply StoreReads::dlq(const DlqQueryCmd& cmd) const {
  DlqReply reply;
  for (const auto& [qid, list] : store_.dlq()) {
    const QueueState* q = store_.queue(qid);
    if (!cmd.queue.empty() && q->name != cmd.queue) continue;
    for (auto it = list.rbegin(); it != list.rend(); ++it) {  // newest failure first
      const DlqEntry& d = *it;
      if (!cmd.group.empty() && d.group != cmd.group) continue;
      if (cmd.from_us != 0 && d.failed_at_us < cmd.from_us) continue;
      if (cmd.to_us != 0 && d.failed_at_us > cmd.to_us) continue;
      const PartitionState* p = store_.partition(d.pid);
      std::string partition = d.timer ? d.timer->partition : p ? p->name.str() : "";
      if (!cmd.partition.empty() && partition != cmd.partition) continue;
      ++reply.total;
      if (reply.total <= cmd.offset || reply.records.size() >= cmd.limit) continue;
      DlqRecord rec{d.id, q->name, partition,     d.pid,          d.group, d.offset, {},
                    {},   d.error, d.retry_count, d.failed_at_us, "null",  0,        ""};
      if (d.timer) {
        rec.message_id = d.timer->message_id;
        rec.transaction_id = d.timer->txn;
        rec.payload = readable_payload(env_, d.timer->payload);
        rec.created_us = d.failed_at_us;
      } else if (auto msgs = read(d.pid, d.offset, 1); msgs.ok() && !msgs.value().empty()) {
        const PopMessage& m = msgs.value().front();
        rec.message_id = m.message_id;
        rec.transaction_id = m.transaction_id;
        rec.payload = m.payload;
        rec.created_us = m.created_us;
        rec.producer_sub = m.producer_sub;
      }
      reply.records.push_back(std::move(rec));
    }
  }
  return reply;
}

std::optional<uint64_t> StoreReads::dlq_id_at(PartitionId pid, const Hash128& txn_hash) const {
  const PartitionState* p = store_.partition(pid);
  if (!p) return std::nullopt;
  auto o = live_message(*p, txn_hash);
  auto dit = store_.dlq().find(p->queue);
  if (!o || dit == store_.dlq().end()) return std::nullopt;
  for (const DlqEntry& d : dit->second)
    if (!d.timer && d.pid == pid && d.offset == *o) return d.id;
  return std::nullopt;
}

std::optional<uint64_t> StoreReads::dlq_id_of(const Uuid& message_id) const {
  for (const auto& [qid, list] : store_.dlq()) {
    for (const DlqEntry& d : list) {
      if (d.timer) {
        if (d.timer->message_id == message_id) return d.id;
        continue;
      }
      auto msgs = read(d.pid, d.offset, 1);
      if (msgs.ok() && !msgs.value().empty() && msgs.value().front().message_id == message_id)
        return d.id;
    }
  }
  return std::nullopt;
}

// ---------------------------------------------------------------------------- messages

MessageStateView StoreReads::state_of(const PartitionState& p, Offset o) const {
  MessageStateView v;
  int64_t now_us = env_.now_us();
  for (const auto& [key, meta] : store_.groups()) {
    if (key.queue != p.queue) continue;
    const CursorRow* row = store_.cursor(key.group, p.id);
    if (!row) continue;
    MessageGroupView g{key.group, settled(*row, o), 0};
    bool in_batch = o >= row->batch_start && o < row->batch_end;
    if (!g.consumed && in_batch && row->lease_live(now_us))
      g.lease_expires_us = row->lease_expires_us;
    if (key.group == kQueueModeGroup) {
      v.status = g.consumed ? "completed" : g.lease_expires_us ? "processing" : "pending";
      v.lease_expires_us = g.lease_expires_us;
    }
    v.groups.push_back(std::move(g));
  }
  bool queue_mode = std::any_of(v.groups.begin(), v.groups.end(), [](const MessageGroupView& g) {
    return g.group == kQueueModeGroup;
  });
  bool all_passed = std::all_of(v.groups.begin(), v.groups.end(),
                                [](const MessageGroupView& g) { return g.consumed; });
  if (!queue_mode && !v.groups.empty() && all_passed) v.status = "completed";
  const QueueOptions& qo = store_.queue(p.queue)->options;
  v.ns = qo.ns;
  v.task = qo.task;
  if (auto dit = store_.dlq().find(p.queue); dit != store_.dlq().end()) {
    for (const DlqEntry& d : dit->second) {
      if (d.timer || d.pid != p.id || d.offset != o || d.group != kQueueModeGroup) continue;
      v.status = "dead_letter";
      v.error = d.error;
      v.retry_count = d.retry_count;
    }
  }
  return v;
}

MessagesReply StoreReads::message(const MessageGetCmd& cmd) const {
  MessagesReply reply;
  const PartitionState* p = store_.partition(cmd.partition_id);
  if (!p) return reply;
  auto o = live_message(*p, cmd.txn_hash);
  if (!o) return reply;
  auto msgs = read(p->id, *o, 1);
  if (msgs.ok() && !msgs.value().empty()) {
    reply.found = true;
    reply.messages = std::move(msgs.value());
    reply.states.push_back(state_of(*p, *o));
    reply.options = store_.queue(p->queue)->options;
  }
  return reply;
}

MessagesReply StoreReads::browse(const MessageBrowseCmd& cmd) const {
  MessagesReply reply;
  struct Found {
    int64_t created_us;
    PartitionId pid;
    Offset offset;
  };
  std::vector<Found> found;
  std::vector<MessageStateView> states;  // with a status filter, as found
  for (const auto& [id, q] : store_.queues()) {
    if (!cmd.queue.empty() && q.name != cmd.queue) continue;
    if (!cmd.ns.empty() && q.options.ns != cmd.ns) continue;
    if (!cmd.task.empty() && q.options.task != cmd.task) continue;
    std::vector<PartitionId> one;
    if (!cmd.partition.empty()) {
      if (const PartitionState* named = store_.partition(id, cmd.partition)) one = {named->id};
    }
    for (PartitionId pid : cmd.partition.empty() ? q.partitions : one) {
      const PartitionState& p = *store_.partition(pid);
      size_t taken = 0;
      for (auto r = p.rows.rbegin(); r != p.rows.rend() && taken < cmd.limit; ++r) {
        if (cmd.to_us && r->created_us > cmd.to_us) continue;
        if (cmd.from_us && r->created_us < cmd.from_us) break;
        for (uint32_t i = r->count; i-- > 0 && taken < cmd.limit;) {
          Offset o(r->base.value + i);
          if (p.is_gone(o)) continue;
          if (!cmd.status.empty() && state_of(p, o).status != cmd.status) continue;
          found.push_back(Found{r->created_us, pid, o});
          ++taken;
        }
      }
    }
  }
  std::sort(found.begin(), found.end(), [](const Found& a, const Found& b) {
    if (a.created_us != b.created_us) return a.created_us > b.created_us;
    return std::tie(a.pid, a.offset) > std::tie(b.pid, b.offset);
  });
  if (found.size() > cmd.limit) found.resize(cmd.limit);
  for (const Found& f : found) {
    auto msgs = read(f.pid, f.offset, 1);
    if (!msgs.ok() || msgs.value().empty()) continue;
    reply.messages.push_back(std::move(msgs.value().front()));
    reply.states.push_back(state_of(*store_.partition(f.pid), f.offset));
  }
  reply.found = !reply.messages.empty();
  return reply;
}

// ---------------------------------------------------------------------------- reads by offset

FetchReply StoreReads::fetch(const FetchCmd& cmd) const {
  FetchReply reply;
  uint64_t bytes_left = kFetchBytesMax;
  for (const FetchEntry& e : cmd.entries) {
    FetchEntryReply& out = reply.entries.emplace_back();
    const PartitionState* p = entry_partition(store_, e, &out);
    if (!p) continue;
    out.partition_id = p->id;
    out.high_watermark = p->next_offset.value;
    out.log_start = p->log_start.value;
    if (e.offset < p->log_start || e.offset > p->next_offset) {
      out.error = "OFFSET_OUT_OF_RANGE";
      continue;
    }
    auto msgs = read(p->id, e.offset, kFetchRecordsMax);
    if (!msgs.ok()) {
      out.error = "READ_FAILED: " + msgs.error().message;
      continue;
    }
    uint64_t taken = 0;
    for (PopMessage& m : msgs.value()) {
      if (p->is_deleted(m.offset)) continue;
      uint64_t size = m.payload.size() + m.transaction_id.size();
      // Always at least one record, so a message larger than maxBytes still moves a reader on.
      if (!out.records.empty() && (taken + size > e.max_bytes || size > bytes_left)) break;
      taken += size;
      bytes_left -= std::min(bytes_left, size);
      out.records.push_back(std::move(m));
    }
  }
  return reply;
}

FetchOffsetsReply StoreReads::fetch_offsets(const FetchOffsetsCmd& cmd) const {
  FetchOffsetsReply reply;
  for (const FetchOffsetsEntry& e : cmd.entries) {
    FetchOffsetsEntryReply& out = reply.entries.emplace_back();
    const PartitionState* p = entry_partition(store_, e, &out);
    if (!p) continue;
    out.high_watermark = p->next_offset.value;
    for (const AppendRow& row : p->rows) {
      if (row.end() <= p->log_start || row.created_us < e.timestamp_us) continue;
      out.offset = static_cast<int64_t>(std::max(row.base, p->log_start).value);
      break;
    }
  }
  return reply;
}

PartitionsChangedReply StoreReads::partitions_changed(const PartitionsChangedCmd& cmd) const {
  PartitionsChangedReply reply;
  const auto& all = store_.partitions();
  uint32_t visited = 0;
  uint64_t last_visited = cmd.after;
  for (auto it = all.upper_bound(PartitionId(cmd.after)); it != all.end(); ++it) {
    const PartitionState& p = *it;
    if (reply.partitions.size() >= cmd.limit || visited >= kChangedVisitMax) {
      reply.next_after = last_visited;
      break;
    }
    ++visited;
    last_visited = p.id.value;
    const QueueState* q = store_.queue(p.queue);
    if (!cmd.queue.empty() && q->name != cmd.queue) continue;
    if (last_write_us(p) <= cmd.since_us) continue;
    reply.partitions.push_back(PartitionChange{q->name, p.name.str(), p.id, p.next_offset.value,
                                               p.log_start.value, last_write_us(p)});
  }
  return reply;
}

PartitionStatsView StoreReads::partition_counts(const PartitionState& p) const {
  PartitionStatsView s;
  s.total = p.kept();
  const CursorRow* row = store_.cursor(kQueueModeGroup, p.id);
  uint64_t unconsumed = p.unconsumed(row ? row->next : Offset(0));
  if (row && row->lease_live(env_.now_us())) {
    for (Offset o = std::max(row->next, row->batch_start); o < row->batch_end; o = o.next())
      if (!settled(*row, o) && !p.is_gone(o)) ++s.processing;
  }
  s.processing = std::min(s.processing, unconsumed);
  s.pending = unconsumed - s.processing;
  s.completed = s.total - std::min(s.total, unconsumed);
  return s;
}

StoreReads::DeadLetterCounts StoreReads::dead_letters(QueueId q) const {
  DeadLetterCounts counts;
  if (auto it = store_.dlq().find(q); it != store_.dlq().end()) {
    for (const DlqEntry& d : it->second)
      if (!d.timer && d.group == kQueueModeGroup) ++counts[d.pid];
  }
  return counts;
}

PartitionStatsView StoreReads::partition_stats(const PartitionState& p,
                                               const DeadLetterCounts& dead) const {
  PartitionStatsView s = partition_counts(p);
  s.name = p.name;
  s.id = p.id;
  s.created_us = p.created_us;
  if (auto it = dead.find(p.id); it != dead.end()) s.dead_letter = it->second;
  // The rows still holding messages are those past log_start: a suffix of the rows.
  auto kept = std::partition_point(p.rows.begin(), p.rows.end(),
                                   [&](const AppendRow& r) { return r.end() <= p.log_start; });
  if (kept != p.rows.end()) {
    s.oldest_us = kept->created_us;
    s.newest_us = p.rows.back().created_us;
  }
  return s;
}

uint64_t StoreReads::created_since(int64_t since_us) const {
  uint64_t n = 0;
  for (const PartitionState& p : store_.partitions()) {
    for (auto r = p.rows.rbegin(); r != p.rows.rend() && r->created_us >= since_us; ++r)
      n += r->count;
  }
  return n;
}

}  // namespace queen
