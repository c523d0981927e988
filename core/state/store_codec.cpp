// The store's checkpoint body (Store::encode / Store::decode). Rows shaped like effects are
// written in their effect form and record locations by their walk (core/state/walk.h), both
// through the binary walk (core/api/binary.h). Three layouts stay explicit code, kept byte
// for byte for the checkpoints already on disk: a partition's rows in a delta (the old ones
// named by count and first base), an append row's hashes (as many as its count, no count of
// their own; from format 4 after a byte saying whether they follow) and a dead letter's timer (its
// EffTimerPut form after a presence byte). Derived indexes (queue names, a queue's partitions,
// expiries, due timers, outcome expiry, file references) are not written: decode rebuilds them. A
// delta body (encode_delta) is the same but for the partitions' old append rows and the base's
// request outcomes, which it names instead of writing.
#include "core/state/store.h"

#include <algorithm>
#include <iterator>
#include <utility>

#include "core/api/binary.h"
#include "core/state/walk.h"

namespace queen {
namespace {

// Format 2 adds the cluster's membership after the traces; format 1 (without it) is still read.
// Format 3 has it as EffConfiguration (pinned disks, cluster version): written only once the
// cluster version is 2, so that a snapshot reaches no node that cannot read it.
// Format 4 lets an append row leave its hashes in its message record (Store::hashes_on_disk):
// written once a row does, which in a cluster waits for cluster version 3.
constexpr uint32_t kStoreFormat = 4;

void put_count(ByteWriter& w, uint64_t n) {
  QUEEN_ASSERT(n <= UINT32_MAX, "a store table fits a 32-bit count");
  w.u32(static_cast<uint32_t>(n));
}

void put_row(ByteWriter& w, const AppendRow& row, uint32_t format) {
  w.u64(row.base.value);
  w.u32(row.count);
  w.i64(row.created_us);
  put_walked(w, row.where());
  QUEEN_ASSERT(format >= 4 || row.hashes_inline(), "a row without hashes needs format 4");
  if (format >= 4) w.u8(row.hashes_inline() ? 1 : 0);
  if (row.hashes_inline()) w.hashes(row.hashes.begin(), row.hashes.size());
}

AppendRow get_row(ByteReader& r, uint32_t format) {
  AppendRow row;
  row.base = Offset(r.u64());
  row.count = format >= 4 ? r.u32() : r.count(16);
  row.created_us = r.i64();
  RecordLocation where;
  get_walked(r, &where);
  if (!AppendRow::fits(where)) {
    r.invalidate();
    return row;
  }
  row.set_where(where);
  if (format >= 4 && r.u8() == 0) return row;
  if (row.count > r.left() / 16) {
    r.invalidate();
    return row;
  }
  row.hashes.reserve(row.count);
  for (uint32_t i = 0; i < row.count; ++i) row.hashes.push_back(r.hash());
  return row;
}

// The first of `rows` (by base offset) whose base is at or after `o`.
template <typename Rows>
auto first_row_from(Rows& rows, Offset o) {
  return std::lower_bound(rows.begin(), rows.end(), o,
                          [](const AppendRow& row, Offset v) { return row.base < v; });
}

// The offset from which a delta writes a partition's rows in full (none listed: no row).
Offset delta_mark(const AppendsSince& since, PartitionId pid) {
  auto it = std::lower_bound(since.begin(), since.end(), std::make_pair(pid, Offset(0)));
  return it != since.end() && it->first == pid ? it->second : Offset(UINT64_MAX);
}

// A partition's fields and rows. In a delta (`since`), the rows before the partition's mark
// go as a count and the first one's base: the base store holds them.
void put_partition(ByteWriter& w, const PartitionState& p, const AppendsSince* since,
                   uint32_t format) {
  w.u64(p.id.value);
  w.u64(p.queue.value);
  w.str(p.name);
  w.u64(p.next_offset.value);
  w.i64(p.created_us);
  w.u64(p.log_start.value);
  w.i64(p.last_append_us);
  auto fresh = p.rows.begin();
  if (since) {
    fresh = first_row_from(p.rows, delta_mark(*since, p.id));
    put_count(w, static_cast<uint64_t>(fresh - p.rows.begin()));
    if (fresh != p.rows.begin()) w.u64(p.rows.front().base.value);
  }
  put_count(w, static_cast<uint64_t>(p.rows.end() - fresh));
  for (auto it = fresh; it != p.rows.end(); ++it) put_row(w, *it, format);
  put_count(w, p.deleted.size());
  for (Offset o : p.deleted) w.u64(o.value);
}

// Moves `count` rows from the next offset read on out of the base store's partition into
// `p`, then releases those retention has released since (as Store::apply_retention does).
bool take_old_rows(ByteReader& r, PartitionState* from, PartitionState& p, uint32_t count) {
  Offset first(r.u64());
  if (!r.ok() || !from) return false;
  CompactVector<AppendRow>& rows = from->rows;
  auto at = first_row_from(rows, first);
  if (at == rows.end() || at->base != first || static_cast<size_t>(rows.end() - at) < count)
    return false;
  p.rows.assign(std::make_move_iterator(at), std::make_move_iterator(at + count));
  for (AppendRow& row : p.rows) {
    if (!(row.end() <= p.log_start)) break;
    if (row.hashes_inline()) row.set_where(RecordLocation{});
  }
  return true;
}

// In a delta: takes the partition's old rows from the base store, then drops the base's
// copy of the partition, so that loading a chain never holds two copies of the store.
void take_from_base(ByteReader& r, Store::Partitions* base, PartitionState& p) {
  uint32_t old_rows = r.u32();  // not in this stream: no length bound from it
  PartitionState* from = base->find(p.id);
  if (old_rows > 0 && !take_old_rows(r, from, p, old_rows)) r.invalidate();
  if (from) base->erase(p.id);
}

PartitionState get_partition(ByteReader& r, Store::Partitions* base, uint32_t format) {
  PartitionState p;
  p.id = PartitionId(r.u64());
  p.queue = QueueId(r.u64());
  p.name = r.str();
  p.next_offset = Offset(r.u64());
  p.created_us = r.i64();
  p.log_start = Offset(r.u64());
  p.last_append_us = r.i64();
  if (base) take_from_base(r, base, p);
  uint32_t rows = r.count(44);
  p.rows.reserve(p.rows.size() + rows);
  for (uint64_t i = 0; i < rows && r.ok(); ++i) p.rows.push_back(get_row(r, format));
  uint32_t deleted = r.count(8);
  p.deleted.reserve(deleted);
  for (uint64_t i = 0; i < deleted && r.ok(); ++i) p.deleted.push_back(Offset(r.u64()));
  return p;
}

void put_dlq(ByteWriter& w, QueueId queue, const DlqEntry& d) {
  w.u64(queue.value);
  w.u64(d.id);
  w.u64(d.pid.value);
  w.str(d.group);
  w.u64(d.offset.value);
  w.str(d.error);
  w.u32(d.retry_count);
  w.i64(d.failed_at_us);
  w.u8(d.timer.has_value());
  if (d.timer) encode_effect(w, EffTimerPut{"", "", *d.timer});
}

template <typename T>
bool get_as(ByteReader& r, T* out) {
  Effect e;
  if (!decode_effect(r, &e) || !std::holds_alternative<T>(e)) {
    r.invalidate();
    return false;
  }
  *out = std::move(std::get<T>(e));
  return true;
}

// A table: its row count (told to `before`), then `read_row` once per row while the reader
// holds.
template <class Before, class F>
void get_table(ByteReader& r, Before&& before, F&& read_row) {
  uint32_t n = r.count(1);
  if (r.ok()) before(n);
  for (uint32_t i = 0; i < n && r.ok(); ++i) read_row();
}

template <typename F>
void get_table(ByteReader& r, F&& read_row) {
  get_table(
      r, [](uint32_t) {}, std::forward<F>(read_row));
}

// Fewer bytes than any partition takes in a body (its ids, name, offsets, times and counts).
constexpr size_t kPartitionBytesMin = 48;

bool get_dlq(ByteReader& r, QueueId* queue, DlqEntry* d) {
  *queue = QueueId(r.u64());
  d->id = r.u64();
  d->pid = PartitionId(r.u64());
  d->group = r.str();
  d->offset = Offset(r.u64());
  d->error = r.str();
  d->retry_count = r.u32();
  d->failed_at_us = r.i64();
  if (r.u8() == 0) return r.ok();
  EffTimerPut t;
  if (!get_as(r, &t)) return false;
  d->timer = std::move(t.row);
  return true;
}

}  // namespace

AppendsSince appends_since(std::vector<std::pair<PartitionId, Offset>> appended) {
  std::sort(appended.begin(), appended.end());
  auto same = [](const auto& a, const auto& b) { return a.first == b.first; };
  appended.erase(std::unique(appended.begin(), appended.end(), same), appended.end());
  return appended;
}

void Store::encode(ByteWriter& w) const {
  encode_with(w, nullptr, LogIndex(0));
}

void Store::encode_delta(ByteWriter& w, const AppendsSince& since, LogIndex base) const {
  encode_with(w, &since, base);
}

uint64_t Store::table_rows() const {
  uint64_t n = queues_.size() + partitions_.size() + cursors_.size() + groups_.size() + kv_.size() +
               timers_.size() + traces_.size();
  for (const auto& [queue, letters] : dlq_) n += letters.size();
  return n;
}

Result<Store> Store::decode(ByteReader& r) {
  return decode_with(r, nullptr, false);
}

Result<Store> Store::decode_delta(ByteReader& r, Store&& base, bool outcomes_by_id) {
  Store from = std::move(base);
  return decode_with(r, &from, outcomes_by_id);
}

// In a delta (`base` not 0): first the ids of the outcomes recorded at or below `base`, which
// the base store holds; then the others in full.
void Store::encode_outcomes(ByteWriter& w, LogIndex base) const {
  uint64_t old = 0;
  if (base.value != 0) {
    for (const auto& [id, o] : outcomes_) old += o.index <= base.value ? 1 : 0;
    put_count(w, old);
    for (const auto& [id, o] : outcomes_) {
      if (o.index <= base.value) w.uuid(id);
    }
    w.boundary();
  }
  put_count(w, outcomes_.size() - old);
  for (const auto& [id, o] : outcomes_) {
    if (o.index <= base.value) continue;
    w.u64(o.index);
    encode_effect(w, EffRequestOutcome{id, o.keep_until_us, o.reply});
    w.boundary();
  }
}

void Store::encode_with(ByteWriter& w, const AppendsSince* since, LogIndex base) const {
  uint32_t format = disk_rows_ ? kStoreFormat : configuration_.cluster_version >= 2 ? 3 : 2;
  w.u32(format);
  w.u64(applied_.value);
  w.i64(last_now_us_);
  w.u64(queue_ids_);
  w.u64(partition_ids_);
  w.u64(dlq_ids_);
  w.u64(kv_version_);
  put_count(w, queues_.size());
  for (const auto& [id, q] : queues_) {
    encode_effect(w, EffCreateQueue{id, q.name, q.options});
    w.i64(q.created_us);
    w.boundary();
  }
  put_count(w, partitions_.size());
  for (const PartitionState& p : partitions_) {
    put_partition(w, p, since, format);
    w.boundary();
  }
  put_count(w, cursors_.size());
  cursors_.for_each([&](const std::string& group, PartitionId pid, const CursorRow& row) {
    encode_effect(w, EffCursor{group, pid, row});
    w.boundary();
  });
  put_count(w, groups_.size());
  for (const auto& [key, meta] : groups_)
    encode_effect(w, EffGroupMeta{key.group, key.queue, meta});
  uint64_t letters = 0;
  for (const auto& [queue, list] : dlq_) letters += list.size();
  put_count(w, letters);
  for (const auto& [queue, list] : dlq_) {
    for (const DlqEntry& d : list) put_dlq(w, queue, d);
    w.boundary();
  }
  put_count(w, kv_.size());
  for (const auto& [key, row] : kv_) {
    encode_effect(w, EffKvPut{key.first, key.second, row});
    w.boundary();
  }
  put_count(w, timers_.size());
  for (const auto& [key, row] : timers_) encode_effect(w, EffTimerPut{key.first, key.second, row});
  encode_outcomes(w, since ? base : LogIndex(0));
  put_count(w, traces_.size());
  for (const TraceRow& t : traces_) {
    w.i64(t.created_us);
    encode_effect(w, t.trace);
    w.boundary();
  }
  w.u64(membership_index_.value);
  if (format >= 3) {
    encode_effect(w, configuration_);
  } else {
    encode_effect(w, EffMembership{configuration_.members});
  }
}

Result<Store> Store::decode_with(ByteReader& r, Store* base, bool outcomes_by_id) {
  Store s;
  uint32_t format = r.u32();
  if (format < 1 || format > kStoreFormat) return make_error(Errc::corrupt, "unknown store format");
  s.applied_ = LogIndex(r.u64());
  s.last_now_us_ = r.i64();
  s.queue_ids_ = r.u64();
  s.partition_ids_ = r.u64();
  if (s.partition_ids_ >= kPartitionIdsMax) r.invalidate();
  s.dlq_ids_ = r.u64();
  s.kv_version_ = r.u64();
  get_table(r, [&] {
    EffCreateQueue q;
    if (get_as(r, &q)) s.queues_[q.id] = QueueState{q.id, q.name, q.options, r.i64(), {}};
  });
  s.decode_partitions(r, base, format);
  get_table(r, [&] {
    EffCursor c;
    if (get_as(r, &c)) s.cursors_.put(c.group, c.pid, std::move(c.row));
  });
  get_table(r, [&] {
    EffGroupMeta g;
    if (get_as(r, &g)) s.groups_[GroupKey{g.group, g.queue}] = g.meta;
  });
  get_table(r, [&] {
    QueueId queue;
    DlqEntry d;
    if (get_dlq(r, &queue, &d)) s.dlq_[queue].push_back(std::move(d));
  });
  get_table(r, [&] {
    EffKvPut kv;
    if (get_as(r, &kv)) s.kv_[KvKey{kv.ns, kv.key}] = std::move(kv.row);
  });
  get_table(r, [&] {
    EffTimerPut t;
    if (get_as(r, &t)) s.timers_[TimerKey{t.queue, t.timer_key}] = std::move(t.row);
  });
  if (base && outcomes_by_id) {
    uint32_t old = r.count(16);
    for (uint32_t i = 0; i < old && r.ok(); ++i) {
      auto it = base->outcomes_.find(r.uuid());
      if (it == base->outcomes_.end()) r.invalidate();
      if (!r.ok()) break;
      s.outcomes_.insert(base->outcomes_.extract(it));
    }
  }
  get_table(r, [&] {
    uint64_t index = r.u64();
    EffRequestOutcome o;
    if (get_as(r, &o)) s.outcomes_[o.id] = StoredOutcome{index, o.keep_until_us, o.reply};
  });
  get_table(r, [&] {
    int64_t created_us = r.i64();
    EffTrace t;
    if (get_as(r, &t)) s.traces_.push_back(TraceRow{std::move(t), created_us});
  });
  if (format == 2) {
    s.membership_index_ = LogIndex(r.u64());
    EffMembership m;
    if (get_as(r, &m)) s.configuration_.members = std::move(m.members);
  } else if (format >= 3) {
    s.membership_index_ = LogIndex(r.u64());
    get_as(r, &s.configuration_);
  }
  s.disk_rows_ = format >= 4 || (base && base->disk_rows_);
  if (!r.ok() || r.left() != 0) return make_error(Errc::corrupt, "store checkpoint framing");
  s.rebuild_indexes();
  return s;
}

// Each partition is indexed as it is decoded, while it is in the cache (at 10M partitions a
// pass over them afterwards reads a gigabyte again): its name, its queue's partition list
// (in id order, so each list stays sorted) and its rows' references to log files.
void Store::decode_partitions(ByteReader& r, Store* base, uint32_t format) {
  // The name table for as many partitions (at most as many as the bytes left could hold) is
  // taken before them, so it is among the first of a start's memory (io/real/start_arena.h).
  std::optional<PartitionNames::Refill> names;
  auto size_names = [&](uint32_t n) {
    size_t most = r.left() / kPartitionBytesMin;
    names.emplace(partition_names_, std::min<size_t>(n, most), PartitionNames::Fill::start);
  };
  // Neighbouring partitions mostly share a queue, and rows mostly point into the file of the
  // row before: each map is looked up once per run.
  std::pair<QueueId, std::vector<PartitionId>*> list{};
  std::pair<LogFileKey, uint64_t*> refs{};
  get_table(r, size_names, [&] {
    PartitionState p = get_partition(r, base ? &base->partitions_ : nullptr, format);
    // Written in id order: each goes at the end, without a search.
    if (!(partitions_.last_id(PartitionId(0)) < p.id) || p.id.value >= kPartitionIdsMax)
      r.invalidate();
    if (!r.ok()) return;
    names->add(PartitionNames::hash(p.queue, p.name), p.id);
    if (!list.second || list.first != p.queue) {
      auto q = queues_.find(p.queue);
      list = {p.queue, q == queues_.end() ? nullptr : &q->second.partitions};
    }
    if (list.second) list.second->push_back(p.id);
    for (const AppendRow& row : p.rows) {
      if (row.record_len == 0) continue;
      LogFileKey key{row.where().log, row.record_file_no};
      if (!refs.second || refs.first != key) refs = {key, &file_refs_[key]};
      ++*refs.second;
    }
    count(p, +1);  // as if unconsumed from its start: rebuild_indexes() applies the cursors
    partitions_.push_back(std::move(p));
  });
  if (names) names->finish();
}

void Store::rebuild_indexes() {
  for (const auto& [id, q] : queues_) queue_names_[q.name] = id;
  // The queue-mode group's cursors move their partitions' unconsumed counts, and a lease
  // files its partition as leased.
  cursors_.for_each_in(kQueueModeGroup, [&](PartitionId pid, const CursorRow& row) {
    const PartitionState* p = partitions_.find(pid);
    if (!p) return;
    count_unconsumed(*p, Offset(0), -1);
    count_unconsumed(*p, row.next, +1);
    if (row.lease_expires_us != 0) leased_.insert(p->id);
  });
  for (const auto& [key, row] : kv_)
    if (row.expires_us != 0) kv_expiries_.insert({row.expires_us, key});
  for (const auto& [key, row] : timers_) timers_due_.insert({row.deliver_at_us, key});
  for (const auto& [id, o] : outcomes_) {
    outcome_expiry_.insert({o.keep_until_us, id});
    outcome_bytes_ += o.reply.size();
  }
}

bool Store::operator==(const Store& o) const {
  return applied_ == o.applied_ && last_now_us_ == o.last_now_us_ && queue_ids_ == o.queue_ids_ &&
         partition_ids_ == o.partition_ids_ && dlq_ids_ == o.dlq_ids_ &&
         kv_version_ == o.kv_version_ && queue_names_ == o.queue_names_ && queues_ == o.queues_ &&
         partitions_ == o.partitions_ && cursors_ == o.cursors_ && groups_ == o.groups_ &&
         dlq_ == o.dlq_ && kv_ == o.kv_ && kv_expiries_ == o.kv_expiries_ && timers_ == o.timers_ &&
         timers_due_ == o.timers_due_ && outcomes_ == o.outcomes_ &&
         outcome_expiry_ == o.outcome_expiry_ && outcome_bytes_ == o.outcome_bytes_ &&
         traces_ == o.traces_ && file_refs_ == o.file_refs_ && configuration_ == o.configuration_ &&
         queue_counts_ == o.queue_counts_ && leased_ == o.leased_ &&
         membership_index_ == o.membership_index_;
}

}  // namespace queen
