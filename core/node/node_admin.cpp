// Administration, maintenance, traces, metrics, DLQ replay, queue listings and reads.
#include "core/node/node_impl.h"
#include "core/state/partition_page.h"

namespace queen {

// -------------------------------------------------------------- administration
void NodeImpl::handle(ReplyHandle h, CommandEnvelope&, LeaseExtendCmd& x) {
  LeaseExtendReply r = engine.extend(x, env.now_us());
  if (r.success) return answer_after_checkpoint(h, Reply{std::move(r)});
  send(Parked{h, Reply{std::move(r)}});
}

void NodeImpl::handle(ReplyHandle h, CommandEnvelope& c, GroupListCmd& x) {
  int64_t now_us = env.now_us();
  if (!x.lagging_min_s)
    return send(Parked{h, Reply{engine.lag_summary(now_us, /*walk_unknown=*/true)}});
  Engine::GroupListing l;
  l.lagging_min_s = x.lagging_min_s;
  l.now_us = now_us;
  l.reply.lagging = true;
  start_list(ListRead{h, c.deadline_ms, std::move(l)});
}

void NodeImpl::handle(ReplyHandle h, CommandEnvelope& c, GroupDetailsCmd& x) {
  if (x.limit > 0) return send(Parked{h, Reply{engine.group_page(x, env.now_us())}});
  Engine::GroupListing l;
  l.group = x.group;
  l.now_us = env.now_us();
  start_list(ListRead{h, c.deadline_ms, std::move(l)});
}

void NodeImpl::handle(ReplyHandle h, CommandEnvelope&, GroupDeleteCmd& x) {
  answer_after_checkpoint(h, Reply{engine.delete_group(x)});
}

void NodeImpl::handle(ReplyHandle h, CommandEnvelope&, SeekCmd& x) {
  if (!store.queue(x.queue))
    return send(Parked{h, error_reply(api::Errc::queue_not_found, "no queue " + x.queue)});
  answer_after_checkpoint(h, Reply{engine.seek(x)});
}

void NodeImpl::handle(ReplyHandle h, CommandEnvelope&, SubscriptionCmd& x) {
  answer_after_checkpoint(h, Reply{engine.update_subscription(x)});
}

void NodeImpl::handle(ReplyHandle h, CommandEnvelope&, DlqReplayCmd& x) {
  replay_dlq(h, x);
}

void NodeImpl::handle(ReplyHandle h, CommandEnvelope&, QueueListCmd& x) {
  send(Parked{h, Reply{queues(x, nullptr)}});
}

void NodeImpl::handle(ReplyHandle h, CommandEnvelope& c, QueueGetCmd& x) {
  QueuesReply r = queues(QueueListCmd{}, &x);
  if (r.queues.empty())
    return send(Parked{h, error_reply(api::Errc::queue_not_found, "no queue " + x.queue)});
  if (x.limit > 0) return send(Parked{h, Reply{std::move(r)}});
  r.queues.front().partitions.reserve(r.queues.front().partition_count);
  StoreReads::DeadLetterCounts dead = reads.dead_letters(r.queues.front().id);
  start_list(
      ListRead{h, c.deadline_ms, QueueListing{std::move(r), PartitionId{}, std::move(dead)}});
}

namespace {

GroupChangeReply queue_deleted(const std::string& queue, bool existed) {
  GroupChangeReply r;
  r.queue = queue;
  r.metadata_deleted = existed;
  return r;
}

}  // namespace

void NodeImpl::handle(ReplyHandle h, CommandEnvelope&, QueueDeleteCmd& x) {
  if (!planner.plan_delete_queue(x.queue, &open))  // nothing to delete: answered as such
    return send(Parked{h, Reply{queue_deleted(x.queue, false)}});
  park_planned(h, Reply{queue_deleted(x.queue, true)});
}

void NodeImpl::handle(ReplyHandle h, CommandEnvelope&, MessageGetCmd& x) {
  send(Parked{h, Reply{reads.message(x)}});
}

void NodeImpl::handle(ReplyHandle h, CommandEnvelope&, MessageBrowseCmd& x) {
  send(Parked{h, Reply{reads.browse(x)}});
}

void NodeImpl::handle(ReplyHandle h, CommandEnvelope&, MessageDeleteCmd& x) {
  delete_message(h, x);
}

void NodeImpl::handle(ReplyHandle h, CommandEnvelope&, TraceRecordCmd& x) {
  record_trace(h, x);
}

void NodeImpl::handle(ReplyHandle h, CommandEnvelope&, TraceQueryCmd& x) {
  send(Parked{h, Reply{traces(x)}});
}

void NodeImpl::handle(ReplyHandle h, CommandEnvelope&, MaintenanceCmd& x) {
  handle_maintenance(h, x);
}

void NodeImpl::handle(ReplyHandle h, CommandEnvelope&, FetchCmd& x) {
  send(Parked{h, Reply{reads.fetch(x)}});
}

void NodeImpl::handle(ReplyHandle h, CommandEnvelope&, FetchOffsetsCmd& x) {
  send(Parked{h, Reply{reads.fetch_offsets(x)}});
}

void NodeImpl::handle(ReplyHandle h, CommandEnvelope&, PartitionsChangedCmd& x) {
  send(Parked{h, Reply{reads.partitions_changed(x)}});
}

void NodeImpl::handle(ReplyHandle h, CommandEnvelope&, HealthCmd&) {
  Node::RaftView v = raft_view();
  HealthReply r{v.role,
                config.node_id,
                v.leader,
                v.leader != 0 && (!cluster || cluster->writable || v.leader != config.node_id),
                v.term,
                v.commit,
                v.applied,
                store.queues().size(),
                store.partitions().size()};
  r.format_max = config.format_max;
  r.cluster_version = cluster ? cluster->configs.rbegin()->second.cluster_version : kFormatMax;
  r.fenced = v.fenced;
  r.settled = r.settled && !r.fenced;  // not a working member until it is added back
  out.reply(h, Reply{r});
}

void NodeImpl::handle(ReplyHandle h, CommandEnvelope&, MetricsCmd&) {
  send(Parked{h, Reply{metrics(raft_view(), env.now_us())}});
}

void NodeImpl::handle(ReplyHandle h, CommandEnvelope&, DlqQueryCmd& x) {
  out.reply(h, Reply{reads.dlq(x)});
}

Node::RaftView NodeImpl::raft_view() const {
  const NodeImpl& n = *this;
  Node::RaftView v;
  v.applied = n.store.applied().value;
  v.applied_chain = n.applied_chain;
  if (!n.cluster) {
    v.term = 1;
    v.leader = n.config.node_id;
    v.commit = n.commit;
    v.last_index = n.last_written;
    v.writable = n.serving && !n.stopped;
    return v;
  }
  const raft::Raft& r = *n.cluster->raft;
  static constexpr const char* kRoles[] = {"follower", "pre_candidate", "candidate", "leader"};
  v.role = kRoles[static_cast<int>(r.role())];
  v.term = r.term().value;
  v.leader = r.leader() ? r.leader()->value : 0;
  v.commit = std::max(r.commit().value, n.commit);
  v.last_index = r.last_index().value;
  v.durable_index = r.durable_index().value;
  v.durable_term = r.term_of(r.durable_index()).value_or(Term(0)).value;
  v.writable = n.cluster->writable;
  v.voter = r.membership().is_voter(r.id());
  v.membership_committed = r.membership_index() <= r.commit();
  v.membership_index = r.membership_index().value;
  v.cluster_version =
      n.cluster->configs.empty() ? 0 : n.cluster->configs.rbegin()->second.cluster_version;
  v.fenced = r.self_fenced();
  return v;
}

MaintenanceReply NodeImpl::maintenance_reply(const Maintenance& m) const {
  return MaintenanceReply{m.push, m.pop, m.push ? reads.created_since(m.push_since_us) : 0};
}

// A read answers the switches as applied; a switch is a KV write of their row.
void NodeImpl::handle_maintenance(ReplyHandle h, const MaintenanceCmd& cmd) {
  Maintenance m = maintenance_of(store);
  if (!cmd.enabled) return send(Parked{h, Reply{maintenance_reply(m)}});
  bool& flag = cmd.pop ? m.pop : m.push;
  if (flag == *cmd.enabled) return send(Parked{h, Reply{maintenance_reply(m)}});
  flag = *cmd.enabled;
  if (!cmd.pop) m.push_since_us = m.push ? env.now_us() : 0;
  KvOp put;
  put.op = KvOpKind::put;
  put.ns = kSystemNamespace;
  put.key = kMaintenanceKey;
  put.value = encode_maintenance(m);
  put.forever = true;
  KvScratch scratch;
  kv.run({put}, env.now_us(), &scratch);
  kv.commit(std::move(scratch), &open);
  ++open.commands;
  park_planned(h, Reply{maintenance_reply(m)});
}

void NodeImpl::record_trace(ReplyHandle h, const TraceRecordCmd& cmd) {
  const PartitionState* p = store.partition(cmd.partition_id);
  if (!p || !live_message(*p, cmd.txn_hash))
    return send(Parked{h, error_reply(api::Errc::not_found, "Message not found")});
  open.entry.effects.push_back(EffTrace{cmd.trace_id, cmd.partition_id, cmd.transaction_id,
                                        cmd.event_type, cmd.data, cmd.group, cmd.worker_id,
                                        cmd.names});
  ++open.commands;
  TraceReply reply;
  reply.recorded = cmd.trace_id;
  park_planned(h, Reply{std::move(reply)});
}

TraceView NodeImpl::trace_view(const TraceRow& row) {
  const EffTrace& t = row.trace;
  return TraceView{t.id,        t.pid,   t.transaction_id, t.event_type, t.data, t.group,
                   t.worker_id, t.names, row.created_us,   {},           {},     {}};
}

// The trace's message: its queue and partition names and payload (empty when gone).
void NodeImpl::locate(TraceView* v) {
  const PartitionState* p = store.partition(v->partition_id);
  if (!p) return;
  v->partition = p->name;
  if (const QueueState* q = store.queue(p->queue)) v->queue = q->name;
  XXH128_hash_t hh = XXH3_128bits(v->transaction_id.data(), v->transaction_id.size());
  auto o = live_message(*p, Hash128{hh.low64, hh.high64});
  if (!o) return;
  auto msgs = read(p->id, *o, 1);
  if (msgs.ok() && !msgs.value().empty()) v->payload = std::move(msgs.value().front().payload);
}

TraceReply NodeImpl::traces(const TraceQueryCmd& cmd) {
  TraceReply reply;
  reply.kind = cmd.kind;
  reply.limit = cmd.limit;
  reply.offset = cmd.offset;
  if (cmd.kind == TraceQueryKind::names) return trace_names(cmd, std::move(reply));
  for (const TraceRow& row : store.traces()) {
    const EffTrace& t = row.trace;
    bool match = cmd.kind == TraceQueryKind::message
                     ? t.pid == cmd.partition_id && t.transaction_id == cmd.transaction_id
                     : std::find(t.names.begin(), t.names.end(), cmd.name) != t.names.end();
    if (!match) continue;
    ++reply.total;
    if (cmd.kind == TraceQueryKind::by_name &&
        (reply.total <= cmd.offset || reply.traces.size() >= cmd.limit))
      continue;
    reply.traces.push_back(trace_view(row));
    if (cmd.kind == TraceQueryKind::by_name) locate(&reply.traces.back());
  }
  return reply;
}

TraceReply NodeImpl::trace_names(const TraceQueryCmd& cmd, TraceReply reply) {
  std::map<std::string, TraceNameView> by_name;
  std::map<std::string, std::set<std::pair<uint64_t, std::string>>> messages;
  for (const TraceRow& row : store.traces()) {
    for (const std::string& n : row.trace.names) {
      TraceNameView& v = by_name[n];
      v.name = n;
      ++v.traces;
      v.last_seen_us = std::max(v.last_seen_us, row.created_us);
      messages[n].emplace(row.trace.pid.value, row.trace.transaction_id);
    }
  }
  reply.total = by_name.size();
  uint64_t i = 0;
  for (auto& [name, v] : by_name) {
    if (i++ < cmd.offset || reply.names.size() >= cmd.limit) continue;
    v.messages = messages[name].size();
    reply.names.push_back(std::move(v));
  }
  return reply;
}

// The first message of the partition with this transactionId that is not deleted.
std::optional<Offset> NodeImpl::live_message(const PartitionState& p,
                                             const Hash128& txn_hash) const {
  return reads.live_message(p, txn_hash);
}

// Whether a delete of this message is planned but not applied yet (a second one answers
// "not found", as it will once the first applies). Deletes are rare: a scan will do.
bool NodeImpl::delete_planned(PartitionId pid, Offset o) const {
  auto in = [&](const Entry& e) {
    return std::any_of(e.effects.begin(), e.effects.end(), [&](const Effect& eff) {
      const auto* d = std::get_if<EffMessageDelete>(&eff);
      return d && d->pid == pid && d->offset == o;
    });
  };
  if (in(open.entry)) return true;
  for (const Entry& e : sealed)
    if (in(e)) return true;
  for (const auto& [index, f] : inflight)
    if (in(f.entry)) return true;
  return false;
}

void NodeImpl::delete_message(ReplyHandle h, const MessageDeleteCmd& cmd) {
  MessageDeleteReply reply{false, cmd.partition_id, cmd.transaction_id};
  const PartitionState* p = store.partition(cmd.partition_id);
  std::optional<Offset> o = p ? live_message(*p, cmd.txn_hash) : std::nullopt;
  if (!o || delete_planned(p->id, *o)) return send(Parked{h, Reply{std::move(reply)}});
  open.entry.effects.push_back(EffMessageDelete{p->queue, p->id, *o});
  ++open.commands;
  reply.deleted = true;
  park_planned(h, Reply{std::move(reply)});
}

// Counts an answer leaving the node thread, by kind (TrafficCounters).
void NodeImpl::count_answer(const Reply& r) {
  TrafficCounters& t = traffic;
  if (const auto* e = std::get_if<ErrorReply>(&r.body)) {
    ++t.errors[e->code];
  } else if (const auto* push = std::get_if<PushReply>(&r.body)) {
    if (push->refused) {
      ++t.errors[push->refused->code];
      return;
    }
    ++t.push_requests;
    for (const PushResult& x : push->results) {
      if (x.status == PushStatus::queued) ++t.push_queued;
      if (x.status == PushStatus::duplicate) ++t.push_duplicates;
      if (x.status == PushStatus::error) ++t.push_failed;
    }
  } else if (const auto* pop = std::get_if<PopReply>(&r.body)) {
    ++(pop->messages.empty() ? t.pop_empty : t.pop_delivered);
    t.pop_messages += pop->messages.size();
    if (!pop->messages.empty()) {
      int64_t now_us = env.now_us();
      PopLagWindow* window = nullptr;  // of the queue of the message before (a pop's share one)
      const std::string* window_queue = nullptr;
      for (const PopMessage& m : pop->messages) {
        if (window_queue == nullptr || *window_queue != m.queue) {
          window_queue = &m.queue;
          auto it = t.pop_lag.find(m.queue);
          if (it == t.pop_lag.end() && t.pop_lag.size() < kPopLagQueuesMax)
            it = t.pop_lag.try_emplace(m.queue).first;
          window = it == t.pop_lag.end() ? nullptr : &it->second;
        }
        if (window != nullptr) window->record(now_us / 1000, (now_us - m.created_us) / 1000);
        auto popped = t.popped_by_queue.find(m.queue);
        if (popped == t.popped_by_queue.end() && t.popped_by_queue.size() < kPopLagQueuesMax)
          popped = t.popped_by_queue.try_emplace(m.queue, 0).first;
        if (popped != t.popped_by_queue.end()) ++popped->second;
      }
    }
  } else if (const auto* ack = std::get_if<AckReply>(&r.body)) {
    for (const AckResult& a : ack->results) ++(a.success ? t.ack_success : t.ack_failed);
  } else if (const auto* txn = std::get_if<TxnReply>(&r.body)) {
    ++(txn->success ? t.txn_committed : t.txn_rolled_back);
  } else if (const auto* del = std::get_if<MessageDeleteReply>(&r.body)) {
    t.messages_deleted += del->deleted ? 1 : 0;
  }
}

// Answered on any node (like /health): a follower reports its own view and no group lag.
MetricsReply NodeImpl::metrics(const Node::RaftView& v, int64_t now_us) {
  MetricsReply m;
  m.node_id = config.node_id;
  m.role = v.role;
  m.leader = v.leader;
  m.term = v.term;
  m.commit_index = v.commit;
  m.applied_index = v.applied;
  m.last_index = v.last_index;
  m.writable = v.writable;
  m.inflight_entries = inflight.size() + sealed.size();
  m.entries_committed = stats.entries_committed;
  m.syncs = stats.syncs;
  m.checkpoints = stats.checkpoints;
  m.lease_expiries = engine.stats().lease_expiries;
  m.redeliveries = engine.stats().redeliveries;
  m.dlq_moves = engine.stats().dlq_moves;
  m.entries_read_back = stats.entries_read_back;
  m.store_checkpoints = stats.store_checkpoints;
  m.log_files_reclaimed = stats.log_files_reclaimed;
  m.snapshots_sent = stats.snapshots_sent;
  m.snapshots_installed = stats.snapshots_installed;
  m.raft_messages_refused = stats.raft_messages_refused;
  m.forward_retries = stats.forward_retries;
  m.forward_unknown = stats.forward_unknown;
  m.transfers = stats.transfers;
  m.recovered_entries = stats.recovered_entries;
  m.torn_tails_cut = stats.torn_tails_cut;
  const DedupStats& dedup = planner.dedup().stats();
  m.dedup_checks = dedup.checks;
  m.dedup_duplicates = dedup.duplicates;
  m.dedup_ring_candidates = dedup.candidates;
  m.dedup_cold_scans = dedup.exact_scans;
  m.dedup_ring_bytes = planner.dedup().ring_bytes();
  m.dedup_ring_catch_ups = dedup.catch_ups;
  m.dedup_ring_evictions = dedup.evictions;
  m.row_hash_reads = hashes.stats().reads;
  m.row_hash_cache_bytes = hashes.cache_bytes();
  // A queue popped from in neither of the last two minutes is forgotten (deleted ones too).
  for (auto it = traffic.pop_lag.begin(); it != traffic.pop_lag.end();) {
    it->second.roll(now_us / 1000);
    bool idle = it->second.now.count == 0 && it->second.before.count == 0;
    it = idle ? traffic.pop_lag.erase(it) : std::next(it);
  }
  m.traffic = traffic;
  std::map<QueueId, uint64_t> deleted;
  for (const QueueView& q : queues(QueueListCmd{}, nullptr, &deleted).queues) {
    QueueMetrics qm;
    qm.queue = q.name;
    qm.ns = q.options.ns;
    qm.task = q.options.task;
    qm.partitions = q.partition_count;
    qm.messages = q.messages;
    qm.depth = q.pending;
    qm.dlq = q.dlq;
    if (auto lag = traffic.pop_lag.find(q.name); lag != traffic.pop_lag.end()) {
      const PopLagWindow& w = lag->second;
      uint64_t n = w.now.count + w.before.count;
      qm.pop_lag_avg_ms = n == 0 ? 0 : (w.now.sum_ms + w.before.sum_ms) / n;
      qm.pop_lag_max_ms = std::max(w.now.max_ms, w.before.max_ms);
    }
    if (auto it = traffic.popped_by_queue.find(q.name); it != traffic.popped_by_queue.end())
      qm.popped = it->second;
    if (auto it = deleted.find(q.id); it != deleted.end()) qm.deleted = it->second;
    m.queues.push_back(std::move(qm));
  }
  std::sort(m.queues.begin(), m.queues.end(),
            [](const QueueMetrics& a, const QueueMetrics& b) { return a.queue < b.queue; });
  m.groups_known = v.writable;
  if (m.groups_known) {
    for (const GroupView& g : engine.lag_summary(now_us, /*walk_unknown=*/false).groups)
      m.groups.push_back(
          GroupLagMetrics{g.queue, g.group, g.total_lag, g.max_time_lag_s, g.partitions_with_lag});
    std::sort(m.groups.begin(), m.groups.end(), [](const auto& a, const auto& b) {
      return a.queue != b.queue ? a.queue < b.queue : a.group < b.group;
    });
  }
  return m;
}

void NodeImpl::replay_dlq(ReplyHandle h, const DlqReplayCmd& named) {
  DlqReplayReply reply;
  DlqReplayCmd cmd = named;
  if (cmd.dlq_id == 0 && !cmd.listed_id.is_nil())
    cmd.dlq_id = reads.dlq_id_of(cmd.listed_id).value_or(0);
  else if (cmd.dlq_id == 0)
    cmd.dlq_id = reads.dlq_id_at(cmd.partition_id, cmd.txn_hash).value_or(0);
  QueueId qid;
  const DlqEntry* d = store.dlq_entry(cmd.dlq_id, &qid);
  if (!d) {
    reply.error = named.dlq_id != 0 ? "no dead letter " + std::to_string(named.dlq_id)
                  : !named.listed_id.is_nil()
                      ? "no dead letter with id " + uuid_to_string(named.listed_id)
                      : "the message has no dead letter";
    return send(Parked{h, Reply{std::move(reply)}});
  }
  PushItem item;
  if (d->timer) {  // a dead timer's letter carries its message
    item.queue = store.queue(qid)->name;
    item.partition = d->timer->partition;
    item.payload = d->timer->payload;
    item.payload_sealed = looks_sealed(item.payload);
  } else {
    auto msgs = read(d->pid, d->offset, 1);
    if (!msgs.ok() || msgs.value().empty()) {
      reply.error = "the dead letter's message is gone";
      return send(Parked{h, Reply{std::move(reply)}});
    }
    item.queue = msgs.value().front().queue;
    item.partition = msgs.value().front().partition;
    item.payload = std::move(msgs.value().front().payload);
  }
  item.transaction_id = "dlq:" + std::to_string(cmd.dlq_id);
  XXH128_hash_t hh = XXH3_128bits(item.transaction_id.data(), item.transaction_id.size());
  item.txn_hash = Hash128{hh.low64, hh.high64};
  item.message_id = cmd.message_id;
  std::vector<PushItem> items;
  items.push_back(std::move(item));
  PushReply pushed = planner.plan_push(std::move(items), env.now_us(), &open);
  if (pushed.refused) return send(Parked{h, Reply{*pushed.refused}});  // the letter stays
  reply.push = pushed.results.at(0);
  open.entry.effects.push_back(EffDlqRemove{qid, cmd.dlq_id});
  reply.success = true;
  park_planned(h, Reply{std::move(reply)});
}

QueuesReply NodeImpl::queues(const QueueListCmd& filter, const QueueGetCmd* get,
                             std::map<QueueId, uint64_t>* deleted) {
  QueuesReply reply;
  std::map<QueueId, size_t> listed;  // index in reply.queues
  bool paged = get && get->limit > 0;
  for (const auto& [id, q] : store.queues()) {
    if (get && q.name != get->queue) continue;
    if (!filter.ns.empty() && q.options.ns != filter.ns) continue;
    if (!filter.task.empty() && q.options.task != filter.task) continue;
    QueueView v;
    v.name = q.name;
    v.id = q.id;
    v.options = q.options;
    v.created_us = q.created_us;
    v.partition_count = static_cast<uint32_t>(q.partitions.size());
    if (paged) {
      PartitionPageArgs args{get->offset, get->limit, get->search};
      StoreReads::DeadLetterCounts dead = reads.dead_letters(id);
      for (const PartitionState* p : partition_page(store, q, args, &v.partitions_matched))
        v.partitions.push_back(reads.partition_stats(*p, dead));
    }  // a whole queue (get without a limit) is read a slice at a time: node_lists.cpp
    if (auto it = store.dlq().find(id); it != store.dlq().end()) v.dlq = it->second.size();
    listed[id] = reply.queues.size();
    reply.queues.push_back(std::move(v));
  }
  // Every queue's sums as the store keeps them; only partitions with a queue-mode lease can
  // have messages in processing.
  if (!get || paged) {
    for (auto& [id, at] : listed) {
      QueueCounts c = store.queue_counts(id);
      reply.queues[at].messages = c.kept;
      reply.queues[at].pending = c.unconsumed;
      if (deleted && c.deleted > 0) (*deleted)[id] = c.deleted;
    }
    for (PartitionId pid : store.queue_mode_leased()) {
      const PartitionState* p = store.partition(pid);
      auto it = p ? listed.find(p->queue) : listed.end();
      if (it != listed.end())
        reply.queues[it->second].processing += reads.partition_counts(*p).processing;
    }
  }
  return reply;
}

// -------------------------------------------------------------- reads
Result<std::vector<PopMessage>> NodeImpl::read(PartitionId pid, Offset from, uint32_t max) {
  return reads.read(pid, from, max);
}

}  // namespace queen
