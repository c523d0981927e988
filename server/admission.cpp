#include "server/admission.h"

#include <xxhash.h>
#include <nlohmann/json.hpp>

#include <sys/statvfs.h>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <sstream>
#include <vector>

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
    return std::nullopt;
  }
  uint64_t ticket = next_ticket_++;
  holder.waiters.push_back(Waiter{ticket, permit.bytes, std::move(granted)});
  waiting_++;
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
  }
  for (auto& g : ready) g();
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
  if (*pct >= options_.high_pct) {
    full_.store(true, std::memory_order_relaxed);
  } else if (*pct < options_.low_pct) {
    full_.store(false, std::memory_order_relaxed);
  }
}

// ---------- which requests grow storage ----------

namespace {

bool starts_with(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

// `path` is `base` or below it (`base/...`).
bool at_or_below(std::string_view path, std::string_view base) {
  return path == base || (starts_with(path, base) && path[base.size()] == '/');
}

}  // namespace

namespace {

bool kv_writes(const nlohmann::json& ops) {
  if (!ops.is_array()) return !ops.is_null();
  for (const auto& op : ops) {
    std::string kind = op.is_object() ? op.value("op", std::string()) : std::string();
    if (kind != "get" && kind != "getMany" && kind != "getPrefix" && kind != "check" &&
        kind != "delete")
      return true;
  }
  return false;
}

bool timer_schedules(const nlohmann::json& ops) {
  if (!ops.is_array()) return !ops.is_null();
  for (const auto& op : ops)
    if (!op.is_object() || op.value("op", std::string()) != "cancel") return true;
  return false;
}

bool txn_grows(const nlohmann::json& body) {
  const auto& ops = body.contains("operations") ? body["operations"] : nlohmann::json();
  if (!ops.is_null() && !ops.is_array()) return true;
  if (ops.is_array())
    for (const auto& op : ops)
      if (!op.is_object() || op.value("type", std::string()) != "ack") return true;
  return kv_writes(body.value("kv", nlohmann::json())) ||
         timer_schedules(body.value("timers", nlohmann::json()));
}

}  // namespace

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

}  // namespace

bool grows_storage(const Command& command) {
  if (std::holds_alternative<PushCmd>(command)) return true;
  if (const auto* kv = std::get_if<KvCmd>(&command)) return kv_writes(kv->ops);
  if (const auto* timers = std::get_if<TimerCmd>(&command)) return timer_schedules(timers->ops);
  const auto* txn = std::get_if<TxnCmd>(&command);
  if (!txn) return false;
  for (const TxnOperation& op : txn->operations)
    if (!op.is_ack) return true;
  return kv_writes(txn->kv) || timer_schedules(txn->timers);
}

bool grows_storage(std::string_view method, std::string_view target, std::string_view body) {
  std::string_view path = target.substr(0, target.find('?'));
  if (method == "PUT") return at_or_below(path, "/api/v1/kv");
  if (method != "POST") return false;
  if (path == "/api/v1/push") return true;
  bool kv = at_or_below(path, "/api/v1/kv");
  if (!kv && path != "/api/v1/transaction" && path != "/api/v1/timers") return false;
  auto doc = nlohmann::json::parse(body, nullptr, false);
  if (!doc.is_object()) return true;
  if (path == "/api/v1/transaction") return txn_grows(doc);
  const auto& ops = doc.contains("operations") ? doc["operations"] : nlohmann::json();
  return path == "/api/v1/timers" ? timer_schedules(ops) : kv_writes(ops);
}

}  // namespace queen::server
