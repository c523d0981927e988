// Raft messages on the wire (declared in core/raft/raft.h): the fields, the entries, a
// snapshot transfer's data and the sender's identity trailer (its length first, so that a later
// format may add fields), and the bounds a decoded message must keep.
#include "core/raft/raft.h"

#include <algorithm>

namespace queen::raft {

Bytes encode_message(const Message& m) {
  Bytes out;
  ByteWriter w(&out);
  w.u8(static_cast<uint8_t>(m.type));
  w.u64(m.from.value);
  w.u64(m.to.value);
  w.u64(m.term.value);
  w.u64(m.index.value);
  w.u64(m.log_term.value);
  w.u64(m.commit.value);
  w.u8(static_cast<uint8_t>(m.reject) | (static_cast<uint8_t>(m.force) << 1));
  w.u64(m.hint.value);
  w.u64(m.ctx);
  w.u32(static_cast<uint32_t>(m.entries.size()));
  for (const auto& e : m.entries) {
    w.u64(e.index.value);
    w.u64(e.term.value);
    w.u32(static_cast<uint32_t>(e.data.size()));
    w.raw(e.data.data(), e.data.size());
  }
  w.u32(static_cast<uint32_t>(m.data.size()));
  w.raw(m.data.data(), m.data.size());
  // The identity trailer: its length first, so that a later format may add fields after these.
  w.u32(kIdentityTrailerBytes);
  w.u64(m.disk);
  w.u32(m.kinds);
  return out;
}

bool within_bounds(const Message& m) {
  auto term_ok = [](Term t) { return t.value <= kTermMax; };
  auto index_ok = [](LogIndex i) { return i.value <= kLogIndexMax; };
  if (!term_ok(m.term) || !term_ok(m.log_term)) return false;
  if (!index_ok(m.index) || !index_ok(m.commit) || !index_ok(m.hint)) return false;
  return std::all_of(m.entries.begin(), m.entries.end(),
                     [&](const LogEntry& e) { return term_ok(e.term) && index_ok(e.index); });
}

bool decode_message(const uint8_t* data, size_t size, Message* m) {
  ByteReader r(data, size);
  uint8_t type = r.u8();
  if (type < 1 || type > 10) return false;
  m->type = static_cast<MsgType>(type);
  m->from = NodeId(r.u64());
  m->to = NodeId(r.u64());
  m->term = Term(r.u64());
  m->index = LogIndex(r.u64());
  m->log_term = Term(r.u64());
  m->commit = LogIndex(r.u64());
  uint8_t flags = r.u8();
  m->reject = flags & 1;
  m->force = flags & 2;
  m->hint = LogIndex(r.u64());
  m->ctx = r.u64();
  uint32_t n = r.count(20);
  m->entries.clear();
  for (uint32_t i = 0; i < n && r.ok(); ++i) {
    LogEntry e;
    e.index = LogIndex(r.u64());
    e.term = Term(r.u64());
    e.data = r.bytes(r.count(1));
    if (!r.ok()) return false;
    m->entries.push_back(std::move(e));
  }
  m->data = r.bytes(r.count(1));
  m->disk = 0;
  m->kinds = 0;
  if (r.ok() && r.left() > 0) {  // a sender of format 2 or later
    uint32_t trailer = r.u32();
    if (trailer < kIdentityTrailerBytes || trailer != r.left()) return false;
    m->disk = r.u64();
    m->kinds = r.u32();
    r.skip(trailer - kIdentityTrailerBytes);
  }
  return r.ok() && r.left() == 0;
}

}  // namespace queen::raft
