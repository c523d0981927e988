// A small streaming JSON writer for replies: objects, arrays, escaped strings, numbers, and
// raw splices of JSON text the node stored (payloads are never parsed again on the way out).
// The caller keeps the structure balanced; commas are placed by the writer.
#pragma once

#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "core/common/types.h"
#include "server/json_bytes.h"

namespace queen::server {

class JsonWriter {
 public:
  JsonWriter& begin_object() { return open('{'); }
  JsonWriter& end_object() { return close('}'); }
  JsonWriter& begin_array() { return open('['); }
  JsonWriter& end_array() { return close(']'); }

  JsonWriter& key(std::string_view k) {
    string(k);
    out_.push_back(':');
    after_key_ = true;
    return *this;
  }
  // A key spelled in the source as a string literal: an identifier such as "offset", which
  // needs no escape, so it is copied as is. Any other key goes through key(std::string_view).
  template <size_t N>
  JsonWriter& key(const char (&literal)[N]) {
    char text[N + 3] = {',', '"'};  // the comma, the quoted key and its colon: one append
    std::memcpy(text + 2, literal, N - 1);
    text[N + 1] = '"';
    text[N + 2] = ':';
    size_t skip = take_comma() ? 0 : 1;
    out_.append(text + skip, sizeof text - skip);
    after_key_ = true;
    return *this;
  }
  JsonWriter& string(std::string_view s) {
    if (take_comma())
      out_.append(",\"", 2);
    else
      out_.push_back('"');
    append_string_rest(s);
    return *this;
  }
  // The empty string renders as null (optional text fields).
  JsonWriter& string_or_null(std::string_view s) { return s.empty() ? null() : string(s); }
  JsonWriter& number(int64_t v) { return integer(v); }
  JsonWriter& number(uint64_t v) { return integer(v); }
  JsonWriter& number(uint32_t v) { return integer(v); }
  JsonWriter& number(int v) { return integer(v); }
  // An integer as a JSON string ("12"): ids the API hands out as text.
  JsonWriter& decimal_string(uint64_t v) {
    char text[kIntegerChars + 3] = {',', '"'};
    char* end = std::to_chars(text + 2, text + sizeof text - 1, v).ptr;
    *end++ = '"';
    return put(text, end);
  }
  // A UUID as its 36-character string.
  JsonWriter& uuid(const Uuid& u) {
    char text[kUuidChars + 3] = {',', '"'};
    uuid_to_chars(u, text + 2);
    text[kUuidChars + 2] = '"';
    return put(text, text + sizeof text);
  }
  JsonWriter& boolean(bool v) {
    static constexpr char kTrue[] = ",true", kFalse[] = ",false";
    return v ? put(kTrue, kTrue + sizeof kTrue - 1) : put(kFalse, kFalse + sizeof kFalse - 1);
  }
  JsonWriter& null() {
    static constexpr char kNull[] = ",null";
    return put(kNull, kNull + sizeof kNull - 1);
  }
  // Splices JSON text as is; empty text stands for null.
  JsonWriter& raw(std::string_view json) { return json.empty() ? null() : literal(json); }
  // Splices members rendered by another writer (`"a":1,"b":"x"`, see members_of) into the
  // open object: what repeats across an answer's items is rendered once.
  JsonWriter& members(std::string_view rendered) { return literal(rendered); }

  // The members `put` writes into an object, without its braces, for members().
  template <class F>
  static std::string members_of(F&& put) {
    JsonWriter w;
    w.begin_object();
    put(w);
    return w.take().substr(1);
  }

  // Room for `bytes` of text, so a large answer is not copied as it grows.
  void reserve(size_t bytes) { out_.reserve(bytes); }
  std::string take() { return std::move(out_); }
  const std::string& text() const { return out_; }

 private:
  JsonWriter& open(char c) {
    comma();
    out_.push_back(c);
    fresh_ = true;
    return *this;
  }
  // The container it returns to holds at least the one closed.
  JsonWriter& close(char c) {
    out_.push_back(c);
    fresh_ = false;
    return *this;
  }
  template <class T>
  JsonWriter& integer(T v) {
    char text[kIntegerChars + 1] = {','};
    return put(text, std::to_chars(text + 1, text + sizeof text, v).ptr);
  }
  // Appends a value rendered in [text, end) after a comma in text[0], which is left out where
  // none goes: a value is one append, not one per piece.
  JsonWriter& put(const char* text, const char* end) {
    size_t skip = take_comma() ? 0 : 1;
    out_.append(text + skip, static_cast<size_t>(end - text) - skip);
    return *this;
  }
  JsonWriter& literal(std::string_view text) {
    comma();
    out_.append(text);
    return *this;
  }
  void comma() {
    if (take_comma()) out_.push_back(',');
  }
  // Whether a comma goes before the next key or value; the writer then counts it written.
  bool take_comma() {
    if (after_key_) {
      after_key_ = false;
      return false;
    }
    bool needed = !fresh_;
    fresh_ = false;
    return needed;
  }
  // After the opening quote: the escaped text and the closing quote. Runs of characters that
  // need no escape are measured (json_unescaped_run) and copied whole.
  void append_string_rest(std::string_view s) {
    size_t run = 0;
    for (size_t i = 0;;) {
      i += json_unescaped_run(s.data() + i, s.size() - i);
      if (i == s.size()) break;
      out_.append(s.data() + run, i - run);
      append_escape(static_cast<unsigned char>(s[i]));
      run = ++i;
    }
    out_.append(s.data() + run, s.size() - run);
    out_.push_back('"');
  }
  void append_escape(unsigned char u) {
    switch (u) {
      case '"':
        out_ += "\\\"";
        break;
      case '\\':
        out_ += "\\\\";
        break;
      case '\n':
        out_ += "\\n";
        break;
      case '\r':
        out_ += "\\r";
        break;
      case '\t':
        out_ += "\\t";
        break;
      default: {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\u%04x", u);
        out_ += buf;
      }
    }
  }

  static constexpr size_t kIntegerChars = 20;  // the longest: INT64_MIN, or UINT64_MAX

  std::string out_;
  // The innermost open container has nothing in it yet (true before the one top-level value):
  // a container is closed only after its members, so the one it returns to is never fresh.
  bool fresh_ = true;
  bool after_key_ = false;
};

}  // namespace queen::server
