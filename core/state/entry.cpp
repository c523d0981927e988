#include "core/state/entry.h"

namespace queen {
namespace {

enum class EffTag : uint8_t {
  create_queue = 1,
  configure_queue = 2,
  create_partition = 3,
  append = 4,
  cursor = 5,
  group_meta = 6,
  dlq = 7,
  kv_put = 8,
  kv_delete = 9,
  timer_put = 10,
  timer_delete = 11,
  dlq_remove = 12,
  cursor_delete = 13,
  group_meta_delete = 14,
  delete_queue = 15,
  message_delete = 16,
  request_outcome = 17,
  timer_dlq = 18,
  trace = 19,
  retention = 20,
  partition_delete = 21,
  trace_trim = 22,
};

void put_timer_row(ByteWriter& w, const TimerRow& row) {
  w.str(row.partition);
  w.i64(row.deliver_at_us);
  w.str(row.txn);
  w.hash(row.txn_hash);
  w.uuid(row.message_id);
  w.str(row.payload);
  w.u32(row.attempts);
}

TimerRow get_timer_row(ByteReader& r) {
  TimerRow row;
  row.partition = r.str();
  row.deliver_at_us = r.i64();
  row.txn = r.str();
  row.txn_hash = r.hash();
  row.message_id = r.uuid();
  row.payload = r.str();
  row.attempts = r.u32();
  return row;
}

void put_options(ByteWriter& w, const QueueOptions& o) {
  w.i64(o.lease_time_s);
  w.i64(o.retry_limit);
  w.i64(o.retry_delay_ms);
  w.i64(o.priority);
  w.i64(o.max_size);
  w.i64(o.ttl_s);
  w.u8(o.dead_letter_queue);
  w.u8(o.dlq_after_max_retries);
  w.i64(o.dedup_window_s);
  w.i64(o.delayed_processing_s);
  w.i64(o.window_buffer_s);
  w.u8(o.retention_enabled);
  w.i64(o.retention_s);
  w.i64(o.completed_retention_s);
  w.i64(o.max_wait_time_s);
  // Bit 0: encryption; bit 1: fields added later follow the task (written only when one is
  // set, so options without them keep the older layout byte for byte).
  bool extended = o.min_pop_wait_time_ms != 0;
  w.u8(static_cast<uint8_t>(o.encryption_enabled | (extended << 1)));
  w.str(o.ns);
  w.str(o.task);
  if (extended) w.i64(o.min_pop_wait_time_ms);
}

QueueOptions get_options(ByteReader& r) {
  QueueOptions o;
  o.lease_time_s = r.i64();
  o.retry_limit = r.i64();
  o.retry_delay_ms = r.i64();
  o.priority = r.i64();
  o.max_size = r.i64();
  o.ttl_s = r.i64();
  o.dead_letter_queue = r.u8() != 0;
  o.dlq_after_max_retries = r.u8() != 0;
  o.dedup_window_s = r.i64();
  o.delayed_processing_s = r.i64();
  o.window_buffer_s = r.i64();
  o.retention_enabled = r.u8() != 0;
  o.retention_s = r.i64();
  o.completed_retention_s = r.i64();
  o.max_wait_time_s = r.i64();
  uint8_t flags = r.u8();
  o.encryption_enabled = (flags & 1) != 0;
  o.ns = r.str();
  o.task = r.str();
  if (flags & 2) o.min_pop_wait_time_ms = r.i64();
  return o;
}

void put_row(ByteWriter& w, const CursorRow& row) {
  w.u64(row.next.value);
  w.uuid(row.lease_id);
  w.i64(row.lease_expires_us);
  w.u64(row.batch_start.value);
  w.u64(row.batch_end.value);
  w.u32(row.retry_count);
  w.u32(row.delivery_attempt);
  w.u32(static_cast<uint32_t>(row.settled.size()));
  for (const auto& [off, st] : row.settled) {
    w.u64(off.value);
    w.u8(static_cast<uint8_t>(st));
  }
  w.u64(row.consumed_total);
  w.i64(row.last_consumed_us);
  w.u32(static_cast<uint32_t>(row.handed_back.size()));
  for (const auto& [lease, off] : row.handed_back) {
    w.uuid(lease);
    w.u64(off.value);
  }
}

CursorRow get_row(ByteReader& r) {
  CursorRow row;
  row.next = Offset(r.u64());
  row.lease_id = LeaseId{r.uuid()};
  row.lease_expires_us = r.i64();
  row.batch_start = Offset(r.u64());
  row.batch_end = Offset(r.u64());
  row.retry_count = r.u32();
  row.delivery_attempt = r.u32();
  uint32_t n = r.count(9);
  row.settled.reserve(n);
  for (uint32_t i = 0; i < n; ++i) {
    Offset off(r.u64());
    row.settled.emplace_back(off, static_cast<MsgState>(r.u8()));
  }
  row.consumed_total = r.u64();
  row.last_consumed_us = r.i64();
  uint32_t handed = r.count(24);
  for (uint32_t i = 0; i < handed; ++i) {
    LeaseId lease{r.uuid()};
    row.handed_back.emplace_back(lease, Offset(r.u64()));
  }
  return row;
}

struct EffectWriter {
  ByteWriter& w;
  void operator()(const EffCreateQueue& e) {
    w.u8(static_cast<uint8_t>(EffTag::create_queue));
    w.u64(e.id.value);
    w.str(e.name);
    put_options(w, e.options);
  }
  void operator()(const EffConfigureQueue& e) {
    w.u8(static_cast<uint8_t>(EffTag::configure_queue));
    w.u64(e.id.value);
    put_options(w, e.options);
  }
  void operator()(const EffCreatePartition& e) {
    w.u8(static_cast<uint8_t>(EffTag::create_partition));
    w.u64(e.id.value);
    w.u64(e.queue.value);
    w.str(e.name);
  }
  void operator()(const EffAppend& e) {
    w.u8(static_cast<uint8_t>(EffTag::append));
    w.u64(e.pid.value);
    w.u64(e.queue.value);
    w.u64(e.base.value);
    w.u32(e.count);
  }
  void operator()(const EffCursor& e) {
    w.u8(static_cast<uint8_t>(EffTag::cursor));
    w.str(e.group);
    w.u64(e.pid.value);
    put_row(w, e.row);
  }
  void operator()(const EffGroupMeta& e) {
    w.u8(static_cast<uint8_t>(EffTag::group_meta));
    w.str(e.group);
    w.u64(e.queue.value);
    w.u8(static_cast<uint8_t>(e.meta.mode));
    w.i64(e.meta.from_us);
  }
  void operator()(const EffDlq& e) {
    w.u8(static_cast<uint8_t>(EffTag::dlq));
    w.u64(e.queue.value);
    w.u64(e.pid.value);
    w.str(e.group);
    w.u64(e.offset.value);
    w.str(e.error);
    w.u32(e.retry_count);
  }
  void operator()(const EffKvPut& e) {
    w.u8(static_cast<uint8_t>(EffTag::kv_put));
    w.str(e.ns);
    w.str(e.key);
    w.str(e.row.value);
    w.u64(e.row.version);
    w.i64(e.row.expires_us);
    w.i64(e.row.updated_us);
  }
  void operator()(const EffKvDelete& e) {
    w.u8(static_cast<uint8_t>(EffTag::kv_delete));
    w.str(e.ns);
    w.str(e.key);
  }
  void operator()(const EffTimerPut& e) {
    w.u8(static_cast<uint8_t>(EffTag::timer_put));
    w.str(e.queue);
    w.str(e.timer_key);
    put_timer_row(w, e.row);
  }
  void operator()(const EffTrace& e) {
    w.u8(static_cast<uint8_t>(EffTag::trace));
    w.uuid(e.id);
    w.u64(e.pid.value);
    w.str(e.transaction_id);
    w.str(e.event_type);
    w.str(e.data);
    w.str(e.group);
    w.str(e.worker_id);
    w.u32(static_cast<uint32_t>(e.names.size()));
    for (const std::string& n : e.names) w.str(n);
  }
  void operator()(const EffTimerDlq& e) {
    w.u8(static_cast<uint8_t>(EffTag::timer_dlq));
    w.u64(e.queue.value);
    w.str(e.timer_key);
    put_timer_row(w, e.row);
    w.str(e.error);
  }
  void operator()(const EffTimerDelete& e) {
    w.u8(static_cast<uint8_t>(EffTag::timer_delete));
    w.str(e.queue);
    w.str(e.timer_key);
  }
  void operator()(const EffDlqRemove& e) {
    w.u8(static_cast<uint8_t>(EffTag::dlq_remove));
    w.u64(e.queue.value);
    w.u64(e.id);
  }
  void operator()(const EffCursorDelete& e) {
    w.u8(static_cast<uint8_t>(EffTag::cursor_delete));
    w.str(e.group);
    w.u64(e.pid.value);
  }
  void operator()(const EffGroupMetaDelete& e) {
    w.u8(static_cast<uint8_t>(EffTag::group_meta_delete));
    w.str(e.group);
    w.u64(e.queue.value);
  }
  void operator()(const EffDeleteQueue& e) {
    w.u8(static_cast<uint8_t>(EffTag::delete_queue));
    w.u64(e.id.value);
  }
  void operator()(const EffMessageDelete& e) {
    w.u8(static_cast<uint8_t>(EffTag::message_delete));
    w.u64(e.queue.value);
    w.u64(e.pid.value);
    w.u64(e.offset.value);
  }
  void operator()(const EffTraceTrim& e) {
    w.u8(static_cast<uint8_t>(EffTag::trace_trim));
    w.i64(e.before_us);
  }
  void operator()(const EffPartitionDelete& e) {
    w.u8(static_cast<uint8_t>(EffTag::partition_delete));
    w.u64(e.queue.value);
    w.u64(e.pid.value);
  }
  void operator()(const EffRetention& e) {
    w.u8(static_cast<uint8_t>(EffTag::retention));
    w.u64(e.queue.value);
    w.u64(e.pid.value);
    w.u64(e.log_start.value);
    w.u64(e.rows_start.value);
  }
  void operator()(const EffRequestOutcome& e) {
    w.u8(static_cast<uint8_t>(EffTag::request_outcome));
    w.uuid(e.id);
    w.i64(e.keep_until_us);
    w.str(e.reply);
  }
};

bool get_effect(ByteReader& r, Effect* out) {
  switch (static_cast<EffTag>(r.u8())) {
    case EffTag::create_queue: {
      EffCreateQueue e;
      e.id = QueueId(r.u64());
      e.name = r.str();
      e.options = get_options(r);
      *out = std::move(e);
      return true;
    }
    case EffTag::configure_queue: {
      EffConfigureQueue e;
      e.id = QueueId(r.u64());
      e.options = get_options(r);
      *out = std::move(e);
      return true;
    }
    case EffTag::create_partition: {
      EffCreatePartition e;
      e.id = PartitionId(r.u64());
      e.queue = QueueId(r.u64());
      e.name = r.str();
      *out = std::move(e);
      return true;
    }
    case EffTag::append: {
      EffAppend e;
      e.pid = PartitionId(r.u64());
      e.queue = QueueId(r.u64());
      e.base = Offset(r.u64());
      e.count = r.u32();
      *out = std::move(e);
      return true;
    }
    case EffTag::cursor: {
      EffCursor e;
      e.group = r.str();
      e.pid = PartitionId(r.u64());
      e.row = get_row(r);
      *out = std::move(e);
      return true;
    }
    case EffTag::group_meta: {
      EffGroupMeta e;
      e.group = r.str();
      e.queue = QueueId(r.u64());
      e.meta.mode = static_cast<SubscriptionMode>(r.u8());
      e.meta.from_us = r.i64();
      *out = std::move(e);
      return true;
    }
    case EffTag::dlq: {
      EffDlq e;
      e.queue = QueueId(r.u64());
      e.pid = PartitionId(r.u64());
      e.group = r.str();
      e.offset = Offset(r.u64());
      e.error = r.str();
      e.retry_count = r.u32();
      *out = std::move(e);
      return true;
    }
    case EffTag::kv_put: {
      EffKvPut e;
      e.ns = r.str();
      e.key = r.str();
      e.row.value = r.str();
      e.row.version = r.u64();
      e.row.expires_us = r.i64();
      e.row.updated_us = r.i64();
      *out = std::move(e);
      return true;
    }
    case EffTag::kv_delete: {
      EffKvDelete e;
      e.ns = r.str();
      e.key = r.str();
      *out = std::move(e);
      return true;
    }
    case EffTag::timer_put: {
      EffTimerPut e;
      e.queue = r.str();
      e.timer_key = r.str();
      e.row = get_timer_row(r);
      *out = std::move(e);
      return true;
    }
    case EffTag::trace: {
      EffTrace e;
      e.id = r.uuid();
      e.pid = PartitionId(r.u64());
      e.transaction_id = r.str();
      e.event_type = r.str();
      e.data = r.str();
      e.group = r.str();
      e.worker_id = r.str();
      uint32_t n = r.count(4);
      for (uint32_t i = 0; i < n && r.ok(); ++i) e.names.push_back(r.str());
      *out = std::move(e);
      return true;
    }
    case EffTag::timer_dlq: {
      EffTimerDlq e;
      e.queue = QueueId(r.u64());
      e.timer_key = r.str();
      e.row = get_timer_row(r);
      e.error = r.str();
      *out = std::move(e);
      return true;
    }
    case EffTag::timer_delete: {
      EffTimerDelete e;
      e.queue = r.str();
      e.timer_key = r.str();
      *out = std::move(e);
      return true;
    }
    case EffTag::dlq_remove: {
      EffDlqRemove e;
      e.queue = QueueId(r.u64());
      e.id = r.u64();
      *out = std::move(e);
      return true;
    }
    case EffTag::cursor_delete: {
      EffCursorDelete e;
      e.group = r.str();
      e.pid = PartitionId(r.u64());
      *out = std::move(e);
      return true;
    }
    case EffTag::group_meta_delete: {
      EffGroupMetaDelete e;
      e.group = r.str();
      e.queue = QueueId(r.u64());
      *out = std::move(e);
      return true;
    }
    case EffTag::delete_queue: {
      *out = EffDeleteQueue{QueueId(r.u64())};
      return true;
    }
    case EffTag::message_delete: {
      EffMessageDelete e;
      e.queue = QueueId(r.u64());
      e.pid = PartitionId(r.u64());
      e.offset = Offset(r.u64());
      *out = e;
      return true;
    }
    case EffTag::trace_trim: {
      *out = EffTraceTrim{r.i64()};
      return true;
    }
    case EffTag::partition_delete: {
      EffPartitionDelete e;
      e.queue = QueueId(r.u64());
      e.pid = PartitionId(r.u64());
      *out = e;
      return true;
    }
    case EffTag::retention: {
      EffRetention e;
      e.queue = QueueId(r.u64());
      e.pid = PartitionId(r.u64());
      e.log_start = Offset(r.u64());
      e.rows_start = Offset(r.u64());
      *out = e;
      return true;
    }
    case EffTag::request_outcome: {
      EffRequestOutcome e;
      e.id = r.uuid();
      e.keep_until_us = r.i64();
      e.reply = r.str();
      *out = std::move(e);
      return true;
    }
  }
  return false;
}

}  // namespace

void encode_effect(ByteWriter& w, const Effect& effect) {
  std::visit(EffectWriter{w}, effect);
}

bool decode_effect(ByteReader& r, Effect* out) {
  return get_effect(r, out) && r.ok();
}

void encode_entry(const Entry& entry, ByteWriter& w) {
  w.u64(entry.index.value);
  w.u64(entry.term.value);
  w.i64(entry.now_us);
  w.u32(static_cast<uint32_t>(entry.effects.size()));
  EffectWriter ew{w};
  for (const auto& e : entry.effects) std::visit(ew, e);
}

Bytes encode_entry(const Entry& entry) {
  Bytes out;
  ByteWriter w(&out);
  encode_entry(entry, w);
  return out;
}

Result<Entry> decode_entry(const uint8_t* data, size_t size) {
  ByteReader r(data, size);
  Entry entry;
  entry.index = LogIndex(r.u64());
  entry.term = Term(r.u64());
  entry.now_us = r.i64();
  uint32_t n = r.count(1);
  entry.effects.reserve(n);
  for (uint32_t i = 0; i < n && r.ok(); ++i) {
    Effect e;
    if (!get_effect(r, &e)) return make_error(Errc::corrupt, "unknown effect tag");
    entry.effects.push_back(std::move(e));
  }
  if (!r.ok() || r.left() != 0) return make_error(Errc::corrupt, "entry body framing");
  return entry;
}

size_t frames_bytes(const EffAppend& a) {
  if (!a.packed.empty()) return a.packed.size();
  size_t n = a.hashes.size() * sizeof(Hash128);
  for (const auto& f : a.frames) {
    n += 16 + 4 * 4 + f.transaction_id.size() + f.trace_id.size() + f.payload.size() +
         f.producer_sub.size();
  }
  return n;
}

void encode_frames(const EffAppend& a, ByteWriter& w) {
  if (!a.packed.empty()) {
    w.raw(a.packed.data(), a.packed.size());
    return;
  }
  QUEEN_ASSERT(a.hashes.size() == a.count && a.frames.size() == a.count, "append shape");
  w.hashes(a.hashes.data(), a.hashes.size());
  for (const auto& f : a.frames) {
    w.uuid(f.message_id);
    w.str(f.transaction_id);
    w.str(f.trace_id);
    w.str(f.payload);
    w.str(f.producer_sub);
  }
}

Bytes encode_frames(const EffAppend& a) {
  Bytes out;
  out.reserve(frames_bytes(a));
  ByteWriter w(&out);
  encode_frames(a, w);
  return out;
}

namespace {

// The message record's body into `a`: the hashes, then each frame read into strings, or with
// `keep_packed` only checked for framing and the whole body kept as it is.
Status decode_frames_body(const uint8_t* data, size_t size, EffAppend* a, bool keep_packed) {
  ByteReader r(data, size);
  if (static_cast<uint64_t>(a->count) * 16 > size)
    return make_error(Errc::corrupt, "frame count beyond the record");
  a->hashes.resize(a->count);
  for (auto& h : a->hashes) h = r.hash();
  a->frames.resize(keep_packed ? 0 : a->count);
  for (uint32_t i = 0; i < a->count; ++i) {
    if (keep_packed) {
      r.uuid();
      for (int field = 0; field < 4; ++field) r.skip_str();
      continue;
    }
    MessageFrame& f = a->frames[i];
    f.message_id = r.uuid();
    f.transaction_id = r.str();
    f.trace_id = r.str();
    f.payload = r.str();
    f.producer_sub = r.str();
  }
  if (!r.ok() || r.left() != 0) return make_error(Errc::corrupt, "message frames framing");
  if (keep_packed && a->count > 0) a->packed.assign(data, data + size);
  return ok_status();
}

}  // namespace

Status decode_frames(const uint8_t* data, size_t size, EffAppend* a) {
  return decode_frames_body(data, size, a, false);
}

Status decode_frames_packed(const uint8_t* data, size_t size, EffAppend* a) {
  return decode_frames_body(data, size, a, true);
}

// A u32 length, then what `body` writes.
template <class F>
void put_sized(ByteWriter& w, F&& body) {
  size_t at = w.size();
  w.u32(0);
  body();
  w.patch_u32(at, static_cast<uint32_t>(w.size() - at - 4));
}

Bytes encode_replicated(const Entry& entry) {
  size_t frames = 0;
  for (const auto& e : entry.effects)
    if (const auto* a = std::get_if<EffAppend>(&e)) frames += 4 + frames_bytes(*a);
  Bytes out;
  out.reserve(frames + 256);
  ByteWriter w(&out);
  put_sized(w, [&] { encode_entry(entry, w); });
  for (const auto& e : entry.effects)
    if (const auto* a = std::get_if<EffAppend>(&e)) put_sized(w, [&] { encode_frames(*a, w); });
  return out;
}

Result<Entry> decode_replicated(const uint8_t* data, size_t size) {
  ByteReader r(data, size);
  uint32_t len = r.u32();
  if (!r.ok() || len > r.left()) return make_error(Errc::corrupt, "replicated entry framing");
  auto entry = decode_entry(data + r.pos(), len);
  if (!entry.ok()) return entry.error();
  size_t pos = r.pos() + len;
  for (auto& e : entry.value().effects) {
    auto* a = std::get_if<EffAppend>(&e);
    if (!a) continue;
    ByteReader fr(data + pos, size - pos);
    uint32_t flen = fr.u32();
    if (!fr.ok() || flen > fr.left()) return make_error(Errc::corrupt, "replicated frames");
    auto st = decode_frames_packed(data + pos + 4, flen, a);
    if (!st.ok()) return st.error();
    pos += 4 + flen;
  }
  if (pos != size) return make_error(Errc::corrupt, "replicated entry trailing bytes");
  return entry;
}

}  // namespace queen
