// Locks and semaphores over KV: a permit is the row `queen-locks`/`<name>#<slot>`, its
// fencing token is the row's version (store-wide, so an expired lock taken over gets a
// higher token). An acquire answers the guard a transaction carries (a required `check` of
// the token), so a guarded step commits only while the permit is still held.
#pragma once

#include "core/kv/kv.h"

namespace queen {

constexpr const char* kLocksNamespace = "queen-locks";
constexpr uint32_t kLockSlotsMax = 1024;

class LockPlanner {
 public:
  explicit LockPlanner(KvPlanner& kv) : kv_(kv) {}
  LockReply run(const LockCmd& cmd, int64_t now_us, KvScratch* scratch);

 private:
  LockResult acquire(const LockOp& op, int64_t now_us, KvScratch* scratch);
  LockResult renew(const LockOp& op, int64_t now_us, KvScratch* scratch);
  LockResult release(const LockOp& op, int64_t now_us, KvScratch* scratch);
  std::vector<LockHolder> holders(const std::string& name, int64_t now_us,
                                  const KvScratch* scratch);
  KvPlanner& kv_;
};

std::string lock_key(const std::string& name, uint32_t slot);
std::string lock_value(const std::string& owner, int64_t now_us);
std::string lock_owner(const std::string& value);

}  // namespace queen
