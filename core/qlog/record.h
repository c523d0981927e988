// The qlog record: the unit of every queue log file. Little-endian header
//   len:u32 | xxh3_64:u64 | seq:u64 | pid:u64 | base_offset:u64 | count:u32 |
//   created_at_us:i64 | kind:u8                                (49 bytes)
// then the body. `len` counts every byte after itself; the checksum covers every byte after
// itself (seq .. end of body). A record never stores its own file or position.
// Kinds: message (one append's hashes and frames; seq = the entry's index), entry (the
// entry's effects; pid = number of logs holding a copy), stub (names an entry whose record
// lies in another log; pid = copies, base_offset = the log holding the full record).
// Fault model: any byte may be torn or corrupted; decode never reads past its input and
// tells a short tail (truncated) from a damaged record (corrupt).
#pragma once

#include <cstdint>

#include "core/common/bytes.h"
#include "core/common/result.h"

namespace queen {

enum class RecordKind : uint8_t { message = 0, entry = 2, stub = 3 };

constexpr size_t kRecordHeaderBytes = 49;
constexpr uint32_t kRecordBodyBytesMax = 256u << 20;

struct RecordHeader {
  uint64_t seq = 0;
  uint64_t pid = 0;
  uint64_t base_offset = 0;
  uint32_t count = 0;
  int64_t created_at_us = 0;
  RecordKind kind = RecordKind::message;
};

struct RecordView {
  RecordHeader header;
  const uint8_t* body = nullptr;
  size_t body_size = 0;
  size_t total_size = 0;  // header + body
};

// Appends the encoded record to `out`; returns its size.
size_t encode_record(const RecordHeader& header, const uint8_t* body, size_t body_size, Bytes* out);
// The same with the body written straight into `out` (no copy of it): begin_record appends
// the header and returns where the record starts; once the body follows it, finish_record
// back-fills the length and checksum and returns the record's size.
size_t begin_record(const RecordHeader& header, Bytes* out);
size_t finish_record(size_t start, Bytes* out);
// Decodes the record at `data`; Errc::truncated when `avail` ends inside it, Errc::corrupt
// when its length is impossible, its checksum fails or its kind is unknown.
Result<RecordView> decode_record(const uint8_t* data, size_t avail);

}  // namespace queen
