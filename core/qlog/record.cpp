#include "core/qlog/record.h"

#include <cstring>

#include <xxhash.h>

namespace queen {

size_t begin_record(const RecordHeader& h, Bytes* out) {
  size_t start = out->size();
  ByteWriter w(out);
  w.u32(0);  // length, back-filled
  w.u64(0);  // checksum, back-filled
  w.u64(h.seq);
  w.u64(h.pid);
  w.u64(h.base_offset);
  w.u32(h.count);
  w.i64(h.created_at_us);
  w.u8(static_cast<uint8_t>(h.kind));
  return start;
}

size_t finish_record(size_t start, Bytes* out) {
  size_t size = out->size() - start;
  QUEEN_ASSERT(size >= kRecordHeaderBytes && size - kRecordHeaderBytes <= kRecordBodyBytesMax,
               "record body over the limit");
  ByteWriter w(out);
  w.patch_u32(start, static_cast<uint32_t>(size - 4));
  w.patch_u64(start + 4, XXH3_64bits(out->data() + start + 12, size - 12));
  return size;
}

size_t encode_record(const RecordHeader& h, const uint8_t* body, size_t body_size, Bytes* out) {
  QUEEN_ASSERT(body_size <= kRecordBodyBytesMax, "record body over the limit");
  size_t start = begin_record(h, out);
  if (body_size > 0) ByteWriter(out).raw(body, body_size);
  return finish_record(start, out);
}

Result<RecordView> decode_record(const uint8_t* data, size_t avail) {
  if (avail < kRecordHeaderBytes) return make_error(Errc::truncated, "short record header");
  uint32_t len = 0;
  std::memcpy(&len, data, 4);
  if (len < kRecordHeaderBytes - 4 || len - (kRecordHeaderBytes - 4) > kRecordBodyBytesMax)
    return make_error(Errc::corrupt, "impossible record length");
  if (static_cast<size_t>(len) + 4 > avail) return make_error(Errc::truncated, "short record");
  uint64_t sum = 0;
  std::memcpy(&sum, data + 4, 8);
  if (XXH3_64bits(data + 12, len - 8) != sum) return make_error(Errc::corrupt, "bad checksum");
  ByteReader r(data + 12, len - 8);
  RecordView v;
  v.header.seq = r.u64();
  v.header.pid = r.u64();
  v.header.base_offset = r.u64();
  v.header.count = r.u32();
  v.header.created_at_us = r.i64();
  uint8_t kind = r.u8();
  if (kind != 0 && kind != 2 && kind != 3) return make_error(Errc::corrupt, "unknown kind");
  v.header.kind = static_cast<RecordKind>(kind);
  v.body = data + kRecordHeaderBytes;
  v.body_size = len + 4 - kRecordHeaderBytes;
  v.total_size = len + 4;
  return v;
}

}  // namespace queen
