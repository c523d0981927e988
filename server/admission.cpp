#include "server/admission.h"

#include <xxhash.h>

#include <sys/statvfs.h>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <sstream>
#include <vector>
#include "server/edge_counters.h"

namespace queen::server {

// ---------- admission ----------

AdmitSource client_source(std::string_view address) {
  return kClientSourceBit | (XXH3_64bits(address.data(), address.size()) >> 1);
}

std::optional<uint64_t> Admission::acquire(AdmitPermit permit, Granted granted) {
  std::lock_guard lock(mutex_);
  Holder& holder = holders_[permit.source];
  // First come, first served: no request passes one that could be granted; a request waiting
  // only because its source is at its cap holds up nobody else.
  bool queue_ahead = std::any_of(holders_.begin(), holders_.end(),
                                 [&](const auto& h) { return eligible_locked(h.first, h.second); });
  if (!queue_ahead && in_use_ + permit.bytes <= budget_ &&
      holder.in_use + permit.bytes <= cap_of(permit.source)) {
    in_use_ += permit.bytes;
    holder.in_use += permit.bytes;
    publish_locked();
    return std::nullopt;
  }
  uint64_t ticket = next_ticket_++;
  holder.waiters.push_back(Waiter{ticket, permit.bytes, std::move(granted)});
  waiting_++;
  publish_locked();
  return ticket;
}

bool Admission::withdraw(uint64_t ticket) {
  std::lock_guard lock(mutex_);
  for (auto h = holders_.begin(); h != holders_.end(); ++h) {
    auto& waiters = h->second.waiters;
    for (auto it = waiters.begin(); it != waiters.end(); ++it) {
      if (it->ticket != ticket) continue;
      waiters.erase(it);
      waiting_--;
      forget_if_idle_locked(h);
      publish_locked();
      return true;
    }
  }
  return false;
}

std::optional<Admission::Granted> Admission::grant_next_locked() {
  auto next = holders_.end();
  for (auto h = holders_.begin(); h != holders_.end(); ++h) {
    if (!eligible_locked(h->first, h->second)) continue;
    if (next == holders_.end() || h->second.in_use < next->second.in_use) next = h;
  }
  if (next == holders_.end()) return std::nullopt;
  Waiter& head = next->second.waiters.front();
  if (in_use_ + head.bytes > budget_) return std::nullopt;
  in_use_ += head.bytes;
  next->second.in_use += head.bytes;
  Granted granted = std::move(head.granted);
  next->second.waiters.pop_front();
  waiting_--;
  return granted;
}

void Admission::forget_if_idle_locked(std::map<AdmitSource, Holder>::iterator it) {
  if (it->second.in_use == 0 && it->second.waiters.empty()) holders_.erase(it);
}

void Admission::release(AdmitPermit permit) {
  if (permit.bytes == 0) return;
  std::vector<Granted> ready;
  {
    std::lock_guard lock(mutex_);
    in_use_ -= std::min(permit.bytes, in_use_);
    auto it = holders_.find(permit.source);
    if (it != holders_.end()) {
      it->second.in_use -= std::min(permit.bytes, it->second.in_use);
      forget_if_idle_locked(it);
    }
    while (auto granted = grant_next_locked()) ready.push_back(std::move(*granted));
    publish_locked();
  }
  for (auto& g : ready) g();
}

void Admission::publish_locked() const {
  if (published_ == nullptr) return;
  published_->admit_in_use_bytes.store(in_use_, std::memory_order_relaxed);
  published_->admit_waiting.store(waiting_, std::memory_order_relaxed);
}

uint64_t Admission::in_use() const {
  std::lock_guard lock(mutex_);
  return in_use_;
}

uint64_t Admission::in_use_by(AdmitSource source) const {
  std::lock_guard lock(mutex_);
  auto it = holders_.find(source);
  return it == holders_.end() ? 0 : it->second.in_use;
}

size_t Admission::waiting() const {
  std::lock_guard lock(mutex_);
  return waiting_;
}

// ---------- disk gate ----------

std::optional<int> DiskGate::measure(uint64_t incoming_bytes) const {
  if (!options_.test_pct_file.empty()) {
    std::ifstream in(options_.test_pct_file);
    std::stringstream ss;
    ss << in.rdbuf();
    std::string text = ss.str();
    int pct = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), pct);
    if (ec != std::errc() || end == text.data()) return std::nullopt;
    return pct;
  }
  struct statvfs st {};
  if (::statvfs(options_.data_dir.c_str(), &st) != 0) return std::nullopt;
  // As df counts it: blocks reserved for root are neither used nor available. What is on its
  // way (bodies admitted, not yet answered) counts as used: it is about to be written.
  uint64_t block = st.f_frsize != 0 ? st.f_frsize : st.f_bsize;
  uint64_t used = (st.f_blocks - st.f_bfree) * block;
  uint64_t usable = used + st.f_bavail * block;
  if (usable == 0) return std::nullopt;
  used = std::min(usable, used + incoming_bytes);
  return static_cast<int>((static_cast<unsigned __int128>(used) * 100 + usable - 1) / usable);
}

