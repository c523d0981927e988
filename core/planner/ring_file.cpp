#include "core/planner/ring_file.h"

#include <xxhash.h>

#include <memory>

#include "core/common/hashing_sink.h"
#include "core/state/checkpoint.h"
#include "core/state/file_window.h"

namespace queen {

namespace {

constexpr const char* kPrefix = "store/rings.";
constexpr uint64_t kMagic = 0x010053474E495251ull;  // "QRINGS\0\1" read little-endian
constexpr uint32_t kFormat = 1;
constexpr size_t kHeaderBytes = 8 + 4 + 8;
constexpr size_t kPieceBytes = size_t{1} << 20;

// The xxh3-64 of the file's first `len` bytes, read a window at a time.
Result<uint64_t> sum_of(Env& env, const std::string& name, uint64_t len) {
  std::unique_ptr<XXH3_state_t, decltype(&XXH3_freeState)> st(XXH3_createState(), XXH3_freeState);
  QUEEN_ASSERT(st != nullptr, "xxh3 state allocated");
  XXH3_64bits_reset(st.get());
  FileWindow w(env, name, len);
  for (uint64_t pos = 0; pos < len;) {
    auto got = w.from(pos, std::min<uint64_t>(FileWindow::kWindowBytes, len - pos));
    if (!got.ok()) return got.error();
    if (got.value().empty()) return make_error(Errc::truncated, name + " shorter than listed");
    uint64_t take = std::min<uint64_t>(got.value().size(), len - pos);
    XXH3_64bits_update(st.get(), got.value().data(), take);
    pos += take;
  }
  return XXH3_64bits_digest(st.get());
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
  if (f.size_bytes < kHeaderBytes + 8) return false;
  uint64_t body = f.size_bytes - 8;
  auto tail = env.read(f.name, body, 8);
  if (!tail.ok()) return tail.error();
  auto sum = sum_of(env, f.name, body);
  if (!sum.ok()) return sum.error();
  if (tail.value().size() != 8 || ByteReader(tail.value()).u64() != sum.value()) return false;
  FileWindow w(env, f.name, body);
  ByteReader r(&w, body);
  if (r.u64() != kMagic || r.u32() != kFormat || r.u64() != at.value) return false;
  bool decoded = dedup->decode_rings(r) && r.left() == 0;
  if (!decoded) dedup->drop_rings();
  if (!w.status().ok()) return w.status().error();
  return decoded;
}

}  // namespace queen
