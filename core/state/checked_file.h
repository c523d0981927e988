// CheckedFile: a file that ends in the xxh3-64 of all its other bytes (a store checkpoint, the
// dedup rings), read once, a window at a time: every byte handed out passes through the
// checksum in file order, so a body is verified as it is decoded, not read a second time for
// its sum. As a ByteSource it is the body, from `body_at` on. The decoder of a damaged file
// may fail before the checksum does; it must stay within the bytes it is given.
#pragma once

#include <xxhash.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>

#include "core/common/assert.h"
#include "core/common/bytes.h"
#include "core/common/result.h"
#include "core/state/file_window.h"
#include "io/env.h"

namespace queen {

class CheckedFile final : public ByteSource {
 public:
  // `size_bytes` (at least 8) of file `name`, the last 8 of them its checksum.
  CheckedFile(Env& env, std::string name, uint64_t size_bytes)
      : w_(env, std::move(name), size_bytes),
        sum_end_(size_bytes - 8),
        st_(XXH3_createState(), XXH3_freeState) {
    QUEEN_ASSERT(size_bytes >= 8, "a checked file ends in its checksum");
    QUEEN_ASSERT(st_ != nullptr, "xxh3 state allocated");
    XXH3_64bits_reset(st_.get());
  }
  void set_body_at(uint64_t at) { body_at_ = at; }

  // At least `min_bytes` of the file from `pos` on (fewer where it ends), as FileWindow::from;
  // bytes before `pos` not yet summed are read and summed first.
  Result<std::span<const uint8_t>> from(uint64_t pos, uint64_t min_bytes) {
    if (auto st = sum_upto(pos); !st.ok()) return st.error();
    auto got = w_.from(pos, min_bytes);
    if (got.ok()) add(pos, got.value());
    return got;
  }

  std::pair<const uint8_t*, size_t> window(uint64_t pos, size_t min_bytes) override {
    return window_or_end(from(body_at_ + pos, min_bytes), &status_);
  }
  const Status& status() const { return status_; }

  // The checksum, once every byte it covers has been read.
  Result<uint64_t> digest() {
    if (auto st = sum_upto(sum_end_); !st.ok()) return st.error();
    return XXH3_64bits_digest(st_.get());
  }

 private:
  // Sums the bytes of [pos, pos + bytes.size()) that follow those summed.
  void add(uint64_t pos, std::span<const uint8_t> bytes) {
    uint64_t end = std::min(sum_end_, pos + bytes.size());
    if (pos > summed_ || end <= summed_) return;
    XXH3_64bits_update(st_.get(), bytes.data() + (summed_ - pos), end - summed_);
    summed_ = end;
  }
  Status sum_upto(uint64_t end) {
    end = std::min(end, sum_end_);
    while (summed_ < end) {
      auto got = w_.from(summed_, std::min(FileWindow::kWindowBytes, end - summed_));
      if (!got.ok()) return got.error();
      if (got.value().empty()) return make_error(Errc::truncated, "file shorter than listed");
      add(summed_, got.value());
    }
    return ok_status();
  }

  FileWindow w_;
  uint64_t sum_end_;
  uint64_t summed_ = 0;
  uint64_t body_at_ = 0;
  std::unique_ptr<XXH3_state_t, decltype(&XXH3_freeState)> st_;
  Status status_ = ok_status();
};

}  // namespace queen