void DiskGate::check(uint64_t incoming_bytes) {
  std::optional<int> pct = measure(incoming_bytes);
  if (!pct) return;  // keep the last decision
  last_pct_.store(*pct, std::memory_order_relaxed);
  edge_counters().disk_used_pct.store(*pct, std::memory_order_relaxed);
  if (*pct >= options_.high_pct) {
    full_.store(true, std::memory_order_relaxed);
  } else if (*pct < options_.low_pct) {
    full_.store(false, std::memory_order_relaxed);
  }
  edge_counters().storage_full.store(full(), std::memory_order_relaxed);
}

// ---------- which requests grow storage ----------

namespace {

bool kv_writes(const std::vector<KvOp>& ops) {
  for (const KvOp& op : ops) {
    bool read = op.op == KvOpKind::get || op.op == KvOpKind::get_many ||
                op.op == KvOpKind::get_prefix || op.op == KvOpKind::check || op.op == KvOpKind::del;
    if (!read) return true;
  }
  return false;
}

bool timer_schedules(const std::vector<TimerOp>& ops) {
  for (const TimerOp& op : ops)
    if (op.op != TimerOpKind::cancel) return true;
  return false;
}

// One overload per command kind (std::visit below: a kind without one does not compile).
// Only writes grow storage; a DLQ replay re-pushes a letter already stored, a trace is small
// and bounded per message, and both are left to pass as deletes and acks do.
bool grows(const PushCmd&) {
  return true;
}
bool grows(const KvCmd& c) {
  return kv_writes(c.ops);
}
bool grows(const TimerCmd& c) {
  return timer_schedules(c.ops);
}
bool grows(const TxnCmd& c) {
  for (const TxnOperation& op : c.operations)
    if (!op.is_ack) return true;
  return kv_writes(c.kv) || timer_schedules(c.timers);
}
bool grows(const PopCmd&) {
  return false;
}
bool grows(const AckCmd&) {
  return false;
}
bool grows(const ConfigureCmd&) {
  return false;
}
bool grows(const HealthCmd&) {
  return false;
}
bool grows(const DlqQueryCmd&) {
  return false;
}
bool grows(const LockCmd&) {
  return false;
}
bool grows(const TimerQueryCmd&) {
  return false;
}
bool grows(const LeaseExtendCmd&) {
  return false;
}
bool grows(const GroupListCmd&) {
  return false;
}
bool grows(const GroupDetailsCmd&) {
  return false;
}
bool grows(const GroupDeleteCmd&) {
  return false;
}
bool grows(const SeekCmd&) {
  return false;
}
bool grows(const SubscriptionCmd&) {
  return false;
}
bool grows(const DlqReplayCmd&) {
  return false;
}
bool grows(const QueueListCmd&) {
  return false;
}
bool grows(const QueueGetCmd&) {
  return false;
}
bool grows(const QueueDeleteCmd&) {
  return false;
}
bool grows(const MessageGetCmd&) {
  return false;
}
bool grows(const MessageBrowseCmd&) {
  return false;
}
bool grows(const MetricsCmd&) {
  return false;
}
bool grows(const MessageDeleteCmd&) {
  return false;
}
bool grows(const TraceRecordCmd&) {
  return false;
}
bool grows(const TraceQueryCmd&) {
  return false;
}
bool grows(const MaintenanceCmd&) {
  return false;
}
bool grows(const MembershipCmd&) {
  return false;
}
bool grows(const FetchCmd&) {
  return false;
}
bool grows(const FetchOffsetsCmd&) {
  return false;
}
bool grows(const PartitionsChangedCmd&) {
  return false;
}

}  // namespace

bool grows_storage(const Command& command) {
  return std::visit([](const auto& c) { return grows(c); }, command);
}

}  // namespace queen::server
