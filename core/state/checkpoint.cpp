#include "core/state/checkpoint.h"

#include <xxhash.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <set>

#include "core/common/hashing_sink.h"
#include "core/state/checked_file.h"

namespace queen {
namespace {

constexpr uint64_t kMagic = 0x54504b434e455551ull;  // "QUENCKPT"
constexpr uint32_t kFormatLengthFirst = 2;          // body length in the header
constexpr uint32_t kFormat = 3;                     // body length after the body
constexpr uint32_t kFormatDeltaOutcomesFull = 4;    // a delta writing every request outcome
constexpr uint32_t kFormatDelta = 5;                // a base index after the chain

bool is_delta(uint32_t format) {
  return format == kFormatDelta || format == kFormatDeltaOutcomesFull;
}
constexpr size_t kHeaderBytes = 8 + 4 + 8 + 8 + 8;  // magic .. applied chain
constexpr size_t kDeltaHeaderBytes = kHeaderBytes + 8;
constexpr const char* kPrefix = "store/ckpt.";

}  // namespace

std::string indexed_file(std::string_view prefix, LogIndex at) {
  char digits[24];
  std::snprintf(digits, sizeof digits, "%020llu", static_cast<unsigned long long>(at.value));
  return std::string(prefix) + digits;
}

bool parse_indexed_file(std::string_view prefix, const std::string& name, LogIndex* at) {
  if (name.size() != prefix.size() + 20 || name.compare(0, prefix.size(), prefix) != 0)
    return false;
  uint64_t v = 0;
  for (size_t i = prefix.size(); i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return false;
    v = v * 10 + static_cast<uint64_t>(name[i] - '0');
  }
  *at = LogIndex(v);
  return true;
}

std::string checkpoint_file(LogIndex applied) {
  return indexed_file(kPrefix, applied);
}

bool parse_checkpoint_file(const std::string& name, LogIndex* applied) {
  return parse_indexed_file(kPrefix, name, applied);
}

void write_checkpoint(const Store& store, Term applied_term, uint64_t applied_chain, ByteSink& sink,
                      const DeltaOf* delta) {
  HashingSink hashed(sink);
  Bytes piece;
  piece.reserve(kCheckpointPieceBytes + kCheckpointPieceBytes / 8);
  ByteWriter w(&piece, &hashed, kCheckpointPieceBytes);
  w.u64(kMagic);
  w.u32(delta ? kFormatDelta : kFormat);
  w.u64(store.applied().value);
  w.u64(applied_term.value);
  w.u64(applied_chain);
  size_t header_bytes = delta ? kDeltaHeaderBytes : kHeaderBytes;
  if (delta) {
    QUEEN_ASSERT(delta->base < store.applied(), "a delta builds on an older checkpoint");
    w.u64(delta->base.value);
    store.encode_delta(w, *delta->since, delta->base);
  } else {
    store.encode(w);
  }
  w.u64(w.size() - header_bytes);
  w.flush();
  uint64_t sum = hashed.digest();
  sink.put(reinterpret_cast<const uint8_t*>(&sum), 8);  // little-endian, as ByteWriter
}

Bytes encode_checkpoint(const Store& store, Term applied_term, uint64_t applied_chain,
                        size_t size_hint_bytes, const DeltaOf* delta) {
  Bytes out;
  out.reserve(size_hint_bytes + size_hint_bytes / 8);  // room to grow by an eighth
  BufferSink sink(&out);
  write_checkpoint(store, applied_term, applied_chain, sink, delta);
  return out;
}

namespace {

struct Header {
  uint32_t format = 0;
  LogIndex applied;
  Term term;
  uint64_t chain = 0;
  LogIndex base;
  size_t bytes = 0;  // up to the body
};

// The header's fields, unverified: none when these bytes cannot be a checkpoint's header.
std::optional<Header> parse_header(const uint8_t* data, size_t size) {
  ByteReader r(data, size);
  Header h;
  uint64_t magic = r.u64();
  h.format = r.u32();
  bool known = h.format == kFormat || h.format == kFormatLengthFirst || is_delta(h.format);
  h.applied = LogIndex(r.u64());
  h.term = Term(r.u64());
  h.chain = r.u64();
  h.bytes = kHeaderBytes;
  if (is_delta(h.format)) {
    h.base = LogIndex(r.u64());
    h.bytes = kDeltaHeaderBytes;
  }
  if (!r.ok() || magic != kMagic || !known) return std::nullopt;
  return h;
}

// Where a checkpoint's body lies, once its header, length and checksum agree.
struct Layout {
  Header h;
  uint64_t body_at = 0;
  uint64_t body_bytes = 0;
};

// Whether the xxh3 of all but a checkpoint's last 8 bytes (`sum`) is the one in its last 16
// (`tail`).
Status check_sum(const uint8_t* tail, uint64_t sum) {
  if (ByteReader(tail + 8, 8).u64() != sum)
    return make_error(Errc::corrupt, "checkpoint checksum mismatch");
  return ok_status();
}

// Where the body of a checkpoint of `size` bytes (at least kHeaderBytes + 16) lies, from its
// first bytes (`head`: up to kDeltaHeaderBytes + 8 of them) and its last 16 (`tail`).
Result<Layout> check_layout(const uint8_t* head, size_t head_size, const uint8_t* tail,
                            uint64_t size) {
  auto h = parse_header(head, std::min<uint64_t>(head_size, size - 8));
  if (!h) return make_error(Errc::corrupt, "not a store checkpoint of this format");
  if (is_delta(h->format) && (size < h->bytes + 16 || !(h->base < h->applied)))
    return make_error(Errc::corrupt, "delta checkpoint's base");
  // Either way the length takes 8 bytes: before the body (format 2) or after it.
  Layout l{*h, h->bytes, size - h->bytes - 8 - 8};
  bool length_first = h->format == kFormatLengthFirst;
  if (length_first && head_size < h->bytes + 8)
    return make_error(Errc::corrupt, "checkpoint length");
  uint64_t length = ByteReader(length_first ? head + h->bytes : tail, 8).u64();
  if (length != l.body_bytes) return make_error(Errc::corrupt, "checkpoint length");
  if (length_first) l.body_at += 8;
  return l;
}

constexpr size_t kHeadBytes = kDeltaHeaderBytes + 8;

Result<Checkpoint> decode_body(const Header& h, ByteReader& body, Store* base) {
  bool delta = is_delta(h.format);
  if (delta && (!base || base->applied() != h.base))
    return make_error(Errc::corrupt, "delta checkpoint without its base");
  auto store = delta ? Store::decode_delta(body, std::move(*base), h.format == kFormatDelta)
                     : Store::decode(body);
  if (!store.ok()) return store.error();
  if (store.value().applied() != h.applied)
    return make_error(Errc::corrupt, "checkpoint index disagrees with its store");
  return Checkpoint{std::move(store.value()), h.term, h.chain, h.base};
}

}  // namespace

std::optional<LogIndex> peek_checkpoint_base(const uint8_t* data, size_t size) {
  auto h = parse_header(data, size);
  if (!h) return std::nullopt;
  return h->base;
}

Result<Checkpoint> decode_checkpoint(const uint8_t* data, size_t size, Store* base) {
  if (size < kHeaderBytes + 16) return make_error(Errc::corrupt, "checkpoint too short");
  if (auto st = check_sum(data + size - 16, XXH3_64bits(data, size - 8)); !st.ok())
    return st.error();
  auto l = check_layout(data, std::min(size, kHeadBytes), data + size - 16, size);
  if (!l.ok()) return l.error();
  ByteReader body(data + l.value().body_at, l.value().body_bytes);
  return decode_body(l.value().h, body, base);
}

namespace {

// Reads and verifies `f` in one pass, a window at a time, so a restart holds the store it
// decodes and one window of the file, not both. The layout is checked from the header and the
// last 16 bytes before decoding; the checksum when the decode has read the body. A damaged body
// may fail the decode first: the decoder stays within the body's bytes and refuses what it
// cannot read, and the checksum's error is the one reported.
Result<Checkpoint> load_file(Env& env, const ChainFile& f, Store* base) {
  if (f.size_bytes < kHeaderBytes + 16) return make_error(Errc::corrupt, "checkpoint too short");
  CheckedFile file(env, f.file, f.size_bytes);
  size_t head_bytes = std::min(f.size_bytes, kHeadBytes);
  auto head = file.from(0, head_bytes);
  if (!head.ok()) return head.error();
  auto tail = env.read(f.file, f.size_bytes - 16, 16);
  if (!tail.ok()) return tail.error();
  if (head.value().size() < head_bytes || tail.value().size() != 16)
    return make_error(Errc::truncated, "checkpoint shorter than listed");
  auto l = check_layout(head.value().data(), head_bytes, tail.value().data(), f.size_bytes);
  if (!l.ok()) return l.error();
  file.set_body_at(l.value().body_at);
  ByteReader body(&file, l.value().body_bytes);
  auto c = decode_body(l.value().h, body, base);
  if (!file.status().ok()) return file.status().error();
  auto sum = file.digest();
  if (!sum.ok()) return sum.error();
  if (auto st = check_sum(tail.value().data(), sum.value()); !st.ok()) return st.error();
  return c;
}

// The chain ending at `newest`, full checkpoint first, from each file's header (load_chain
// verifies the files); not_found when a base is missing.
Result<std::vector<ChainFile>> find_chain(Env& env,
                                          const std::map<LogIndex, const FileInfo*>& by_at,
                                          LogIndex newest) {
  std::vector<ChainFile> chain;
  for (LogIndex at = newest;;) {
    auto it = by_at.find(at);
    if (it == by_at.end() || chain.size() > kCheckpointChainMax)
      return make_error(Errc::not_found, "checkpoint chain broken below " + checkpoint_file(at));
    const FileInfo& f = *it->second;
    auto bytes = env.read(f.name, 0, std::min<uint64_t>(f.size_bytes, kDeltaHeaderBytes));
    if (!bytes.ok()) return bytes.error();
    auto base = peek_checkpoint_base(bytes.value().data(), bytes.value().size());
    if (!base || !(*base < at)) return make_error(Errc::corrupt, "checkpoint header");
    chain.push_back(ChainFile{at, *base, f.name, f.size_bytes});
    if (base->value == 0) break;
    at = *base;
  }
  std::reverse(chain.begin(), chain.end());
  return chain;
}

Result<Checkpoint> load_chain(Env& env, const std::vector<ChainFile>& chain) {
  std::optional<Checkpoint> out;
  for (const ChainFile& f : chain) {
    auto c = load_file(env, f, out ? &out->store : nullptr);
    if (!c.ok()) return c.error();
    if (c.value().store.applied() != f.at)
      return make_error(Errc::corrupt, "checkpoint index disagrees with its name");
    out = std::move(c.value());
  }
  QUEEN_ASSERT(out.has_value(), "a chain holds a checkpoint");
  return std::move(*out);
}

}  // namespace

Result<LoadedCheckpoint> load_checkpoint(Env& env, const std::vector<FileInfo>& files) {
  std::map<LogIndex, const FileInfo*> by_at;
  for (const FileInfo& f : files) {
    LogIndex at;
    if (parse_checkpoint_file(f.name, &at)) by_at[at] = &f;
  }
  LoadedCheckpoint out;
  for (auto it = by_at.rbegin(); it != by_at.rend() && !out.newest; ++it) {
    auto chain = find_chain(env, by_at, it->first);
    auto c = chain.ok() ? load_chain(env, chain.value()) : Result<Checkpoint>(chain.error());
    if (!c.ok() && c.error().code == Errc::io) return c.error();  // the disk, not the file
    if (!c.ok()) {
      env.log(LogLevel::warn, "store checkpoint " + it->second->name +
                                  " is damaged, skipped: " + c.error().message);
      continue;
    }
    out.newest = std::move(c.value());
    out.chain = std::move(chain.value());
  }
  std::set<std::string> kept;
  for (const ChainFile& f : out.chain) kept.insert(f.file);
  for (const auto& [at, f] : by_at)
    if (!kept.contains(f->name)) out.stale.push_back(f->name);
  return out;
}

}  // namespace queen
