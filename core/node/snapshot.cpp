#include "core/node/snapshot.h"

#include <xxhash.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <set>

#include "core/qlog/log.h"
#include "core/qlog/record.h"

namespace queen {
namespace {
constexpr uint64_t kManifestMagic = 0x50414e534e455551ull;  // "QUENSNAP"
}  // namespace

uint64_t SnapshotManifest::total_bytes() const {
  uint64_t n = 0;
  for (const FileInfo& f : files) n += f.size_bytes;
  return n;
}

Bytes encode_manifest(const SnapshotManifest& m) {
  Bytes out;
  out.reserve(40 + 64 * m.files.size());
  ByteWriter w(&out);
  w.u64(kManifestMagic);
  w.u64(m.index.value);
  w.u64(m.term.value);
  w.u32(static_cast<uint32_t>(m.files.size()));
  for (const FileInfo& f : m.files) {
    w.str(f.name);
    w.u64(f.size_bytes);
  }
  w.u64(XXH3_64bits(out.data(), out.size()));
  return out;
}

Result<SnapshotManifest> decode_manifest(const uint8_t* data, size_t size) {
  if (size < 8) return make_error(Errc::corrupt, "snapshot manifest too short");
  ByteReader tail(data + size - 8, 8);
  if (tail.u64() != XXH3_64bits(data, size - 8))
    return make_error(Errc::corrupt, "snapshot manifest checksum mismatch");
  ByteReader r(data, size - 8);
  if (r.u64() != kManifestMagic) return make_error(Errc::corrupt, "not a snapshot manifest");
  SnapshotManifest m;
  m.index = LogIndex(r.u64());
  m.term = Term(r.u64());
  uint32_t n = r.count(12);
  for (uint32_t i = 0; i < n && r.ok(); ++i) {
    FileInfo f;
    f.name = r.str();
    f.size_bytes = r.u64();
    bool safe = !f.name.empty() && f.name.find("..") == std::string::npos &&
                (f.name.rfind("qlog/", 0) == 0 || f.name.rfind("store/", 0) == 0);
    if (!safe) return make_error(Errc::corrupt, "snapshot manifest names a foreign file");
    m.files.push_back(std::move(f));
  }
  if (!r.ok() || r.left() != 0) return make_error(Errc::corrupt, "snapshot manifest length");
  return m;
}

Result<uint64_t> snapshot_cut(Env& env, const std::string& name, uint64_t size, LogIndex index,
                              uint64_t window_bytes) {
  FileWindow w(env, name, size, 0, window_bytes);
  uint64_t pos = 0;
  while (pos < size) {
    Result<RecordView> rec = make_error(Errc::truncated, "no record");
    if (auto st = next_record(w, pos, &rec); !st.ok()) return st.error();
    if (!rec.ok() || rec.value().header.seq > index.value) break;
    pos += rec.value().total_size;
  }
  return pos;
}

std::vector<ChunkPart> chunk_parts(const SnapshotManifest& m, uint64_t from, uint64_t len) {
  std::vector<ChunkPart> out;
  uint64_t start = 0;  // of file i in the stream
  for (size_t i = 0; i < m.files.size() && len > 0; ++i) {
    uint64_t size = m.files[i].size_bytes;
    if (from < start + size) {
      uint64_t pos = from - start;
      uint64_t take = std::min(len, size - pos);
      out.push_back(ChunkPart{i, pos, take});
      from += take;
      len -= take;
    }
    start += size;
  }
  return out;
}

uint64_t chunk_count(const SnapshotManifest& m, uint64_t chunk_bytes) {
  return (m.total_bytes() + chunk_bytes - 1) / chunk_bytes;
}

namespace {
bool starts_with(const std::string& s, const char* prefix) {
  return s.rfind(prefix, 0) == 0;
}
}  // namespace

Status finish_install(Env& env, const SnapshotManifest& m, const std::vector<FileInfo>& present) {
  std::set<std::string> named, there;
  for (const FileInfo& f : m.files) named.insert(f.name);
  for (const FileInfo& f : present) {
    there.insert(f.name);
    bool data = starts_with(f.name, "qlog/") || starts_with(f.name, "store/");
    if (!data || named.contains(f.name)) continue;
    if (auto st = env.remove(f.name); !st.ok()) return st;
  }
  for (const FileInfo& f : m.files) {
    std::string staged = kSnapshotStaging + f.name;
    if (!there.contains(staged)) continue;  // moved before a crash
    if (auto st = env.rename(staged, f.name); !st.ok()) return st;
  }
  return env.remove(kSnapshotManifestFile);
}

Result<std::vector<FileInfo>> settle_snapshot(Env& env, std::vector<FileInfo> files) {
  const FileInfo* manifest = nullptr;
  bool staged = false;
  for (const FileInfo& f : files) {
    if (f.name == kSnapshotManifestFile) manifest = &f;
    if (starts_with(f.name, kSnapshotStaging)) staged = true;
  }
  if (!staged) return files;
  std::optional<SnapshotManifest> decided;
  if (manifest) {
    auto bytes = env.read(manifest->name, 0, manifest->size_bytes);
    if (!bytes.ok()) return bytes.error();
    auto m = decode_manifest(bytes.value().data(), bytes.value().size());
    if (m.ok()) decided = std::move(m.value());
  }
  if (decided) {
    env.log(LogLevel::info, "finishing the install of the snapshot at entry " +
                                std::to_string(decided->index.value));
    if (auto st = finish_install(env, *decided, files); !st.ok()) return st.error();
  } else {
    // Torn before it was durable: nothing was decided, the old log stands.
    for (const FileInfo& f : files)
      if (starts_with(f.name, kSnapshotStaging))
        if (auto st = env.remove(f.name); !st.ok()) return st.error();
  }
  return env.list_files();
}

Bytes encode_chunk(uint64_t seq, const Bytes& payload) {
  Bytes out(8 + payload.size());
  std::memcpy(out.data(), &seq, 8);  // little-endian hosts only, as ByteWriter
  std::copy(payload.begin(), payload.end(), out.begin() + 8);
  return out;
}

bool decode_chunk(const Bytes& data, uint64_t* seq, Bytes* payload) {
  ByteReader r(data.data(), data.size());
  *seq = r.u64();
  if (!r.ok()) return false;
  payload->assign(data.begin() + 8, data.end());
  return true;
}

Bytes encode_ack(uint64_t next_seq) {
  Bytes out;
  out.reserve(8);
  ByteWriter w(&out);
  w.u64(next_seq);
  return out;
}

bool decode_ack(const Bytes& data, uint64_t* next_seq) {
  ByteReader r(data.data(), data.size());
  *next_seq = r.u64();
  return r.ok() && r.left() == 0;
}

}  // namespace queen
