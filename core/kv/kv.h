// KV namespaces: versioned keys in the same log as the messages. The KV planner evaluates a
// call's operations in order against the committed rows, the writes of in-flight entries
// (an overlay) and the call's own earlier writes (a scratch), so a call is serializable in
// commit order. A failed `required` precondition aborts the call and nothing of it applies.
// Versions come from one store-wide counter, so a key's version (a lock's fencing token)
// only grows, also across expiry and deletion. Expired rows read as absent and are swept.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/api/replies.h"
#include "core/planner/planner.h"
#include "core/state/entry.h"
#include "core/state/store.h"

namespace queen {

struct KvScratch {
  std::map<KvKey, std::optional<KvRow>> writes;  // nullopt: deleted
  std::vector<Effect> effects;                   // in op order
};

class KvPlanner {
 public:
  static constexpr uint32_t kPrefixLimitMax = 1000;
  static constexpr uint32_t kSweepRowsMax = 512;

  explicit KvPlanner(const Store& store) : store_(store) {}

  KvReply run(const std::vector<KvOp>& ops, int64_t now_us, KvScratch* scratch);
  // The live row as this call sees it.
  std::optional<KvRow> lookup(const KvKey& key, int64_t now_us, const KvScratch* scratch) const;
  // Live rows of `ns` whose key starts with `prefix`, after `after`, in key order.
  std::vector<std::pair<std::string, KvRow>> scan(const std::string& ns, const std::string& prefix,
                                                  const std::string& after, uint32_t limit,
                                                  int64_t now_us, const KvScratch* scratch,
                                                  bool* truncated) const;
  void write(const KvKey& key, std::optional<KvRow> row, KvScratch* scratch);
  uint64_t mint_version() {
    return version_planned_ = std::max(version_planned_, store_.kv_version()) + 1;
  }
  // Moves the scratch's writes into the open entry and the in-flight overlay.
  void commit(KvScratch&& scratch, OpenEntry* open);
  void on_applied(const Entry& entry);
  // Forgets what unapplied entries planned (a node that stopped leading).
  void reset() { overlay_.clear(); }
  // Deletes for rows expired by `now_us` (at most kSweepRowsMax), to go into the entry at
  // `entry_index`.
  std::vector<Effect> sweep(int64_t now_us, uint64_t entry_index);

 private:
  KvResult run_one(const KvOp& op, uint32_t index, int64_t now_us, KvScratch* scratch,
                   bool* precondition_lost);

  const Store& store_;
  std::map<KvKey, std::pair<std::optional<KvRow>, uint64_t>> overlay_;  // row, entry index
  uint64_t version_planned_ = 0;
};

KvRowView kv_view(const std::string& key, const KvRow& row);

}  // namespace queen
