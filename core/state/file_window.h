// FileWindow: one file read through the environment a window at a time, so that a reader
// of a large file (a log file scanned at start-up, a store checkpoint) holds one window of it,
// or one record when a record is larger, and never the whole file. As a ByteSource it feeds a
// ByteReader; a read error is kept (status()) and ends the reader's input.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <utility>

#include "core/common/bytes.h"
#include "core/common/result.h"
#include "io/env.h"

namespace queen {

// A ByteSource's window from a read's result: a failed read is kept in `*status` and ends the
// reader's input.
inline std::pair<const uint8_t*, size_t> window_or_end(Result<std::span<const uint8_t>> got,
                                                       Status* status) {
  if (!got.ok()) {
    *status = got.error();
    return {nullptr, 0};
  }
  return {got.value().data(), got.value().size()};
}

class FileWindow final : public ByteSource {
 public:
  static constexpr uint64_t kWindowBytes = 1u << 20;
  // `size` bytes of `name`, from byte `offset` of the file on, read `window_bytes` at a time
  // at least (a reader of a few bytes of a file reads only those).
  FileWindow(Env& env, std::string name, uint64_t size, uint64_t offset = 0,
             uint64_t window_bytes = kWindowBytes)
      : env_(env),
        name_(std::move(name)),
        size_(size),
        offset_(offset),
        window_bytes_(window_bytes) {}

  // The bytes [pos, pos + want), or fewer where the file ends sooner.
  Result<std::span<const uint8_t>> at(uint64_t pos, uint64_t want) {
    want = pos < size_ ? std::min(want, size_ - pos) : 0;
    if (pos < start_ || pos + want > start_ + buf_.size()) {
      uint64_t len = std::min(std::max(want, window_bytes_), size_ - std::min(pos, size_));
      start_ = 0;
      if (auto st = env_.read_into(name_, offset_ + pos, len, &buf_); !st.ok()) {
        buf_.clear();
        return st.error();
      }
      start_ = pos;
      want = std::min<uint64_t>(want, buf_.size());
    }
    return std::span<const uint8_t>(buf_.data() + (pos - start_), want);
  }

  // At least `min_bytes` from `pos` on (fewer where the file ends), and as many more as the
  // window holds.
  Result<std::span<const uint8_t>> from(uint64_t pos, uint64_t min_bytes) {
    auto got = at(pos, min_bytes);
    if (!got.ok()) return got;
    return std::span<const uint8_t>(got.value().data(), start_ + buf_.size() - pos);
  }

  std::pair<const uint8_t*, size_t> window(uint64_t pos, size_t min_bytes) override {
    return window_or_end(from(pos, min_bytes), &status_);
  }
  const Status& status() const { return status_; }

 private:
  Env& env_;
  std::string name_;
  uint64_t size_;
  uint64_t offset_;
  uint64_t window_bytes_;
  uint64_t start_ = 0;
  Bytes buf_;
  Status status_ = ok_status();
};

}  // namespace queen
