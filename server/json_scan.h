// A strict JSON scanner for the hot request bodies (push, ack batch, transaction). It
// validates as RFC 8259 and nlohmann/json do (grammar, UTF-8, escapes and surrogate pairs,
// nesting depth) without building a tree, and hands out the raw bytes of a value, so a
// payload is stored as sent.
//
// Contract: the scanner never accepts text that nlohmann/json rejects. It may refuse valid
// text (it is then only slower: callers fall back to the general parser, which also names
// the error). eat() and next_is() only probe; once text() or value() fails, ok() stays
// false and every later call fails.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace queen::server {

class JsonScan {
 public:
  JsonScan(std::string_view text, size_t depth_max) : text_(text), depth_max_(depth_max) {}

  bool ok() const { return ok_; }
  // Skips whitespace, then takes `c` when it comes next. Brackets taken here count towards
  // the depth of the values inside them.
  bool eat(char c);
  // Skips whitespace; true when `c` comes next (not taken).
  bool next_is(char c);
  // A string value: `out` views its bytes in the text when it has no escape, else `scratch`,
  // which holds it unescaped (keys and ids, read without a copy of their own).
  bool text(std::string_view* out, std::string* scratch);
  // Any value, validated; `raw` gets its bytes as they appear in the text.
  bool value(std::string_view* raw);
  // True when only whitespace is left.
  bool at_end();

 private:
  void ws();
  bool fail() { return ok_ = false; }
  bool value_at(size_t depth);
  bool container(char close, size_t depth);
  // After the opening quote; out may be null. `escaped`, if given, is set when the string
  // holds an escape.
  bool string_body(std::string* out, bool* escaped = nullptr);
  bool escape(std::string* out);
  bool utf8(std::string* out);
  bool number();
  bool literal(std::string_view word);
  bool hex4(unsigned* code);

  std::string_view text_;
  size_t at_ = 0;
  size_t depth_max_;
  size_t open_ = 0;  // containers opened by eat() and not closed
  bool ok_ = true;
};

}  // namespace queen::server
