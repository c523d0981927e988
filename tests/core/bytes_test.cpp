// ByteReader through a ByteSource: a reader fed a window at a time reads exactly what a reader
// of the whole buffer reads, whatever the window sizes, including values that cross a
// window's end and strings longer than a window; a short or failing input fails it the same.
#include "core/common/bytes.h"

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

namespace queen::testing {
namespace {

// Gives out `data` in windows of `window_bytes` (or the bytes asked for, when more), and
// nothing from `fail_at` on.
class SmallWindows final : public ByteSource {
 public:
  SmallWindows(const Bytes& data, size_t window_bytes, uint64_t fail_at)
      : data_(data), window_bytes_(window_bytes), fail_at_(fail_at) {}
  std::pair<const uint8_t*, size_t> window(uint64_t pos, size_t min_bytes) override {
    ++calls;
    if (pos >= fail_at_) return {nullptr, 0};
    size_t n = std::min<uint64_t>(std::max(min_bytes, window_bytes_), data_.size() - pos);
    copy_.assign(data_.begin() + pos, data_.begin() + pos + n);  // the old window goes away
    return {copy_.data(), copy_.size()};
  }
  int calls = 0;

 private:
  const Bytes& data_;
  size_t window_bytes_;
  uint64_t fail_at_;
  Bytes copy_;
};

struct Value {
  int kind;  // 0 u8, 1 u32, 2 u64, 3 str, 4 bytes, 5 skipped str
  uint64_t number = 0;
  std::string text;
};

void write(ByteWriter& w, const Value& v) {
  switch (v.kind) {
    case 0:
      w.u8(static_cast<uint8_t>(v.number));
      break;
    case 1:
      w.u32(static_cast<uint32_t>(v.number));
      break;
    case 2:
      w.u64(v.number);
      break;
    case 4:
      w.u32(static_cast<uint32_t>(v.text.size()));
      w.raw(v.text.data(), v.text.size());
      break;
    default:
      w.str(v.text);
  }
}

// What reading `v` gives, as text.
std::string read(ByteReader& r, const Value& v) {
  switch (v.kind) {
    case 0:
      return std::to_string(r.u8());
    case 1:
      return std::to_string(r.u32());
    case 2:
      return std::to_string(r.u64());
    case 3:
      return r.str();
    case 4: {
      Bytes b = r.bytes(r.u32());
      return std::string(b.begin(), b.end());
    }
    default:
      r.skip_str();
      return "skipped";
  }
}

RC_GTEST_PROP(ByteReader, ASourcedReaderReadsWhatABufferedOneReads, ()) {
  const auto values = *rc::gen::container<std::vector<Value>>(rc::gen::build<Value>(
      rc::gen::set(&Value::kind, rc::gen::inRange(0, 6)),
      rc::gen::set(&Value::number, rc::gen::arbitrary<uint64_t>()),
      rc::gen::set(&Value::text, rc::gen::container<std::string>(*rc::gen::inRange<size_t>(0, 80),
                                                                 rc::gen::character<char>()))));
  Bytes data;
  ByteWriter w(&data);
  for (const Value& v : values) write(w, v);
  const uint64_t n = *rc::gen::inRange<uint64_t>(0, data.size() + 1);  // maybe cut short
  const uint64_t fail_at = *rc::gen::inRange<uint64_t>(0, data.size() + 2);
  SmallWindows src(data, *rc::gen::inRange<size_t>(1, 40), fail_at);
  ByteReader whole(data.data(), n);
  ByteReader sourced(&src, n);
  for (const Value& v : values) {
    std::string want = read(whole, v);
    std::string got = read(sourced, v);
    RC_ASSERT(whole.pos() == sourced.pos() || !sourced.ok());
    if (!whole.ok()) {
      RC_ASSERT(!sourced.ok());
      break;
    }
    if (sourced.ok()) {
      RC_ASSERT(got == want);
      RC_ASSERT(sourced.left() == whole.left());
    } else {
      RC_ASSERT(fail_at < n);  // only a failing source fails a reader the buffer reads
    }
  }
}

TEST(ByteReader, ASourceIsAskedOnlyWhenAReadLeavesItsWindow) {
  Bytes data;
  ByteWriter w(&data);
  for (uint64_t i = 0; i < 100; ++i) w.u64(i);
  SmallWindows src(data, 80, data.size() + 1);
  ByteReader r(&src, data.size());
  for (uint64_t i = 0; i < 100; ++i) ASSERT_EQ(r.u64(), i);
  EXPECT_EQ(src.calls, 10);  // 800 bytes in windows of 80
  EXPECT_TRUE(r.ok());
  r.u8();
  EXPECT_FALSE(r.ok()) << "past the input's end";
}

}  // namespace
}  // namespace queen::testing
