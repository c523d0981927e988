#include "ctl/output.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

namespace queen::ctl {
namespace {

bool numeric(const std::string& s) {
  return !s.empty() && s.find_first_not_of("0123456789.-") == std::string::npos;
}

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

std::string Table::render() const {
  std::vector<size_t> width(headers_.size());
  for (size_t c = 0; c < headers_.size(); ++c) width[c] = headers_[c].size();
  for (const auto& r : rows_)
    for (size_t c = 0; c < r.size() && c < width.size(); ++c)
      width[c] = std::max(width[c], r[c].size());
  std::string out;
  auto line = [&](const std::vector<std::string>& cells, bool header) {
    for (size_t c = 0; c < width.size(); ++c) {
      std::string v = c < cells.size() ? cells[c] : "";
      std::string pad(width[c] - std::min(width[c], v.size()), ' ');
      bool right = !header && numeric(v);
      out += right ? pad + v : v + (c + 1 < width.size() ? pad : "");
      if (c + 1 < width.size()) out += "  ";
    }
    out += '\n';
  };
  line(headers_, true);
  for (const auto& r : rows_) line(r, false);
  return out;
}

std::string cell(const json& v) {
  if (v.is_null()) return "-";
  if (v.is_string()) return v.get<std::string>();
  return v.dump();
}

std::string cell(const json& object, const char* key) {
  if (!object.is_object() || !object.contains(key)) return "-";
  return cell(object[key]);
}

Progress::Progress(std::string label, uint64_t total, bool enabled)
    : label_(std::move(label)), total_(total), enabled_(enabled), started_ms_(now_ms()) {}

void Progress::update(uint64_t done, uint64_t items) {
  if (!enabled_ || now_ms() - drawn_ms_ < 200) return;
  draw(done, items, false);
}

void Progress::finish(uint64_t done, uint64_t items) {
  if (enabled_) draw(done, items, true);
}

void Progress::draw(uint64_t done, uint64_t items, bool last) {
  drawn_ms_ = now_ms();
  double seconds = std::max<int64_t>(1, drawn_ms_ - started_ms_) / 1000.0;
  double pct = total_ == 0 ? 100.0 : 100.0 * static_cast<double>(done) / total_;
  constexpr int kBarWidth = 30;
  int filled = static_cast<int>(std::min(100.0, pct) * kBarWidth / 100.0);
  std::string bar = std::string(filled, '#') + std::string(kBarWidth - filled, '.');
  std::fprintf(stderr, "\r%s [%s] %5.1f%%  %llu messages  %.0f/s%s", label_.c_str(), bar.c_str(),
               pct, static_cast<unsigned long long>(items), items / seconds, last ? "\n" : "");
  std::fflush(stderr);
}

}  // namespace queen::ctl
