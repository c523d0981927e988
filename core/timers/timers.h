// Timers: an upsert keyed by (queue, timerKey) that, when due, pushes a real message through
// the push path (dedup on the timer's txn included) and deletes itself in the same entry.
// The timer planner evaluates schedule/reschedule/cancel against the committed timers, an
// overlay of in-flight entries and the call's scratch; the node's tick hands it the due
// timers to fire, oldest first, a bounded batch at a time.
#pragma once

#include <map>
#include <optional>
#include <vector>

#include "core/api/replies.h"
#include "core/planner/planner.h"
#include "core/state/store.h"

namespace queen {

struct TimerScratch {
  std::map<TimerKey, std::optional<TimerRow>> writes;
  std::vector<Effect> effects;
};

class TimerPlanner {
 public:
  static constexpr uint32_t kFireBatchMax = 256;  // QUEEN_RAFT_TIMER_FIRE_BATCH
  // A fire that fails (its payload cannot be sealed) is retried after a backoff that doubles
  // from kFireBackoffBaseMs; the kFireAttemptsMax-th failure dead-letters the timer.
  static constexpr uint32_t kFireAttemptsMax = 5;
  static constexpr int64_t kFireBackoffBaseMs = 1000;
  static int64_t fire_backoff_ms(uint32_t failures) {
    return kFireBackoffBaseMs << (failures > 1 ? failures - 1 : 0);
  }

  explicit TimerPlanner(const Store& store) : store_(store) {}

  TimerReply run(const std::vector<TimerOp>& ops, int64_t now_us, TimerScratch* scratch);
  std::optional<TimerRow> lookup(const TimerKey& key, const TimerScratch* scratch) const;
  void commit(TimerScratch&& scratch, OpenEntry* open);
  void on_applied(const Entry& entry);
  // Forgets what unapplied entries planned (a node that stopped leading).
  void reset() { overlay_.clear(); }
  // Due timers not already being fired or rewritten, oldest first, at most kFireBatchMax;
  // each is pinned until the entry at `entry_index` applies.
  std::vector<std::pair<TimerKey, TimerRow>> take_due(int64_t now_us, uint64_t entry_index);
  TimerQueryReply query(const TimerQueryCmd& cmd) const;

 private:
  TimerResult run_one(const TimerOp& op, int64_t now_us, TimerScratch* scratch);
  const Store& store_;
  std::map<TimerKey, std::pair<std::optional<TimerRow>, uint64_t>> overlay_;
};

}  // namespace queen
