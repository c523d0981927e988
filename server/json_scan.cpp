#include "server/json_scan.h"

#include <cmath>
#include <cstdlib>

#include "server/json_bytes.h"

namespace queen::server {

namespace {

// Number tokens longer than this are left to the general parser (it may read them as floats
// that overflow).
constexpr size_t kNumberCharsMax = 300;

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

void put_utf8(unsigned code, std::string* out) {
  if (out == nullptr) return;
  if (code < 0x80) {
    out->push_back(static_cast<char>(code));
  } else if (code < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (code >> 6)));
    out->push_back(static_cast<char>(0x80 | (code & 0x3F)));
  } else if (code < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (code >> 12)));
    out->push_back(static_cast<char>(0x80 | ((code >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (code & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (code >> 18)));
    out->push_back(static_cast<char>(0x80 | ((code >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((code >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (code & 0x3F)));
  }
}

}  // namespace

void JsonScan::ws() {
  while (at_ < text_.size()) {
    char c = text_[at_];
    if (c != ' ' && c != '\t' && c != '\n' && c != '\r') return;
    ++at_;
  }
}

bool JsonScan::eat(char c) {
  if (!ok_) return false;
  ws();
  if (at_ >= text_.size() || text_[at_] != c) return false;
  ++at_;
  if (c == '{' || c == '[') ++open_;
  if ((c == '}' || c == ']') && open_ > 0) --open_;
  return true;
}

bool JsonScan::next_is(char c) {
  if (!ok_) return false;
  ws();
  return at_ < text_.size() && text_[at_] == c;
}

bool JsonScan::at_end() {
  if (!ok_) return false;
  ws();
  return at_ == text_.size();
}

bool JsonScan::text(std::string_view* out, std::string* scratch) {
  if (!eat('"')) return fail();
  size_t from = at_;
  bool escaped = false;
  if (!string_body(nullptr, &escaped)) return fail();
  if (!escaped) {
    *out = text_.substr(from, at_ - 1 - from);
    return true;
  }
  at_ = from;
  scratch->clear();
  string_body(scratch);  // read once already: it succeeds again
  *out = *scratch;
  return true;
}

bool JsonScan::value(std::string_view* raw) {
  if (!ok_) return false;
  ws();
  size_t from = at_;
  if (!value_at(open_ + 1)) return fail();
  *raw = text_.substr(from, at_ - from);
  return true;
}

// `depth` counts the containers this value opens, at most depth_max_ in all.
bool JsonScan::value_at(size_t depth) {
  ws();
  if (at_ >= text_.size()) return false;
  switch (text_[at_]) {
    case '{':
      ++at_;
      return depth <= depth_max_ && container('}', depth);
    case '[':
      ++at_;
      return depth <= depth_max_ && container(']', depth);
    case '"':
      ++at_;
      return string_body(nullptr);
    case 't':
      return literal("true");
    case 'f':
      return literal("false");
    case 'n':
      return literal("null");
    default:
      return number();
  }
}

bool JsonScan::container(char close, size_t depth) {
  ws();
  if (at_ < text_.size() && text_[at_] == close) {
    ++at_;
    return true;
  }
  for (;;) {
    if (close == '}') {
      ws();
      if (at_ >= text_.size() || text_[at_] != '"') return false;
      ++at_;
      if (!string_body(nullptr)) return false;
      ws();
      if (at_ >= text_.size() || text_[at_] != ':') return false;
      ++at_;
    }
    if (!value_at(depth + 1)) return false;
    ws();
    if (at_ >= text_.size()) return false;
    char c = text_[at_++];
    if (c == close) return true;
    if (c != ',') return false;
  }
}

bool JsonScan::string_body(std::string* out, bool* escaped) {
  for (;;) {
    size_t run = at_;
    at_ += json_plain_ascii_run(text_.data() + at_, text_.size() - at_);
    if (out != nullptr) out->append(text_.data() + run, at_ - run);
    if (at_ >= text_.size()) return false;
    auto c = static_cast<unsigned char>(text_[at_]);
    if (c == '"') {
      ++at_;
      return true;
    }
    if (c < 0x20) return false;
    if (c == '\\' && escaped != nullptr) *escaped = true;
    if (c == '\\' ? !escape(out) : !utf8(out)) return false;
  }
}

bool JsonScan::escape(std::string* out) {
  ++at_;  // the backslash
  if (at_ >= text_.size()) return false;
  char c = text_[at_++];
  char plain = 0;
  switch (c) {
    case '"':
      plain = '"';
      break;
    case '\\':
      plain = '\\';
      break;
    case '/':
      plain = '/';
      break;
    case 'b':
      plain = '\b';
      break;
    case 'f':
      plain = '\f';
      break;
    case 'n':
      plain = '\n';
      break;
    case 'r':
      plain = '\r';
      break;
    case 't':
      plain = '\t';
      break;
    case 'u':
      break;
    default:
      return false;
  }
  if (c != 'u') {
    if (out != nullptr) out->push_back(plain);
    return true;
  }
  unsigned code = 0;
  if (!hex4(&code)) return false;
  if (code >= 0xDC00 && code <= 0xDFFF) return false;  // a low surrogate alone
  if (code >= 0xD800 && code <= 0xDBFF) {
    unsigned low = 0;
    if (at_ + 2 > text_.size() || text_[at_] != '\\' || text_[at_ + 1] != 'u') return false;
    at_ += 2;
    if (!hex4(&low) || low < 0xDC00 || low > 0xDFFF) return false;
    code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
  }
  put_utf8(code, out);
  return true;
}

bool JsonScan::hex4(unsigned* code) {
  if (at_ + 4 > text_.size()) return false;
  unsigned v = 0;
  for (int i = 0; i < 4; ++i) {
    char c = text_[at_++];
    unsigned d = 0;
    if (c >= '0' && c <= '9')
      d = static_cast<unsigned>(c - '0');
    else if (c >= 'a' && c <= 'f')
      d = static_cast<unsigned>(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F')
      d = static_cast<unsigned>(c - 'A' + 10);
    else
      return false;
    v = v * 16 + d;
  }
  *code = v;
  return true;
}

// One well-formed UTF-8 sequence of 2-4 bytes (no overlong forms, surrogates or code points
// past U+10FFFF), copied to `out`.
bool JsonScan::utf8(std::string* out) {
  auto byte = [&](size_t i) { return static_cast<unsigned char>(text_[at_ + i]); };
  unsigned char b0 = byte(0);
  size_t n = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // the range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    n = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    n = 3;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    n = 4;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    return false;
  }
  if (at_ + n > text_.size()) return false;
  if (byte(1) < lo || byte(1) > hi) return false;
  for (size_t i = 2; i < n; ++i) {
    if (byte(i) < 0x80 || byte(i) > 0xBF) return false;
  }
  if (out != nullptr) out->append(text_.data() + at_, n);
  at_ += n;
  return true;
}

bool JsonScan::number() {
  size_t from = at_;
  auto digits = [&] {
    size_t start = at_;
    while (at_ < text_.size() && is_digit(text_[at_])) ++at_;
    return at_ > start;
  };
  if (at_ < text_.size() && text_[at_] == '-') ++at_;
  if (at_ >= text_.size() || !is_digit(text_[at_])) return false;
  if (text_[at_] == '0') {
    ++at_;
  } else {
    digits();
  }
  bool is_float = false;
  if (at_ < text_.size() && text_[at_] == '.') {
    ++at_;
    if (!digits()) return false;
    is_float = true;
  }
  if (at_ < text_.size() && (text_[at_] == 'e' || text_[at_] == 'E')) {
    ++at_;
    if (at_ < text_.size() && (text_[at_] == '+' || text_[at_] == '-')) ++at_;
    if (!digits()) return false;
    is_float = true;
  }
  if (at_ - from > kNumberCharsMax) return false;
  if (!is_float) return true;
  // The general parser refuses a float that overflows.
  std::string token(text_.substr(from, at_ - from));
  return std::isfinite(std::strtod(token.c_str(), nullptr));
}

bool JsonScan::literal(std::string_view word) {
  if (text_.substr(at_, word.size()) != word) return false;
  at_ += word.size();
  return true;
}

}  // namespace queen::server
