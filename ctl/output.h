// queenctl's output: aligned text tables for people, one JSON document per line with --json,
// and the exit codes a script reads.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace queen::ctl {

using json = nlohmann::json;

// Exit codes (README: queenctl).
enum Exit : int {
  kOk = 0,
  kApiError = 1,     // the node answered an error (4xx but 404, or 5xx)
  kUsage = 2,        // bad arguments or input
  kUnreachable = 3,  // no answer, or `health` found the node unhealthy
  kNotFound = 4,     // the node answered 404
};

class Table {
 public:
  explicit Table(std::vector<std::string> headers) : headers_(std::move(headers)) {}
  void row(std::vector<std::string> cells) { rows_.push_back(std::move(cells)); }
  // Columns padded to their widest cell; numbers right-aligned.
  std::string render() const;
  size_t size() const { return rows_.size(); }

 private:
  std::vector<std::string> headers_;
  std::vector<std::vector<std::string>> rows_;
};

// A JSON value as a table cell: strings bare, null as "-", the rest as compact JSON.
std::string cell(const json& v);
// A field of an object as a cell ("-" when absent).
std::string cell(const json& object, const char* key);

// A progress line on stderr, redrawn in place: "label  done/total (pct%)  rate/s".
class Progress {
 public:
  Progress(std::string label, uint64_t total, bool enabled);
  void update(uint64_t done, uint64_t items);
  void finish(uint64_t done, uint64_t items);

 private:
  void draw(uint64_t done, uint64_t items, bool last);
  std::string label_;
  uint64_t total_;
  bool enabled_;
  int64_t started_ms_;
  int64_t drawn_ms_ = 0;
};

}  // namespace queen::ctl
