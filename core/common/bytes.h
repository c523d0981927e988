// Little-endian byte encoding for records, entries and peer messages. Writer appends to a
// buffer; Reader checks every read against the bytes left and reports a short read as a
// sticky failure, so a decoder never reads past its input whatever the bytes say. A Reader
// reads one buffer, or an input too large to hold at once (a store checkpoint) through a
// ByteSource, a window at a time.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/common/types.h"

namespace queen {

using Bytes = std::vector<uint8_t>;

// Receives a writer's bytes in pieces (ByteWriter with a sink).
class ByteSink {
 public:
  virtual ~ByteSink() = default;
  virtual void put(const uint8_t* data, size_t size) = 0;
};

// Collects the pieces in one buffer.
class BufferSink final : public ByteSink {
 public:
  explicit BufferSink(Bytes* out) : out_(out) {}
  void put(const uint8_t* data, size_t size) override {
    out_->insert(out_->end(), data, data + size);
  }

 private:
  Bytes* out_;
};

class ByteWriter {
 public:
  explicit ByteWriter(Bytes* out) : out_(out) {}
  // A writer that passes what it holds to `sink` at a boundary() once it holds at least
  // `spill_bytes`, and at flush(): a large encoding never sits in memory whole.
  ByteWriter(Bytes* out, ByteSink* sink, size_t spill_bytes)
      : out_(out), sink_(sink), spill_bytes_(spill_bytes) {}
  // The caller's point between items: no later patch reaches back past it.
  void boundary() {
    if (sink_ != nullptr && out_->size() >= spill_bytes_) flush();
  }
  void flush() {
    if (sink_ == nullptr || out_->empty()) return;
    sink_->put(out_->data(), out_->size());
    spilled_ += out_->size();
    out_->clear();
  }
  void u8(uint8_t v) { out_->push_back(v); }
  void u32(uint32_t v) { put(&v, 4); }
  void u64(uint64_t v) { put(&v, 8); }
  void i64(int64_t v) { put(&v, 8); }
  void hash(const Hash128& h) {
    u64(h.lo);
    u64(h.hi);
  }
  // `n` hashes in a row, each as hash() writes it (lo then hi, little-endian): one copy.
  void hashes(const Hash128* h, size_t n) {
    static_assert(sizeof(Hash128) == 16 && offsetof(Hash128, hi) == 8, "Hash128 is lo, hi");
    raw(h, n * sizeof(Hash128));
  }
  void uuid(const Uuid& u) { raw(u.bytes.data(), 16); }
  void str(std::string_view s) {
    u32(static_cast<uint32_t>(s.size()));
    raw(s.data(), s.size());
  }
  void raw(const void* p, size_t n) {
    auto* b = static_cast<const uint8_t*>(p);
    out_->insert(out_->end(), b, b + n);
  }
  // Bytes written so far, those passed to the sink included.
  size_t size() const { return spilled_ + out_->size(); }
  // Overwrites 4 bytes at `pos` (used to back-fill a length; never before the last spill).
  void patch_u32(size_t pos, uint32_t v) { std::memcpy(out_->data() + (pos - spilled_), &v, 4); }
  void patch_u64(size_t pos, uint64_t v) { std::memcpy(out_->data() + (pos - spilled_), &v, 8); }

