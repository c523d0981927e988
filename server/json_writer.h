// A small streaming JSON writer for replies: objects, arrays, escaped strings, numbers, and
// raw splices of JSON text the node stored (payloads are never parsed again on the way out).
// The caller keeps the structure balanced; commas are placed by the writer.
#pragma once

#include <charconv>
#include <cstdint>
#include <cstdio>
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
    comma();
    append_string(k);
    out_.push_back(':');
    after_key_ = true;
    return *this;
  }
  // A key spelled in the source as a string literal: an identifier such as "offset", which
  // needs no escape, so it is copied as is. Any other key goes through key(std::string_view).
  template <size_t N>
  JsonWriter& key(const char (&literal)[N]) {
    comma();
    out_.push_back('"');
    out_.append(literal, N - 1);
    out_.append("\":", 2);
    after_key_ = true;
    return *this;
  }
  JsonWriter& string(std::string_view s) {
    comma();
    append_string(s);
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
    comma();
    out_.push_back('"');
    append_integer(v);
    out_.push_back('"');
    return *this;
  }
  // A UUID as its 36-character string.
  JsonWriter& uuid(const Uuid& u) {
    comma();
    out_.push_back('"');
    size_t at = out_.size();
    out_.resize(at + kUuidChars);
    uuid_to_chars(u, out_.data() + at);
    out_.push_back('"');
    return *this;
  }
  JsonWriter& boolean(bool v) { return literal(v ? "true" : "false"); }
  JsonWriter& null() { return literal("null"); }
  // Splices JSON text as is; empty text stands for null.
  JsonWriter& raw(std::string_view json) { return literal(json.empty() ? "null" : json); }
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
    comma();
    append_integer(v);
    return *this;
  }
  template <class T>
  void append_integer(T v) {
    char buf[24];
    auto end = std::to_chars(buf, buf + sizeof buf, v).ptr;
    out_.append(buf, static_cast<size_t>(end - buf));
  }
  JsonWriter& literal(std::string_view text) {
    comma();
    out_.append(text);
    return *this;
  }
  void comma() {
    if (after_key_) {
      after_key_ = false;
      return;
    }
    if (!fresh_) out_.push_back(',');
    fresh_ = false;
  }
  // Runs of characters that need no escape are copied whole; eight bytes are checked at a
  // time until one of them needs a look.
  void append_string(std::string_view s) {
    out_.push_back('"');
    size_t run = 0;
    for (size_t i = 0; i < s.size(); ++i) {
      while (i + 8 <= s.size() && json_word_unescaped(load_word(s.data() + i))) i += 8;
      if (i == s.size()) break;
      auto u = static_cast<unsigned char>(s[i]);
      if (u >= 0x20 && u != '"' && u != '\\') continue;
      out_.append(s.data() + run, i - run);
      run = i + 1;
      append_escape(u);
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

  std::string out_;
  // The innermost open container has nothing in it yet (true before the one top-level value):
  // a container is closed only after its members, so the one it returns to is never fresh.
  bool fresh_ = true;
  bool after_key_ = false;
};

}  // namespace queen::server
