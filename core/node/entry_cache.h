// The replicated log's tail kept in memory for Raft (EntryCache), with a fallback to the log
// files for entries below it. Internal to core/node: a cluster node's Cluster holds one.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <vector>

#include "core/common/bytes.h"
#include "core/common/types.h"
#include "core/raft/raft.h"

namespace queen {

// The encoded entries Raft replicates, by index: the tail of the log kept in memory within a
// byte budget (entries already applied are dropped first). A follower that needs an entry
// below what it holds cannot be caught up from here.
class EntryCache final : public raft::LogView {
 public:
  explicit EntryCache(uint64_t bytes_max) : bytes_max_(bytes_max) {}

  // Rebuilds an entry below what the cache holds from the log files (an applied one).
  std::function<std::optional<raft::LogEntry>(uint64_t index)> fallback;

  void put(LogIndex index, Term term, Bytes data) {
    truncate_after(LogIndex(index.value - 1));
    bytes_ += data.size();
    entries_.emplace(index.value, raft::LogEntry{index, term, std::move(data)});
  }
  void truncate_after(LogIndex index) {
    for (auto it = entries_.upper_bound(index.value); it != entries_.end();) {
      bytes_ -= it->second.data.size();
      it = entries_.erase(it);
    }
  }
  void trim(uint64_t applied) {
    while (bytes_ > bytes_max_ && !entries_.empty() && entries_.begin()->first <= applied) {
      bytes_ -= entries_.begin()->second.data.size();
      entries_.erase(entries_.begin());
    }
  }
  std::vector<raft::LogEntry> entries(LogIndex from_exclusive, LogIndex to_inclusive,
                                      uint64_t bytes_max) const override {
    std::vector<raft::LogEntry> out;
    uint64_t bytes = 0;
    uint64_t want = from_exclusive.value + 1;
    // Older than the cache: read back from the log files, one batch at a time.
    while (fallback && want <= to_inclusive.value &&
           (entries_.empty() || want < entries_.begin()->first)) {
      auto e = fallback(want);
      if (!e) return out;
      if (!out.empty() && bytes + e->data.size() > bytes_max) return out;
      bytes += e->data.size();
      out.push_back(std::move(*e));
      ++want;
    }
    if (!out.empty() && want <= to_inclusive.value && entries_.begin()->first != want) return out;
    for (auto it = entries_.find(want); it != entries_.end() && it->first <= to_inclusive.value;
         ++it, ++want) {
      if (it->first != want) break;
      if (!out.empty() && bytes + it->second.data.size() > bytes_max) break;
      bytes += it->second.data.size();
      out.push_back(it->second);
    }
    return out;
  }

 private:
  uint64_t bytes_max_;
  uint64_t bytes_ = 0;
  std::map<uint64_t, raft::LogEntry> entries_;
};

}  // namespace queen
