#include "core/state/store.h"

#include <algorithm>

namespace queen {

namespace {
constexpr uint32_t kRowSharedLogBit = uint32_t{1} << 31;
}  // namespace

RecordLocation AppendRow::where() const {
  uint64_t log = record_log & ~kRowSharedLogBit;
  if (record_log & kRowSharedLogBit) log |= kSharedLogBit;
  return RecordLocation{LogId(log), record_file_no, record_len, record_pos};
}

void AppendRow::set_where(const RecordLocation& w) {
  QUEEN_ASSERT(fits(w), "a log id fits an append row's 31 bits");
  uint64_t number = w.log.value & ~kSharedLogBit;
  record_log =
      static_cast<uint32_t>(number) | ((w.log.value & kSharedLogBit) ? kRowSharedLogBit : 0);
  record_file_no = w.file_no;
  record_len = w.len;
  record_pos = w.pos;
}

const MsgState* CursorRow::state_of(Offset o) const {
  auto it = std::lower_bound(settled.begin(), settled.end(), o,
                             [](const auto& p, Offset v) { return p.first < v; });
  if (it == settled.end() || it->first != o) return nullptr;
  return &it->second;
}

void CursorRow::set_state(Offset o, MsgState s) {
  auto it = std::lower_bound(settled.begin(), settled.end(), o,
                             [](const auto& p, Offset v) { return p.first < v; });
  if (it != settled.end() && it->first == o) {
    it->second = s;
  } else {
    settled.insert(it, {o, s});
  }
}

const AppendRow* PartitionState::row_of(Offset o) const {
  auto it = std::upper_bound(rows.begin(), rows.end(), o,
                             [](Offset v, const AppendRow& r) { return v < r.base; });
  if (it == rows.begin()) return nullptr;
  --it;
  return o < it->end() ? &*it : nullptr;
}

uint64_t PartitionState::deleted_in(Offset from, Offset to) const {
  if (!(from < to)) return 0;
  auto lo = std::lower_bound(deleted.begin(), deleted.end(), from);
  auto hi = std::lower_bound(lo, deleted.end(), to);
  return static_cast<uint64_t>(hi - lo);
}

Offset PartitionState::first_at_or_after(int64_t us) const {
  auto it = std::lower_bound(rows.begin(), rows.end(), us,
                             [](const AppendRow& r, int64_t v) { return r.created_us < v; });
  return it == rows.end() ? next_offset : it->base;
}

const QueueState* Store::queue(const std::string& name) const {
  auto it = queue_names_.find(name);
  return it == queue_names_.end() ? nullptr : queue(it->second);
}

const QueueState* Store::queue(QueueId id) const {
  auto it = queues_.find(id);
  return it == queues_.end() ? nullptr : &it->second;
}

const PartitionState* Store::partition(PartitionId id) const {
  return partitions_.find(id);
}

const PartitionState* Store::partition(const std::string& queue_name,
                                       const std::string& name) const {
  const QueueState* q = queue(queue_name);
  return q ? partition(q->id, name) : nullptr;
}

const PartitionState* Store::partition(QueueId queue, std::string_view name) const {
  const PartitionState* found = nullptr;
  partition_names_.find(PartitionNames::hash(queue, name), [&](PartitionId id) {
    const PartitionState* p = partition(id);
    if (!p || p->queue != queue || p->name != name) return false;
    found = p;
    return true;
  });
  return found;
}

const DlqEntry* Store::dlq_entry(uint64_t id, QueueId* queue) const {
  for (const auto& [qid, list] : dlq_) {
    for (const auto& d : list) {
      if (d.id == id) {
        *queue = qid;
        return &d;
      }
    }
  }
  return nullptr;
}

void Store::add_trace(const EffTrace& e, int64_t now_us) {
  traces_.push_back(TraceRow{e, now_us});
  while (traces_.size() > kTraceRowsMax) traces_.pop_front();
}

void Store::delete_message(const EffMessageDelete& e) {
  PartitionState* found = partitions_.find(e.pid);
  if (!found) return;  // its queue went first
  PartitionState& p = *found;
  if (!(e.offset < p.next_offset)) return;
  auto at = std::lower_bound(p.deleted.begin(), p.deleted.end(), e.offset);
  if (at != p.deleted.end() && *at == e.offset) return;
  count(p, -1);
  p.deleted.insert(at, e.offset);
  count(p, +1);
  if (auto dit = dlq_.find(p.queue); dit != dlq_.end()) {
    std::erase_if(dit->second, [&](const DlqEntry& d) {
      return !d.timer && d.pid == e.pid && d.offset == e.offset;
    });
  }
}

void Store::ref_file(const RecordLocation& where, int delta) {
  if (where.len == 0) return;
  LogFileKey key{where.log, where.file_no};
  if (delta > 0) {
    ++file_refs_[key];
    return;
  }
  auto it = file_refs_.find(key);
  QUEEN_ASSERT(it != file_refs_.end() && it->second > 0, "a log file's rows are counted");
  if (--it->second == 0) file_refs_.erase(it);
}

const CursorRow* Store::queue_mode_cursor(PartitionId pid) const {
  static const std::string group(kQueueModeGroup);
  return cursor(group, pid);
}

void Store::count_unconsumed(const PartitionState& p, Offset cursor, int sign) {
  QueueCounts& c = queue_counts_[p.queue];
  uint64_t n = p.unconsumed(cursor);
  QUEEN_ASSERT(sign > 0 || c.unconsumed >= n, "unconsumed counts are added before taken");
  c.unconsumed = sign > 0 ? c.unconsumed + n : c.unconsumed - n;
  if (c == QueueCounts{}) queue_counts_.erase(p.queue);
}

void Store::count(const PartitionState& p, int sign) {
  uint64_t kept = p.kept();
  if (kept == 0 && p.deleted.empty()) return;  // nothing to add (and none unconsumed)
  QueueCounts& c = queue_counts_[p.queue];
  if (sign > 0) {
    c.kept += kept;
    c.deleted += p.deleted.size();
  } else {
    QUEEN_ASSERT(c.kept >= kept && c.deleted >= p.deleted.size(),
                 "a partition's share is taken from its queue's counts only after it was added");
    c.kept -= kept;
    c.deleted -= p.deleted.size();
  }
  const CursorRow* row = queue_mode_cursor(p.id);
  count_unconsumed(p, row ? row->next : Offset(0), sign);
}

void Store::set_cursor(const std::string& group, PartitionId pid, std::optional<CursorRow> row) {
  const PartitionState* p = group == kQueueModeGroup ? partitions_.find(pid) : nullptr;
  if (p) count(*p, -1);
  if (row) {
    cursors_.put(group, pid, std::move(*row));
  } else {
    cursors_.erase(group, pid);
  }
  if (!p) return;
  count(*p, +1);
  const CursorRow* now = queue_mode_cursor(pid);
  if (now && now->lease_expires_us != 0) {
    leased_.insert(pid);
  } else {
    leased_.erase(pid);
  }
}

QueueCounts Store::queue_counts(QueueId q) const {
  auto it = queue_counts_.find(q);
  return it == queue_counts_.end() ? QueueCounts{} : it->second;
}

void Store::apply_retention(const EffRetention& e) {
  PartitionState* found = partitions_.find(e.pid);
  if (!found) return;  // its queue went first
  PartitionState& p = *found;
  Offset log_start = std::min(std::max(p.log_start, e.log_start), p.next_offset);
  Offset rows_start = std::min(e.rows_start, log_start);
  count(p, -1);
  p.log_start = log_start;
  for (AppendRow& row : p.rows) {
    if (!(row.end() <= log_start)) break;
    if (!row.hashes_inline()) continue;  // its record holds its hashes until the row goes
    ref_file(row.where(), -1);
    row.set_where(RecordLocation{});
  }
  auto keep = std::find_if(p.rows.begin(), p.rows.end(),
                           [&](const AppendRow& r) { return !(r.end() <= rows_start); });
  for (auto it = p.rows.begin(); it != keep; ++it) ref_file(it->where(), -1);
  p.rows.erase(p.rows.begin(), keep);
  p.deleted.erase(p.deleted.begin(),
                  std::lower_bound(p.deleted.begin(), p.deleted.end(), log_start));
  if (p.deleted.empty()) p.deleted.release();
  count(p, +1);
  if (auto dit = dlq_.find(p.queue); dit != dlq_.end()) {
    std::erase_if(dit->second, [&](const DlqEntry& d) {
      return !d.timer && d.pid == e.pid && d.offset < log_start;
    });
  }
}

void Store::name_partition(const PartitionState& p) {
  if (partition_names_.has_room())
    partition_names_.insert(PartitionNames::hash(p.queue, p.name), p.id);
  else
    rebuild_names(PartitionNames::Fill::grow);  // `p` is in the table already
}

void Store::rebuild_names(PartitionNames::Fill fill) {
  partition_names_.rebuild(
      partitions_.size(),
      [&](auto add) {
        for (const PartitionState& p : partitions_)
          add(PartitionNames::hash(p.queue, p.name), p.id);
      },
      fill);
}

void Store::erase_partition(PartitionId pid) {
  const PartitionState* p = partitions_.find(pid);
  if (!p) return;
  partition_names_.erase(PartitionNames::hash(p->queue, p->name), pid);
  for (const AppendRow& row : p->rows) ref_file(row.where(), -1);
  partitions_.erase(pid);
}

void Store::delete_partition(const EffPartitionDelete& e) {
  const PartitionState* p = partition(e.pid);
  if (!p) return;
  count(*p, -1);
  leased_.erase(e.pid);
  if (auto qit = queues_.find(p->queue); qit != queues_.end()) {
    std::vector<PartitionId>& ids = qit->second.partitions;
    auto at = std::lower_bound(ids.begin(), ids.end(), e.pid);
    if (at != ids.end() && *at == e.pid) ids.erase(at);
  }
  erase_cursors_of(e.pid);
  erase_partition(e.pid);
}

void Store::erase_cursors_of(PartitionId pid) {
  // A lookup per group, not a pass over every cursor of every partition.
  cursors_.erase_partition(pid);
}

void Store::delete_queue(QueueId id) {
  auto qit = queues_.find(id);
  if (qit == queues_.end()) return;
  // One pass over the cursors for the whole queue: one per partition would take time in the
  // product of partitions and cursors (a queue of 40k partitions, each with a cursor: 5 s).
  const std::vector<PartitionId>& ids = qit->second.partitions;  // sorted
  cursors_.erase_if([&](const std::string&, PartitionId pid, const CursorRow&) {
    return std::binary_search(ids.begin(), ids.end(), pid);
  });
  for (PartitionId pid : ids) {
    leased_.erase(pid);
    erase_partition(pid);
  }
  queue_counts_.erase(id);
  std::erase_if(groups_, [&](const auto& kv) { return kv.first.queue == id; });
  dlq_.erase(id);
  queue_names_.erase(qit->second.name);
  queues_.erase(qit);
}

const KvRow* Store::kv_row(const KvKey& key) const {
  auto it = kv_.find(key);
  return it == kv_.end() ? nullptr : &it->second;
}

const CursorRow* Store::cursor(const std::string& group, PartitionId pid) const {
  return cursors_.find(group, pid);
}

const GroupMeta* Store::group_meta(const std::string& group, QueueId q) const {
  auto it = groups_.find(GroupKey{group, q});
  return it == groups_.end() ? nullptr : &it->second;
}

namespace {

// An entry whose effects contradict the store: the log diverges from what the store was built
// from. Serving on would spread it, and every restart would meet it again.
Error diverged(const Entry& entry, const std::string& what) {
  return make_error(
      Errc::corrupt,
      "entry " + std::to_string(entry.index.value) + " (term " + std::to_string(entry.term.value) +
          ") does not fit the store: " + what +
          ". This node's log diverges from the cluster's, or its data folder is damaged. The "
          "node stops rather than serve from it. To repair it, stop it, move its data folder "
          "(QUEEN_RAFT_DIR) aside, and start it again with the same QUEEN_RAFT_NODE_ID: it "
          "rejoins as a follower and copies the leader's state (README, 'Repairing a node'). "
          "A single node has no copy to take: restore its folder from a backup");
}

}  // namespace

Status Store::apply(const Entry& entry, const std::vector<RecordLocation>& locations) {
  QUEEN_ASSERT(entry.index == applied_.next(), "entries apply in index order, without gaps");
  size_t append_no = 0;
  for (const auto& eff : entry.effects) {
    if (auto* e = std::get_if<EffCreateQueue>(&eff)) {
      if (e->id != next_queue_id())
        return diverged(entry, "queue " + e->name + " is created with id " +
                                   std::to_string(e->id.value) + ", not the next one");
      if (queue_names_.contains(e->name))
        return diverged(entry, "queue " + e->name + " is created twice");
      queue_ids_ = e->id.value;
      queue_names_[e->name] = e->id;
      queues_[e->id] = QueueState{e->id, e->name, e->options, entry.now_us, {}};
    } else if (auto* e = std::get_if<EffConfigureQueue>(&eff)) {
      auto it = queues_.find(e->id);
      if (it == queues_.end())
        return diverged(entry, "queue " + std::to_string(e->id.value) + " is unknown");
      it->second.options = e->options;
    } else if (auto* e = std::get_if<EffCreatePartition>(&eff)) {
      auto qit = queues_.find(e->queue);
      if (e->id != next_partition_id() || e->id.value >= kPartitionIdsMax || qit == queues_.end() ||
          partition(e->queue, e->name)) {
        return diverged(entry, "partition " + e->name + " (id " + std::to_string(e->id.value) +
                                   ") is not the next new partition of a known queue");
      }
      partition_ids_ = e->id.value;
      qit->second.partitions.push_back(e->id);  // ids only grow: the list stays sorted
      PartitionState p;
      p.id = e->id;
      p.queue = e->queue;
      p.name = e->name;
      p.created_us = entry.now_us;
      name_partition(partitions_.push_back(std::move(p)));
    } else if (auto* e = std::get_if<EffAppend>(&eff)) {
      PartitionState* found = partitions_.find(e->pid);
      if (!found)
        return diverged(entry, "partition " + std::to_string(e->pid.value) + " is unknown");
      PartitionState& p = *found;
      if (e->base != p.next_offset) {
        return diverged(entry, "partition " + std::to_string(e->pid.value) + " gets offset " +
                                   std::to_string(e->base.value) + " where the next is " +
                                   std::to_string(p.next_offset.value));
      }
      AppendRow row;
      row.base = e->base;
      row.count = e->count;
      row.created_us = entry.now_us;
      if (append_no < locations.size()) row.set_where(locations[append_no]);
      if (!hashes_on_disk() || row.record_len == 0) {
        row.hashes.reserve(e->count);  // a decoded append holds count hashes
        for (uint32_t i = 0; i < e->count; ++i)
          row.hashes.push_back(i < e->hashes.size() ? e->hashes[i] : Hash128{});
      } else {
        disk_rows_ = true;
      }
      ++append_no;
      ref_file(row.where(), +1);
      count(p, -1);
      p.next_offset = row.end();
      p.last_append_us = entry.now_us;
      p.rows.push_back(std::move(row));
      count(p, +1);
    } else if (auto* e = std::get_if<EffCursor>(&eff)) {
      // A checkpoint logged before its partition's deletion applied keeps no orphan row.
      if (partitions_.contains(e->pid)) set_cursor(e->group, e->pid, e->row);
    } else if (auto* e = std::get_if<EffGroupMeta>(&eff)) {
      groups_[GroupKey{e->group, e->queue}] = e->meta;
    } else if (auto* e = std::get_if<EffDlq>(&eff)) {
      const PartitionState* p = partitions_.find(e->pid);
      bool gone = p && p->is_gone(e->offset);
      ++dlq_ids_;  // spent even for a deleted message, which gets no dead letter
      if (!gone)
        dlq_[e->queue].push_back(DlqEntry{dlq_ids_, e->pid, e->group, e->offset, e->error,
                                          e->retry_count, entry.now_us, std::nullopt});
    } else if (auto* e = std::get_if<EffRetention>(&eff)) {
      apply_retention(*e);
    } else if (auto* e = std::get_if<EffMembership>(&eff)) {
      configuration_.members = e->members;
      configuration_.disks.clear();  // format 1 pins none
      membership_index_ = entry.index;
    } else if (auto* e = std::get_if<EffConfiguration>(&eff)) {
      uint32_t version = std::max(configuration_.cluster_version, e->cluster_version);
      configuration_ = *e;
      configuration_.cluster_version = version;
      membership_index_ = entry.index;
    } else if (auto* e = std::get_if<EffTraceTrim>(&eff)) {
      while (!traces_.empty() && traces_.front().created_us < e->before_us) traces_.pop_front();
    } else if (auto* e = std::get_if<EffPartitionDelete>(&eff)) {
      delete_partition(*e);
    } else if (auto* e = std::get_if<EffTrace>(&eff)) {
      add_trace(*e, entry.now_us);
    } else if (auto* e = std::get_if<EffTimerDlq>(&eff)) {
      ++dlq_ids_;
      dlq_[e->queue].push_back(DlqEntry{dlq_ids_, PartitionId{}, std::string(kTimerDlqGroup),
                                        Offset(0), e->error, e->row.attempts, entry.now_us,
                                        e->row});
    } else if (auto* e = std::get_if<EffDlqRemove>(&eff)) {
      auto it = dlq_.find(e->queue);
      if (it != dlq_.end())
        std::erase_if(it->second, [&](const DlqEntry& d) { return d.id == e->id; });
    } else if (auto* e = std::get_if<EffCursorDelete>(&eff)) {
      set_cursor(e->group, e->pid, std::nullopt);
    } else if (auto* e = std::get_if<EffGroupMetaDelete>(&eff)) {
      groups_.erase(GroupKey{e->group, e->queue});
    } else if (auto* e = std::get_if<EffDeleteQueue>(&eff)) {
      delete_queue(e->id);
    } else if (auto* e = std::get_if<EffMessageDelete>(&eff)) {
      delete_message(*e);
    } else if (auto* e = std::get_if<EffRequestOutcome>(&eff)) {
      if (auto it = outcomes_.find(e->id); it != outcomes_.end()) {
        outcome_expiry_.erase({it->second.keep_until_us, e->id});
        outcome_bytes_ -= it->second.reply.size();
      }
      outcomes_[e->id] = StoredOutcome{entry.index.value, e->keep_until_us, e->reply};
      outcome_expiry_.insert({e->keep_until_us, e->id});
      outcome_bytes_ += e->reply.size();
    } else if (auto* e = std::get_if<EffKvPut>(&eff)) {
      KvKey key{e->ns, e->key};
      if (auto it = kv_.find(key); it != kv_.end() && it->second.expires_us != 0)
        kv_expiries_.erase({it->second.expires_us, key});
      kv_[key] = e->row;
      if (e->row.expires_us != 0) kv_expiries_.insert({e->row.expires_us, key});
      kv_version_ = std::max(kv_version_, e->row.version);
    } else if (auto* e = std::get_if<EffKvDelete>(&eff)) {
      KvKey key{e->ns, e->key};
      if (auto it = kv_.find(key); it != kv_.end()) {
        if (it->second.expires_us != 0) kv_expiries_.erase({it->second.expires_us, key});
        kv_.erase(it);
      }
    } else if (auto* e = std::get_if<EffTimerPut>(&eff)) {
      TimerKey key{e->queue, e->timer_key};
      if (auto it = timers_.find(key); it != timers_.end())
        timers_due_.erase({it->second.deliver_at_us, key});
      timers_[key] = e->row;
      timers_due_.insert({e->row.deliver_at_us, key});
    } else if (auto* e = std::get_if<EffTimerDelete>(&eff)) {
      TimerKey key{e->queue, e->timer_key};
      if (auto it = timers_.find(key); it != timers_.end()) {
        timers_due_.erase({it->second.deliver_at_us, key});
        timers_.erase(it);
      }
    }
  }
  applied_ = entry.index;
  last_now_us_ = std::max(last_now_us_, entry.now_us);
  while (!outcome_expiry_.empty() && (outcome_expiry_.begin()->first < last_now_us_ ||
                                      outcome_bytes_ > kRequestOutcomeBytesMax)) {
    auto it = outcomes_.find(outcome_expiry_.begin()->second);
    outcome_bytes_ -= it->second.reply.size();
    outcomes_.erase(it);
    outcome_expiry_.erase(outcome_expiry_.begin());
  }
  return ok_status();
}

}  // namespace queen
