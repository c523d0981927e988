#include "core/planner/ring_file.h"

#include "core/common/hashing_sink.h"
#include "core/state/checked_file.h"
#include "core/state/checkpoint.h"

namespace queen {

namespace {

constexpr const char* kPrefix = "store/rings.";
constexpr uint64_t kMagic = 0x010053474E495251ull;  // "QRINGS\0\1" read little-endian
// An earlier format is left unread (the rings warm from the rows): 2 held no last use, 1 no
// covered offsets.
constexpr uint32_t kFormat = 3;
constexpr size_t kHeaderBytes = 8 + 4 + 8;
constexpr size_t kPieceBytes = size_t{1} << 20;

// The rings of file `f`, into `dedup`: whether the file holds those at `at`, whole (its
// checksum, summed as it is decoded, so the file is read once).
Result<bool> decode_checked(Env& env, const FileInfo& f, LogIndex at, DedupIndex* dedup) {
  if (f.size_bytes < kHeaderBytes + 8) return false;
  auto tail = env.read(f.name, f.size_bytes - 8, 8);
  if (!tail.ok()) return tail.error();
  if (tail.value().size() != 8) return false;
  CheckedFile file(env, f.name, f.size_bytes);
  ByteReader r(&file, f.size_bytes - 8);
  bool decoded = r.u64() == kMagic && r.u32() == kFormat && r.u64() == at.value &&
                 dedup->decode_rings(r) && r.left() == 0;
  if (!file.status().ok()) return file.status().error();
  if (!decoded) return false;
  auto sum = file.digest();
  if (!sum.ok()) return sum.error();
  return ByteReader(tail.value()).u64() == sum.value();
}

}  // namespace

std::string rings_file(LogIndex at) {
  return indexed_file(kPrefix, at);
}

bool parse_rings_file(const std::string& name, LogIndex* at) {
  return parse_indexed_file(kPrefix, name, at);
}

void write_rings(const DedupIndex& dedup, LogIndex at, ByteSink& sink) {
  HashingSink hashed(sink);
  Bytes piece;
  piece.reserve(kPieceBytes + kPieceBytes / 8);
  ByteWriter w(&piece, &hashed, kPieceBytes);
  w.u64(kMagic);
  w.u32(kFormat);
  w.u64(at.value);
  dedup.encode_rings(w);
  w.flush();
  uint64_t sum = hashed.digest();
  sink.put(reinterpret_cast<const uint8_t*>(&sum), 8);  // little-endian, as ByteWriter
}

Result<bool> read_rings(Env& env, const FileInfo& f, LogIndex at, DedupIndex* dedup) {
  auto read = decode_checked(env, f, at, dedup);
  if (!read.ok() || !read.value()) dedup->drop_rings();
  return read;
}

}  // namespace queen
