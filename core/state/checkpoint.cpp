#include "core/state/checkpoint.h"

#include <xxhash.h>

#include <algorithm>
#include <cstdio>

namespace queen {
namespace {

constexpr uint64_t kMagic = 0x54504b434e455551ull;  // "QUENCKPT"
constexpr uint32_t kFormatLengthFirst = 2;          // body length in the header
constexpr uint32_t kFormat = 3;                     // body length after the body
constexpr size_t kHeaderBytes = 8 + 4 + 8 + 8 + 8;  // magic .. applied chain
constexpr const char* kPrefix = "store/ckpt.";

}  // namespace

std::string checkpoint_file(LogIndex applied) {
  char digits[24];
  std::snprintf(digits, sizeof digits, "%020llu", static_cast<unsigned long long>(applied.value));
  return std::string(kPrefix) + digits;
}

bool parse_checkpoint_file(const std::string& name, LogIndex* applied) {
  std::string_view prefix(kPrefix);
  if (name.size() != prefix.size() + 20 || name.compare(0, prefix.size(), prefix) != 0)
    return false;
  uint64_t v = 0;
  for (size_t i = prefix.size(); i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return false;
    v = v * 10 + static_cast<uint64_t>(name[i] - '0');
  }
  *applied = LogIndex(v);
  return true;
}

namespace {

// Passes pieces on, hashing them on the way.
class HashingSink final : public ByteSink {
 public:
  explicit HashingSink(ByteSink& next) : next_(next), state_(XXH3_createState()) {
    QUEEN_ASSERT(state_ != nullptr, "xxh3 state allocated");
    XXH3_64bits_reset(state_);
  }
  ~HashingSink() override { XXH3_freeState(state_); }
  HashingSink(const HashingSink&) = delete;
  HashingSink& operator=(const HashingSink&) = delete;
  void put(const uint8_t* data, size_t size) override {
    XXH3_64bits_update(state_, data, size);
    next_.put(data, size);
  }
  uint64_t digest() const { return XXH3_64bits_digest(state_); }

 private:
  ByteSink& next_;
  XXH3_state_t* state_;
};

}  // namespace

void write_checkpoint(const Store& store, Term applied_term, uint64_t applied_chain,
                      ByteSink& sink) {
  HashingSink hashed(sink);
  Bytes piece;
  piece.reserve(kCheckpointPieceBytes + kCheckpointPieceBytes / 8);
  ByteWriter w(&piece, &hashed, kCheckpointPieceBytes);
  w.u64(kMagic);
  w.u32(kFormat);
  w.u64(store.applied().value);
  w.u64(applied_term.value);
  w.u64(applied_chain);
  store.encode(w);
  w.u64(w.size() - kHeaderBytes);
  w.flush();
  uint64_t sum = hashed.digest();
  sink.put(reinterpret_cast<const uint8_t*>(&sum), 8);  // little-endian, as ByteWriter
}

Bytes encode_checkpoint(const Store& store, Term applied_term, uint64_t applied_chain,
                        size_t size_hint_bytes) {
  Bytes out;
  out.reserve(size_hint_bytes + size_hint_bytes / 8);  // room to grow by an eighth
  BufferSink sink(&out);
  write_checkpoint(store, applied_term, applied_chain, sink);
  return out;
}

Result<Checkpoint> decode_checkpoint(const uint8_t* data, size_t size) {
  if (size < kHeaderBytes + 16) return make_error(Errc::corrupt, "checkpoint too short");
  ByteReader tail(data + size - 8, 8);
  if (tail.u64() != XXH3_64bits(data, size - 8))
    return make_error(Errc::corrupt, "checkpoint checksum mismatch");
  ByteReader r(data, size - 8);
  uint64_t magic = r.u64();
  uint32_t format = r.u32();
  if (magic != kMagic || (format != kFormat && format != kFormatLengthFirst))
    return make_error(Errc::corrupt, "not a store checkpoint of this format");
  LogIndex applied(r.u64());
  Term term(r.u64());
  uint64_t chain = r.u64();
  // Either way the length takes 8 bytes: before the body (format 2) or after it.
  size_t body_bytes = size - kHeaderBytes - 8 - 8;
  bool length_first = format == kFormatLengthFirst;
  uint64_t length = ByteReader(length_first ? data + kHeaderBytes : data + size - 16, 8).u64();
  if (length != body_bytes) return make_error(Errc::corrupt, "checkpoint length");
  ByteReader body(data + kHeaderBytes + (length_first ? 8 : 0), body_bytes);
  auto store = Store::decode(body);
  if (!store.ok()) return store.error();
  if (store.value().applied() != applied)
    return make_error(Errc::corrupt, "checkpoint index disagrees with its store");
  return Checkpoint{std::move(store.value()), term, chain};
}

Result<LoadedCheckpoint> load_checkpoint(Env& env, const std::vector<FileInfo>& files) {
  std::vector<std::pair<LogIndex, const FileInfo*>> found;
  for (const FileInfo& f : files) {
    LogIndex at;
    if (parse_checkpoint_file(f.name, &at)) found.emplace_back(at, &f);
  }
  std::sort(found.begin(), found.end(),
            [](const auto& a, const auto& b) { return a.first > b.first; });
  LoadedCheckpoint out;
  for (const auto& [at, f] : found) {
    if (out.newest) {
      out.stale.push_back(f->name);
      continue;
    }
    auto bytes = env.read(f->name, 0, f->size_bytes);
    if (!bytes.ok()) return bytes.error();
    auto c = decode_checkpoint(bytes.value().data(), bytes.value().size());
    if (!c.ok() || c.value().store.applied() != at) {
      env.log(LogLevel::warn, "store checkpoint " + f->name + " is damaged, skipped: " +
                                  (c.ok() ? std::string("index mismatch") : c.error().message));
      out.stale.push_back(f->name);
      continue;
    }
    out.newest = std::move(c.value());
    out.file = f->name;
  }
  return out;
}

}  // namespace queen
