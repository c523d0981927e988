#include "core/timers/timers.h"

namespace queen {

std::optional<TimerRow> TimerPlanner::lookup(const TimerKey& key,
                                             const TimerScratch* scratch) const {
  if (scratch) {
    if (auto it = scratch->writes.find(key); it != scratch->writes.end()) return it->second;
  }
  if (auto it = overlay_.find(key); it != overlay_.end()) return it->second.first;
  auto it = store_.timers().find(key);
  if (it == store_.timers().end()) return std::nullopt;
  return it->second;
}

TimerResult TimerPlanner::run_one(const TimerOp& op, int64_t now_us, TimerScratch* scratch) {
  TimerResult res;
  res.queue = op.queue;
  res.timer_key = op.timer_key;
  res.txn = op.txn;
  res.message_id = op.message_id;
  TimerKey key{op.queue, op.timer_key};
  auto cur = lookup(key, scratch);
  if (op.op == TimerOpKind::cancel) {
    if (!cur || (op.check_txn && cur->txn != op.txn)) {
      res.status = "absent";
      return res;
    }
    res.ok = true;
    res.status = "cancelled";
    res.txn = cur->txn;
    res.message_id = cur->message_id;
    res.deliver_at_us = cur->deliver_at_us;
    scratch->writes[key] = std::nullopt;
    scratch->effects.push_back(EffTimerDelete{op.queue, op.timer_key});
    return res;
  }
  // schedule and reschedule are one upsert: the timer takes the op's time, txn, message and
  // payload, and its attempts start again.
  TimerRow row;
  row.partition = op.partition;
  row.deliver_at_us = now_us + op.delay_ms * 1000;
  row.txn = op.txn;
  row.txn_hash = op.txn_hash;
  row.message_id = op.message_id;
  row.payload = op.payload;
  res.ok = true;
  res.status = cur ? "rescheduled" : "scheduled";
  res.txn = row.txn;
  res.message_id = row.message_id;
  res.deliver_at_us = row.deliver_at_us;
  scratch->writes[key] = row;
  scratch->effects.push_back(EffTimerPut{op.queue, op.timer_key, row});
  return res;
}

TimerReply TimerPlanner::run(const std::vector<TimerOp>& ops, int64_t now_us,
                             TimerScratch* scratch) {
  TimerReply reply;
  for (uint32_t i = 0; i < ops.size(); ++i) {
    TimerResult r = run_one(ops[i], now_us, scratch);
    r.index = i;
    reply.results.push_back(std::move(r));
  }
  return reply;
}

void TimerPlanner::commit(TimerScratch&& scratch, OpenEntry* open) {
  uint64_t idx = open->entry.index.value;
  for (auto& [k, v] : scratch.writes) overlay_[k] = {std::move(v), idx};
  for (auto& e : scratch.effects) open->entry.effects.push_back(std::move(e));
}

void TimerPlanner::on_applied(const Entry& entry) {
  for (auto it = overlay_.begin(); it != overlay_.end();) {
    if (it->second.second <= entry.index.value) {
      it = overlay_.erase(it);
    } else {
      ++it;
    }
  }
}

std::vector<std::pair<TimerKey, TimerRow>> TimerPlanner::take_due(int64_t now_us,
                                                                  uint64_t entry_index) {
  std::vector<std::pair<TimerKey, TimerRow>> out;
  for (const auto& [at, key] : store_.timers_due()) {
    if (at > now_us || out.size() >= kFireBatchMax) break;
    if (overlay_.contains(key)) continue;
    out.emplace_back(key, store_.timers().at(key));
    overlay_[key] = {std::nullopt, entry_index};
  }
  return out;
}

TimerQueryReply TimerPlanner::query(const TimerQueryCmd& cmd) const {
  TimerQueryReply reply;
  auto view = [](const TimerKey& k, const TimerRow& r) {
    return TimerView{k.first, k.second, r.partition, r.txn, r.message_id, r.deliver_at_us,
                     r.attempts, r.payload};
  };
  const auto& timers = store_.timers();
  if (cmd.kind == TimerQueryKind::peek) {
    auto it = timers.find({cmd.queue, cmd.timer_key});
    if (it != timers.end()) {
      reply.found = true;
      reply.timers.push_back(view(it->first, it->second));
      reply.count = 1;
    }
    return reply;
  }
  const std::string& from = cmd.kind == TimerQueryKind::count ? cmd.prefix : cmd.after;
  for (auto it = timers.lower_bound({cmd.queue, from}); it != timers.end(); ++it) {
    if (it->first.first != cmd.queue) break;
    if (cmd.kind == TimerQueryKind::count) {
      if (it->first.second.compare(0, cmd.prefix.size(), cmd.prefix) != 0) break;
      ++reply.count;
      continue;
    }
    if (it->first.second == cmd.after) continue;
    if (reply.timers.size() >= cmd.limit) {
      reply.truncated = true;
      break;
    }
    reply.timers.push_back(view(it->first, it->second));
    ++reply.count;
  }
  return reply;
}

}  // namespace queen
