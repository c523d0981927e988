#include "core/planner/planner.h"

#include <algorithm>

#include "core/qlog/log.h"
#include "core/seal/seal.h"

namespace queen {

QueueOptions push_created_options(const std::string& name) {
  QueueOptions o;
  o.lease_time_s = kPushCreatedLeaseTimeS;
  auto dot = name.find('.');
  o.ns = name.substr(0, dot);
  if (dot != std::string::npos) {
    auto rest = name.substr(dot + 1);
    o.task = rest.substr(0, rest.find('.'));
  }
  return o;
}

std::optional<Planner::QueueView> Planner::find_queue(const std::string& name) const {
  if (auto it = pending_queues_.find(name); it != pending_queues_.end()) return it->second;
  if (deleted_queues_.contains(name)) return std::nullopt;
  if (const QueueState* q = store_.queue(name)) return QueueView{q->id, q->options};
  return std::nullopt;
}

std::optional<QueueOptions> Planner::queue_options(const std::string& name) const {
  auto q = find_queue(name);
  if (!q) return std::nullopt;
  return q->options;
}

Planner::QueueView Planner::ensure_queue(const std::string& name, const QueueOptions& created_with,
                                         OpenEntry* open) {
  if (auto q = find_queue(name)) return *q;
  QueueId id(std::max(store_.next_queue_id().value, queues_planned_ + 1));
  queues_planned_ = id.value;
  QueueView view{id, created_with};
  pending_queues_[name] = view;
  open->entry.effects.push_back(EffCreateQueue{id, name, created_with});
  return view;
}

PartitionId Planner::ensure_partition(QueueId queue, const std::string& name, OpenEntry* open) {
  if (auto it = pending_partitions_.find({queue, name}); it != pending_partitions_.end())
    return it->second;
  const QueueState* q = store_.queue(queue);
  if (q && !deleted_partitions_.contains({queue, name})) {
    if (const PartitionState* p = store_.partition(queue, name)) return p->id;
  }
  PartitionId id(std::max(store_.next_partition_id().value, partitions_planned_ + 1));
  partitions_planned_ = id.value;
  pending_partitions_[{queue, name}] = id;
  planned_next_[id] = Offset(0);
  open->entry.effects.push_back(EffCreatePartition{id, queue, name});
  return id;
}

Offset Planner::next_offset(PartitionId pid) const {
  if (auto it = planned_next_.find(pid); it != planned_next_.end()) return it->second;
  const PartitionState* p = store_.partition(pid);
  QUEEN_ASSERT(p != nullptr, "offset of an unknown partition");
  return p->next_offset;
}

EffAppend& Planner::append_of(PartitionId pid, QueueId queue, OpenEntry* open) {
  auto it = open->append_at.find(pid);
  if (it != open->append_at.end()) return std::get<EffAppend>(open->entry.effects[it->second]);
  EffAppend a;
  a.pid = pid;
  a.queue = queue;
  a.base = next_offset(pid);
  open->append_at[pid] = open->entry.effects.size();
  open->entry.effects.push_back(std::move(a));
  return std::get<EffAppend>(open->entry.effects.back());
}

Uuid Planner::message_id_at(PartitionId pid, Offset o) {
  const PartitionState* p = store_.partition(pid);
  const AppendRow* row = p ? p->row_of(o) : nullptr;
  if (!row) return Uuid{};
  auto a = read_append(env_, *row, pid);
  if (!a.ok()) return Uuid{};
  return a.value().frames[o.value - row->base.value].message_id;
}

bool Planner::encrypted(const std::string& queue) const {
  auto q = find_queue(queue);
  return q && q->options.encryption_enabled;
}

static ErrorReply seal_error(const std::string& queue, const std::string& why) {
  ErrorReply e;
  e.code = api::Errc::encryption_unavailable;
  e.message = "queue " + queue + " has encryptionEnabled and its payloads cannot be encrypted (" +
              why + "); nothing was stored";
  return e;
}

std::optional<ErrorReply> Planner::seal_payloads(const std::vector<PushItem>& items,
                                                 std::vector<std::optional<std::string>>* sealed) {
  const std::string* last_queue = nullptr;
  bool last_encrypted = false;
  for (size_t i = 0; i < items.size(); ++i) {
    const PushItem& item = items[i];
    if (last_queue == nullptr || *last_queue != item.queue) {
      last_queue = &item.queue;
      last_encrypted = encrypted(item.queue);
    }
    if (!last_encrypted || item.payload_sealed) continue;
    auto s = env_.seal_payload(item.payload);
    if (!s.ok()) return seal_error(item.queue, s.error().message);
    QUEEN_ASSERT(looks_sealed(s.value()), "a sealed payload without the envelope's prefix");
    sealed->resize(items.size());
    (*sealed)[i] = std::move(s.value());
  }
  return std::nullopt;
}

std::optional<ErrorReply> Planner::seal_refusal(const std::vector<PushItem>& items) {
  for (const PushItem& item : items) {
    if (item.payload_sealed || !encrypted(item.queue)) continue;
    auto probe = env_.seal_payload("null");  // one probe answers for every payload
    if (!probe.ok()) return seal_error(item.queue, probe.error().message);
    return std::nullopt;
  }
  return std::nullopt;
}

std::optional<ErrorReply> Planner::seal_timer_payloads(std::vector<TimerOp>* ops) {
  for (TimerOp& op : *ops) {
    if (op.op != TimerOpKind::schedule || !encrypted(op.queue)) continue;
    auto s = env_.seal_payload(op.payload);
    if (!s.ok()) return seal_error(op.queue, s.error().message);
    op.payload = std::move(s.value());
  }
  return std::nullopt;
}

Planner::PushTarget Planner::push_target(const PushItem& item, OpenEntry* open) {
  auto found = find_queue(item.queue);
  QueueView q =
      found ? std::move(*found) : ensure_queue(item.queue, push_created_options(item.queue), open);
  PartitionId pid = ensure_partition(q.id, item.partition, open);
  return PushTarget{item.queue, item.partition, q.id, pid, q.options.dedup_window_s * 1'000'000};
}

// The end of the run of items from `first` on that go to first's partition.
size_t Planner::end_of_run(const std::vector<PushItem>& items, size_t first) {
  size_t end = first + 1;
  while (end < items.size() && items[end].queue == items[first].queue &&
         items[end].partition == items[first].partition)
    ++end;
  return end;
}

// Room in `a` for `n` more items: one allocation instead of a vector doubling (and, past
// 1 KiB, a malloc_consolidate) per size.
void Planner::reserve(EffAppend& a, size_t n) {
  size_t want = a.frames.size() + n;
  if (want <= a.frames.capacity()) return;
  want = std::max(want, 2 * a.frames.capacity());  // still geometric across many pushes
  a.frames.reserve(want);
  a.hashes.reserve(want);
}

namespace {
// The hash a push item is looked up by (none: its transactionId was minted here, so new).
const Hash128* looked_up(const PushItem& item) {
  return item.txn_minted ? nullptr : &item.txn_hash;
}
}  // namespace

// Before item i of a run ending at run_end is looked up, what item i + kPrefetchAhead's
// lookup will probe starts loading: each lookup finds its lines on their way or in L1, where
// prefetching the whole run at its start left the first ones evicted by the last.
void Planner::prefetch_ahead(DedupIndex::Run& dedup, const std::vector<PushItem>& items, size_t i,
                             size_t run_end) {
  if (size_t k = i + kPrefetchAhead; k < run_end) {
    auto at = items.begin() + static_cast<std::ptrdiff_t>(k);
    dedup.prefetch(at, at + 1, looked_up);
  }
}

PushReply Planner::plan_push(std::vector<PushItem> items, int64_t now_us, OpenEntry* open) {
  PushReply reply;
  reply.results.reserve(items.size());
  std::vector<std::optional<std::string>> sealed;
  if (auto refused = seal_payloads(items, &sealed)) {
    for (uint32_t i = 0; i < items.size(); ++i) {
      const PushItem& item = items[i];
      reply.results.push_back(PushResult{i, PushStatus::error, item.message_id, item.transaction_id,
                                         item.queue, item.partition, PartitionId{}, Offset(0),
                                         refused->message});
    }
    reply.refused = std::move(refused);
    return reply;
  }
  std::optional<PushTarget> target;
  std::optional<DedupIndex::Run> dedup;  // target's partition's, while it has a window
  size_t run_end = 0;         // the end of the run of items that go to target's partition
  bool run_reserved = false;  // room made in the target's append for the run
  for (uint32_t i = 0; i < items.size(); ++i) {
    PushItem& item = items[i];
    if (!target || target->queue != item.queue || target->partition != item.partition) {
      target = push_target(item, open);
      run_end = end_of_run(items, i);
      run_reserved = false;
      dedup.reset();
      if (target->dedup_window_us > 0) {
        dedup.emplace(dedup_.run(target->pid, now_us, target->dedup_window_us));
        size_t ahead = std::min(run_end, i + kPrefetchAhead);
        dedup->prefetch(items.begin() + i, items.begin() + ahead, looked_up);
      }
    }
    if (dedup) prefetch_ahead(*dedup, items, i, run_end);
    PartitionId pid = target->pid;
    // The reply takes the edge's strings back to the edge's thread, which frees them; the
    // frame keeps a copy made here, freed here once the entry is written and applied. A string
    // freed on a thread other than its allocator's costs that allocator a list walk later.
    PushResult res{i,
                   PushStatus::queued,
                   item.message_id,
                   std::move(item.transaction_id),
                   std::move(item.queue),
                   std::move(item.partition),
                   pid,
                   Offset(0),
                   {}};
    if (dedup && !item.txn_minted) {
      auto hit = dedup->find(item.txn_hash);
      if (!hit.ok() || hit.value()) {
        if (!hit.ok()) {
          res.status = PushStatus::error;
          res.error = "cannot check the transactionId for a duplicate: " + hit.error().message;
        } else {
          const DedupHit& d = *hit.value();
          res.status = PushStatus::duplicate;
          res.offset = d.offset;
          res.message_id = d.message_id ? *d.message_id : message_id_at(pid, d.offset);
        }
        reply.results.push_back(std::move(res));
        continue;
      }
    }
    EffAppend& a = append_of(pid, target->queue_id, open);
    if (!run_reserved) reserve(a, run_end - i);
    run_reserved = true;
    res.offset = Offset(a.base.value + a.count);
    std::string payload =
        i < sealed.size() && sealed[i] ? std::move(*sealed[i]) : std::move(item.payload);
    open->bytes += payload.size() + res.transaction_id.size() + 64;
    a.hashes.push_back(item.txn_hash);
    a.frames.push_back(MessageFrame{item.message_id, res.transaction_id, std::move(item.trace_id),
                                    std::move(payload), std::move(item.producer_sub)});
    ++a.count;
    planned_next_[pid] = res.offset.next();
    if (dedup) dedup->planned(item.txn_hash, res.offset, item.message_id);
    reply.results.push_back(std::move(res));
  }
  ++open->commands;
  return reply;
}

// The partition `item` would go to and its queue's dedup window, if it has one and the
// partition exists (or is planned); nothing to check otherwise.
std::optional<Planner::PushTarget> Planner::dedup_target(const PushItem& item) const {
  auto q = find_queue(item.queue);
  if (!q || q->options.dedup_window_s <= 0) return std::nullopt;
  PartitionId pid;
  if (auto it = pending_partitions_.find({q->id, item.partition});
      it != pending_partitions_.end()) {
    pid = it->second;
  } else if (const PartitionState* p = store_.partition(item.queue, item.partition)) {
    pid = p->id;
  } else {
    return std::nullopt;
  }
  // The names stay empty: find_duplicate compares the items themselves.
  return PushTarget{{}, {}, q->id, pid, q->options.dedup_window_s * 1'000'000};
}

Result<std::optional<PushResult>> Planner::find_duplicate(const std::vector<PushItem>& items,
                                                          int64_t now_us) {
  const PushItem* last = nullptr;  // the item `target` was resolved for
  std::optional<PushTarget> target;
  std::optional<DedupIndex::Run> dedup;  // target's partition's
  for (uint32_t i = 0; i < items.size(); ++i) {
    const PushItem& item = items[i];
    if (!last || last->queue != item.queue || last->partition != item.partition) {
      target = dedup_target(item);
      dedup.reset();
      if (target) dedup.emplace(dedup_.run(target->pid, now_us, target->dedup_window_us));
    }
    last = &item;
    if (!target || item.txn_minted) continue;
    auto found = dedup->find(item.txn_hash);
    if (!found.ok()) return found.error();
    if (const auto& hit = found.value()) {
      return std::optional<PushResult>(PushResult{i,
                                                  PushStatus::duplicate,
                                                  hit->message_id.value_or(Uuid{}),
                                                  item.transaction_id,
                                                  item.queue,
                                                  item.partition,
                                                  target->pid,
                                                  hit->offset,
                                                  {}});
    }
  }
  return std::optional<PushResult>();
}

bool Planner::plan_delete_queue(const std::string& name, OpenEntry* open) {
  auto q = find_queue(name);
  if (!q) return false;
  pending_queues_.erase(name);
  deleted_queues_[name] = q->id;
  std::erase_if(pending_partitions_, [&](const auto& kv) { return kv.first.first == q->id; });
  open->entry.effects.push_back(EffDeleteQueue{q->id});
  ++open->commands;
  return true;
}

void Planner::plan_delete_partition(const PartitionState& p, OpenEntry* open) {
  QUEEN_ASSERT(!appending(p.id), "a partition with appends in flight is not idle");
  deleted_partitions_[{p.queue, p.name.str()}] = p.id;
  open->entry.effects.push_back(EffPartitionDelete{p.queue, p.id});
}

ConfigureReply Planner::plan_configure(const ConfigureCmd& cmd, OpenEntry* open) {
  ConfigureReply reply;
  auto existing = find_queue(cmd.queue);
  QueueOptions options =
      cmd.patch.apply(cmd.replace || !existing ? QueueOptions{} : existing->options);
  QueueView q = ensure_queue(cmd.queue, options, open);
  if (existing && !(existing->options == options)) {
    open->entry.effects.push_back(EffConfigureQueue{q.id, options});
    pending_queues_[cmd.queue] = QueueView{q.id, options};
  }
  reply.default_partition_id = ensure_partition(q.id, "Default", open);
  reply.queue = cmd.queue;
  reply.queue_id = q.id;
  reply.options = options;
  ++open->commands;
  return reply;
}

void Planner::reset() {
  pending_queues_.clear();
  deleted_queues_.clear();
  pending_partitions_.clear();
  deleted_partitions_.clear();
  planned_next_.clear();
  queues_planned_ = 0;
  partitions_planned_ = 0;
  dedup_.reset_in_flight();
}

void Planner::on_applied(const Entry& entry) {
  for (const auto& eff : entry.effects) {
    if (auto* e = std::get_if<EffDeleteQueue>(&eff)) {
      std::erase_if(deleted_queues_, [&](const auto& kv) { return kv.second == e->id; });
    }
    if (auto* e = std::get_if<EffPartitionDelete>(&eff)) {
      std::erase_if(deleted_partitions_, [&](const auto& kv) { return kv.second == e->pid; });
    }
    if (auto* e = std::get_if<EffCreateQueue>(&eff)) {
      auto it = pending_queues_.find(e->name);
      if (it != pending_queues_.end() && it->second.options == e->options)
        pending_queues_.erase(it);
    } else if (auto* e = std::get_if<EffConfigureQueue>(&eff)) {
      const QueueState* q = store_.queue(e->id);
      if (q) {
        auto it = pending_queues_.find(q->name);
        if (it != pending_queues_.end() && it->second.options == e->options)
          pending_queues_.erase(it);
      }
    } else if (auto* e = std::get_if<EffCreatePartition>(&eff)) {
      pending_partitions_.erase({e->queue, e->name});
      auto it = planned_next_.find(e->id);
      const PartitionState* p = store_.partition(e->id);
      if (it != planned_next_.end() && p && it->second == p->next_offset) planned_next_.erase(it);
    } else if (auto* e = std::get_if<EffAppend>(&eff)) {
      dedup_.applied(*e);
      auto it = planned_next_.find(e->pid);
      const PartitionState* p = store_.partition(e->pid);
      if (it != planned_next_.end() && p && it->second == p->next_offset) planned_next_.erase(it);
    }
  }
}

}  // namespace queen
