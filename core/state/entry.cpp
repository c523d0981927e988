#include "core/state/entry.h"

#include "core/api/binary.h"
#include "core/state/walk.h"

namespace queen {

namespace {

template <size_t I = 0>
void emplace_effect(ByteReader& r, size_t index, Effect* out) {
  if constexpr (I < std::variant_size_v<Effect>) {
    if (index != I) return emplace_effect<I + 1>(r, index, out);
    BinaryGet{r}.field(out->template emplace<I>());
  }
}

}  // namespace

// An effect is its tag (its index in Effect, plus one: the tags files have always held), then
// its walk (core/state/walk.h).
void put_binary(ByteWriter& w, const Effect* effect) {
  w.u8(static_cast<uint8_t>(effect->index() + 1));
  std::visit([&w](const auto& e) { put_walked(w, e); }, *effect);
}

void get_binary(ByteReader& r, Effect* out) {
  uint8_t tag = r.u8();
  if (!r.ok() || tag == 0 || tag > std::variant_size_v<Effect>) return r.invalidate();
  emplace_effect(r, tag - 1u, out);
}

void encode_effect(ByteWriter& w, const Effect& effect) {
  put_binary(w, &effect);
}

bool decode_effect(ByteReader& r, Effect* out) {
  get_binary(r, out);
  return r.ok();
}

void encode_entry(const Entry& entry, ByteWriter& w) {
  w.u64(entry.index.value);
  w.u64(entry.term.value);
  w.i64(entry.now_us);
  w.u32(static_cast<uint32_t>(entry.effects.size()));
  for (const auto& e : entry.effects) encode_effect(w, e);
}

uint32_t entry_format(const Entry& e) {
  for (const Effect& x : e.effects)
    if (std::holds_alternative<EffConfiguration>(x)) return 2;
  return 1;
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
    if (!decode_effect(r, &e)) return make_error(Errc::corrupt, "an effect that does not decode");
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