 private:
  void put(const void* p, size_t n) { raw(p, n); }  // host is little-endian (x86_64, arm64)
  Bytes* out_;
  ByteSink* sink_ = nullptr;
  size_t spill_bytes_ = 0;
  size_t spilled_ = 0;  // bytes already passed to sink_
};

// Gives a ByteReader its input a window at a time.
class ByteSource {
 public:
  virtual ~ByteSource() = default;
  // The input from position `pos` on: at least `min_bytes` of it, unless the input ends
  // sooner or cannot be read (then fewer, and the reader fails).
  virtual std::pair<const uint8_t*, size_t> window(uint64_t pos, size_t min_bytes) = 0;
};

class ByteReader {
 public:
  ByteReader(const uint8_t* p, size_t n) : p_(p), n_(n), win_end_(n) {}
  explicit ByteReader(const Bytes& b) : ByteReader(b.data(), b.size()) {}
  // The `n` bytes of `src` from position 0, read as they are needed.
  ByteReader(ByteSource* src, uint64_t n) : p_(nullptr), n_(n), src_(src) {}
  bool ok() const { return ok_; }
  size_t left() const { return ok_ ? n_ - pos_ : 0; }
  // Marks the input bad (a decoder found a value out of range): every later read fails.
  void invalidate() { ok_ = false; }
  size_t pos() const { return pos_; }
  uint8_t u8() {
    uint8_t v = 0;
    get(&v, 1);
    return v;
  }
  uint32_t u32() {
    uint32_t v = 0;
    get(&v, 4);
    return v;
  }
  uint64_t u64() {
    uint64_t v = 0;
    get(&v, 8);
    return v;
  }
  int64_t i64() {
    int64_t v = 0;
    get(&v, 8);
    return v;
  }
  Hash128 hash() {
    Hash128 h;
    h.lo = u64();
    h.hi = u64();
    return h;
  }
  Uuid uuid() {
    Uuid u;
    get(u.bytes.data(), 16);
    return u;
  }
  std::string str() {
    uint32_t n = u32();
    if (!have(n)) return {};
    std::string s(reinterpret_cast<const char*>(at()), n);
    pos_ += n;
    return s;
  }
  // Skips a string written by ByteWriter::str.
  void skip_str() { skip(u32()); }
  // Skips n bytes (fails the reader when fewer are left).
  void skip(size_t n) {
    if (!ok_ || n > left()) {
      ok_ = false;
      return;
    }
    pos_ += n;
  }
  // n raw bytes (fails the reader when fewer are left).
  Bytes bytes(size_t n) {
    if (!have(n)) return {};
    Bytes b(at(), at() + n);
    pos_ += n;
    return b;
  }
  // n raw bytes into `out`, a piece at a time (no window need hold them all); fails the reader
  // when fewer are left.
  void raw_into(void* out, size_t n) {
    auto* o = static_cast<uint8_t*>(out);
    while (n > 0 && ok_) {
      size_t k = std::min(n, kRawPieceBytes);
      get(o, k);
      o += k;
      n -= k;
    }
  }
  // A bounded count: fails the reader when the count could not fit in the bytes left,
  // given each element takes at least `min_elem_bytes`.
  uint32_t count(size_t min_elem_bytes) {
    uint32_t n = u32();
    if (ok_ && min_elem_bytes > 0 && n > left() / min_elem_bytes) ok_ = false;
    return ok_ ? n : 0;
  }

 private:
  static constexpr size_t kRawPieceBytes = size_t{1} << 16;
  const uint8_t* at() const { return p_ + (pos_ - win_at_); }
  // Whether the next n bytes are in the window (moving it when they are not); fails the
  // reader when the input holds fewer.
  bool have(size_t n) {
    if (ok_ && pos_ + n <= win_end_) return true;
    if (!ok_ || n > n_ - pos_ || !src_) {
      ok_ = false;
      return false;
    }
    auto [data, size] = src_->window(pos_, n);
    if (size < n) {
      ok_ = false;
      return false;
    }
    p_ = data;
    win_at_ = pos_;
    win_end_ = pos_ + std::min<uint64_t>(size, n_ - pos_);
    return true;
  }
  void get(void* out, size_t n) {
    if (!have(n)) {
      std::memset(out, 0, n);
      return;
    }
    std::memcpy(out, at(), n);
    pos_ += n;
  }
  const uint8_t* p_;  // the window: the input from win_at_ to win_end_
  uint64_t n_;
  uint64_t pos_ = 0;
  uint64_t win_at_ = 0;
  uint64_t win_end_ = 0;
  ByteSource* src_ = nullptr;
  bool ok_ = true;
};

}  // namespace queen
