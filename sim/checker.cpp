#include "sim/checker.h"

#include <algorithm>

#include "core/state/store.h"
#include "io/sim/describe.h"
#include "io/sim/trace.h"
#include "sim/checker_names.h"

namespace queen::sim {

using namespace checking;  // NOLINT: the invariants' names, shared with the other half

Checker::Checker(SimWorld& world, const RunParams& params) : world_(world), params_(params) {}

void Checker::fail(const char* invariant, std::string detail) {
  world_.violation(invariant, std::move(detail));
}

// ---- pushes ----

void Checker::push_submitted(uint64_t attempt, const PushCmd& cmd) {
  Attempt& a = attempts_[attempt];
  for (const PushItem& it : cmd.items) {
    a.msg_ids.push_back(it.message_id);
    a.queues.insert(it.queue);
    sent_[it.message_id] = SentItem{attempt, it.queue, it.partition, it.transaction_id, it.payload};
  }
}

void Checker::push_answered(uint64_t attempt, const PushCmd& cmd, const Reply& reply,
                            const RequestId* request_id, bool lost) {
  const auto* r = std::get_if<PushReply>(&reply.body);
  if (request_id != nullptr && r != nullptr) check_request_outcome(*request_id, *r);
  if (lost) return;
  if (refused_valid_request(reply)) {
    fail(kInv7, "a valid push was refused: " + describe(reply));
    return;
  }
  if (std::holds_alternative<ErrorReply>(reply.body)) return;  // 503: outcome unknown
  if (r == nullptr || r->results.size() != cmd.items.size()) {
    fail(kInv7,
         strf("push of %zu items answered with %s", cmd.items.size(), describe(reply).c_str()));
    return;
  }
  for (uint32_t i = 0; i < r->results.size(); ++i) {
    check_push_result(attempt, cmd.items[i], r->results[i], i);
  }
  ++pushes_answered_;
}

void Checker::check_request_outcome(const RequestId& rid, const PushReply& r) {
  int64_t now_us = world_.node_now_us(0);
  auto [it, fresh] = first_answer_.try_emplace(rid, FirstAnswer{r, now_us, starts_});
  if (fresh) return;
  const FirstAnswer& first = it->second;
  if (now_us - first.node_clock_us >
      params_.node.request_id_window_ms * 1000 - kRequestWindowMarginUs) {
    return;  // past (or too near the end of) the window: a fresh outcome is allowed
  }
  // Push outcomes are logged with their entry (EffRequestOutcome), so a retry within the
  // window gets the first answer also after a restart or a leader change: no excuse here.
  bool same = first.reply.results.size() == r.results.size();
  for (size_t i = 0; same && i < r.results.size(); ++i) {
    const PushResult& a = first.reply.results[i];
    const PushResult& b = r.results[i];
    same = a.status == b.status && a.message_id == b.message_id &&
           a.partition_id == b.partition_id && a.offset == b.offset;
  }
  if (!same) {
    const PushResult* a = first.reply.results.empty() ? nullptr : &first.reply.results[0];
    const PushResult* b = r.results.empty() ? nullptr : &r.results[0];
    fail(kInv3, strf("request %s retried: first answered (item 0) status=%d p%llu@%llu, now "
                     "status=%d p%llu@%llu",
                     short_id(rid).c_str(), a ? static_cast<int>(a->status) : -1,
                     ull(a ? a->partition_id.value : 0), ull(a ? a->offset.value : 0),
                     b ? static_cast<int>(b->status) : -1, ull(b ? b->partition_id.value : 0),
                     ull(b ? b->offset.value : 0)));
  }
}

void Checker::check_push_result(uint64_t attempt, const PushItem& item, const PushResult& r,
                                uint32_t i) {
  if (r.index != i || r.status == PushStatus::error) {
    fail(kInv7,
         strf("push item %u (%s) answered index=%u status=%d error=%s", i,
              item.transaction_id.c_str(), r.index, static_cast<int>(r.status), r.error.c_str()));
    return;
  }
  if (r.queue != item.queue || r.partition != item.partition ||
      (r.status == PushStatus::queued && r.message_id != item.message_id)) {
    fail(kInv7, strf("push item %u answered for another message (%s/%s)", i, r.queue.c_str(),
                     r.partition.c_str()));
    return;
  }
  if (r.status == PushStatus::duplicate) {
    // The original: a message some client sent with this transactionId to this partition.
    auto sit = sent_.find(r.message_id);
    if (sit == sent_.end() || sit->second.txn != item.transaction_id ||
        sit->second.queue != item.queue || sit->second.partition != item.partition) {
      fail(kInv3, strf("push item %u (%s) answered duplicate naming message %s, which is not "
                       "an original of that transactionId",
                       i, item.transaction_id.c_str(), short_id(r.message_id).c_str()));
      return;
    }
  }
  auto [pit, fresh] = pid_of_.try_emplace({item.queue, item.partition}, r.partition_id.value);
  if (!fresh && pit->second != r.partition_id.value) {
    fail(kInv7, strf("%s/%s answered as partition %llu, earlier as %llu", item.queue.c_str(),
                     item.partition.c_str(), ull(r.partition_id.value), ull(pit->second)));
  }
  auto [tit, tfresh] =
      txn_stored_.try_emplace({item.queue, item.partition, item.transaction_id},
                              Stored{r.message_id, r.partition_id.value, r.offset.value});
  if (!tfresh && (tit->second.msg_id != r.message_id || tit->second.offset != r.offset.value ||
                  tit->second.pid != r.partition_id.value)) {
    fail(kInv3, strf("%s answered %s at p%llu@%llu, but it is stored at p%llu@%llu (as %s)",
                     item.transaction_id.c_str(),
                     r.status == PushStatus::duplicate ? "duplicate" : "queued",
                     ull(r.partition_id.value), ull(r.offset.value), ull(tit->second.pid),
                     ull(tit->second.offset), short_id(tit->second.msg_id).c_str()));
  }
  auto [oit, first] =
      offset_owner_.try_emplace({r.partition_id.value, r.offset.value}, r.message_id);
  if (!first && oit->second != r.message_id) {
    fail(kInv1, strf("p%llu@%llu was answered (or delivered) as %s, and is now answered to %s: "
                     "the first message was lost",
                     ull(r.partition_id.value), ull(r.offset.value),
                     sent_.at(oit->second).txn.c_str(), item.transaction_id.c_str()));
  }
  answered_.push_back(Answered{r.message_id, r.partition_id, r.offset});
}

// ---- pops ----

void Checker::pop_submitted(ReplyHandle h, const PopCmd& cmd, int64_t node_clock_us) {
  pops_[h] = PopInfo{world_.seq(), node_clock_us, cmd.group};
  group_pops_[cmd.group].last_submit_seq = world_.seq();
}

bool Checker::no_pop_since(const std::string& group, uint64_t since_seq) const {
  for (const auto& [h, info] : pops_) {
    if (info.group == group) return false;
  }
  auto it = group_pops_.find(group);
  return it == group_pops_.end() ||
         (it->second.last_submit_seq < since_seq && it->second.last_answer_seq < since_seq);
}

void Checker::pop_answered(ReplyHandle h, const PopCmd& cmd, const Reply& reply,
                           int64_t node_clock_us, bool lost) {
  auto pit = pops_.find(h);
  if (pit == pops_.end()) return;
  PopInfo info = pit->second;
  pops_.erase(pit);
  group_pops_[cmd.group].last_answer_seq = world_.seq();
  if (lost) return;
  if (refused_valid_request(reply)) {
    fail(kInv7, "a valid pop was refused: " + describe(reply));
    return;
  }
  const auto* r = std::get_if<PopReply>(&reply.body);
  if (r == nullptr || r->messages.empty()) return;
  ++pops_answered_;
  if (r->lease_id.is_nil()) fail(kInv7, "a pop delivered messages without a lease");
  std::map<uint64_t, int64_t> last_in_reply;  // pid → last offset in this reply
  for (const PopMessage& m : r->messages) {
    auto [it, fresh] = last_in_reply.try_emplace(m.partition_id.value, -1);
    if (static_cast<int64_t>(m.offset.value) <= it->second) {
      fail(kInv4,
           strf("pop delivered p%llu@%llu after @%lld in one batch", ull(m.partition_id.value),
                ull(m.offset.value), static_cast<long long>(it->second)));
    }
    it->second = static_cast<int64_t>(m.offset.value);
  }
  for (const auto& [pid, last] : last_in_reply) {
    check_new_lease(cmd.group, PartitionId(pid), *r, info, node_clock_us);
  }
  for (const PopMessage& m : r->messages) check_pop_message(cmd, *r, m, info);
}

void Checker::check_pop_message(const PopCmd& cmd, const PopReply& r, const PopMessage& m,
                                const PopInfo& info) {
  auto sit = sent_.find(m.message_id);
  if (sit == sent_.end()) {
    fail(kInv7, strf("pop delivered p%llu@%llu, a message no client sent",
                     ull(m.partition_id.value), ull(m.offset.value)));
    return;
  }
  const SentItem& s = sit->second;
  if (s.queue != cmd.queue || s.payload != m.payload || s.txn != m.transaction_id) {
    fail(kInv7,
         strf("pop of %s delivered p%llu@%llu whose queue, payload or transactionId "
              "differs from what was pushed (%s)",
              cmd.queue.c_str(), ull(m.partition_id.value), ull(m.offset.value), s.txn.c_str()));
  }
  auto [pit, pfresh] = pid_of_.try_emplace({s.queue, s.partition}, m.partition_id.value);
  if (pit->second != m.partition_id.value) {
    fail(kInv7, strf("%s delivered from partition %llu, answered in %llu", s.txn.c_str(),
                     ull(m.partition_id.value), ull(pit->second)));
  }
  auto [oit, ofresh] =
      offset_owner_.try_emplace({m.partition_id.value, m.offset.value}, m.message_id);
  if (oit->second != m.message_id) {
    fail(kInv1, strf("p%llu@%llu delivered %s, but that offset was answered (or delivered) as %s: "
                     "the first message was lost",
                     ull(m.partition_id.value), ull(m.offset.value), s.txn.c_str(),
                     sent_.at(oit->second).txn.c_str()));
    return;
  }
  auto [tit, tfresh] = txn_stored_.try_emplace(
      {s.queue, s.partition, s.txn}, Stored{m.message_id, m.partition_id.value, m.offset.value});
  if (!tfresh && (tit->second.msg_id != m.message_id || tit->second.offset != m.offset.value)) {
    fail(kInv3, strf("%s delivered from p%llu@%llu, but it is stored at p%llu@%llu", s.txn.c_str(),
                     ull(m.partition_id.value), ull(m.offset.value), ull(tit->second.pid),
                     ull(tit->second.offset)));
  }
  GroupPartition& g = gp(cmd.group, m.partition_id);
  uint64_t o = m.offset.value;
  auto st = g.settled_answer_seq.find(o);
  if (st != g.settled_answer_seq.end() && st->second < info.submit_seq) {
    fail(kInv4,
         strf("group %s: p%llu@%llu delivered again after an answered %s", cmd.group.c_str(),
              ull(m.partition_id.value), ull(o), g.dlq.count(o) ? "move to the DLQ" : "ack"));
  }
  if (g.delivered.insert(o).second) {
    if (static_cast<int64_t>(o) < g.max_first_delivered) {
      fail(kInv4,
           strf("group %s: p%llu@%llu first delivered after @%lld", cmd.group.c_str(),
                ull(m.partition_id.value), ull(o), static_cast<long long>(g.max_first_delivered)));
    }
    g.max_first_delivered = std::max(g.max_first_delivered, static_cast<int64_t>(o));
  }
}

void Checker::check_new_lease(const std::string& group, PartitionId pid, const PopReply& r,
                              const PopInfo& info, int64_t node_clock_us) {
  GroupPartition& g = gp(group, pid);
  if (!g.leases.empty()) {
    const Lease& prev = g.leases.back();
    if (prev.id != r.lease_id && node_clock_us < prev.expiry_lower_us &&
        !possibly_released(g, prev, world_.seq())) {
      fail(kInv5, strf("group %s p%llu: lease %s granted while lease %s is live for %lld ms "
                       "more and no ack could have released it",
                       group.c_str(), ull(pid.value), short_id(r.lease_id).c_str(),
                       short_id(prev.id).c_str(),
                       static_cast<long long>((prev.expiry_lower_us - node_clock_us) / 1000)));
    }
  }
  int64_t lease_us = params_.work.lease_time_s * 1'000'000;
  g.leases.push_back(Lease{r.lease_id, info.submit_seq, world_.seq(),
                           info.submit_clock_us + lease_us - lease_slack_us(false),
                           node_clock_us + lease_us + lease_slack_us(true)});
}

int64_t Checker::lease_clock_us(int node) const {
  return params_.nodes > 1 ? world_.now_us() : world_.node_now_us(node);
}

// A cluster's leases are timed by the granting leader's clock and judged on simulated time:
// allow for the clocks' drift over a lease and, at the late end, for a new leader holding a
// lease granted by another node one skew bound past its expiry (plus the clocks' offsets).
int64_t Checker::lease_slack_us(bool late) const {
  if (params_.nodes <= 1) return 0;
  int64_t lease_us = params_.work.lease_time_s * 1'000'000;
  int64_t drift_us = lease_us * kDriftPpmMax / 1'000'000 + 1000;
  return late ? drift_us + 2 * params_.node.max_clock_skew_ms * 1000 : drift_us;
}

bool Checker::possibly_released(const GroupPartition& g, const Lease& l,
                                uint64_t before_seq) const {
  for (const AckRecord& a : g.acks) {
    if (a.submit_seq < before_seq && (a.answer_seq == 0 || a.answer_seq > l.pop_submit_seq)) {
      return true;
    }
  }
  return false;
}

// ---- acks ----

void Checker::ack_submitted(ReplyHandle h, const AckCmd& cmd, const AckContext& ctx) {
  AckInfo& info = acks_[h];
  info.submit_seq = world_.seq();
  info.submit_clock_us = lease_clock_us(0);
  for (const AckItem& it : cmd.items) {
    GpKey key{it.group, it.partition_id.value};
    GroupPartition& g = gps_[key];
    g.acks.push_back(AckRecord{info.submit_seq, 0});
    info.records.push_back({key, g.acks.size() - 1});
    g.ack_submits[it.transaction_id].push_back(info.submit_seq);
  }
}

void Checker::ack_answered(ReplyHandle h, const AckCmd& cmd, const AckContext& ctx,
                           const Reply& reply, bool lost) {
  auto ait = acks_.find(h);
  if (ait == acks_.end()) return;
  AckInfo info = std::move(ait->second);
  acks_.erase(ait);
  for (const auto& [key, idx] : info.records) gps_[key].acks[idx].answer_seq = world_.seq();
  if (lost) return;
  if (refused_valid_request(reply)) {
    fail(kInv7, "a valid ack was refused: " + describe(reply));
    return;
  }
  if (std::holds_alternative<ErrorReply>(reply.body)) return;
  const auto* r = std::get_if<AckReply>(&reply.body);
  if (r == nullptr || r->results.size() != cmd.items.size()) {
    fail(kInv7,
         strf("ack of %zu items answered with %s", cmd.items.size(), describe(reply).c_str()));
    return;
  }
  ++acks_answered_;
  for (size_t i = 0; i < cmd.items.size(); ++i) {
    const AckItem& item = cmd.items[i];
    const AckResult& res = r->results[i];
    check_ack_item(item, res, ctx.offsets[i], ctx.bogus[i], info);
    if (!ctx.repeat || ctx.bogus[i] || !ctx.first_answer_success[i] || res.success) continue;
    if (item.status != AckStatus::completed) continue;
    if (no_pop_since(item.group, ctx.repeat_of_answer_seq)) {
      fail(kInv7,
           strf("a repeat of an ack answered success (%s p%llu) was answered %s",
                item.transaction_id.c_str(), ull(item.partition_id.value), res.error.c_str()));
    }
  }
}

void Checker::check_ack_item(const AckItem& item, const AckResult& res, Offset offset, bool bogus,
                             const AckInfo& info) {
  if (bogus) {
    if (res.success) {
      fail(kInv7,
           strf("an ack of %s, never pushed, was answered success", item.transaction_id.c_str()));
    }
    return;
  }
  if (!res.success) return;
  GroupPartition& g = gp(item.group, item.partition_id);
  uint64_t o = offset.value;
  if (item.status == AckStatus::completed) {
    g.acked.insert(o);
    g.settled_answer_seq.try_emplace(o, world_.seq());
  } else if (item.status == AckStatus::failed && res.dlq) {
    g.dlq.insert(o);
    g.settled_answer_seq.try_emplace(o, world_.seq());
  }
  check_stale_lease_ack(item, res, info);
}

void Checker::check_stale_lease_ack(const AckItem& item, const AckResult& res,
                                    const AckInfo& info) {
  if (!item.lease_id || res.noop) return;
  const GroupPartition& g = gp(item.group, item.partition_id);
  // Another ack of the same message sent before this one was answered (a repeat, a retry, or
  // a concurrent ack by the new holder) may have settled it: then success is the first answer.
  auto sent = g.ack_submits.find(item.transaction_id);
  if (sent != g.ack_submits.end()) {
    for (uint64_t seq : sent->second) {
      if (seq != info.submit_seq && seq < world_.seq()) return;
    }
  }
  size_t i = g.leases.size();
  while (i > 0 && g.leases[i - 1].id != *item.lease_id) --i;
  if (i == 0) return;
  const Lease& held = g.leases[i - 1];
  if (info.submit_clock_us >= held.expiry_upper_us) {
    fail(kInv5, strf("group %s p%llu: ack of %s with lease %s accepted %lld ms after the lease "
                     "had certainly expired",
                     item.group.c_str(), ull(item.partition_id.value), item.transaction_id.c_str(),
                     short_id(held.id).c_str(),
                     static_cast<long long>((info.submit_clock_us - held.expiry_upper_us) / 1000)));
    return;
  }
  for (size_t j = i; j < g.leases.size(); ++j) {
    const Lease& newer = g.leases[j];
    if (newer.id == *item.lease_id || newer.grant_answer_seq >= info.submit_seq) continue;
    fail(kInv5, strf("group %s p%llu: ack of %s with lease %s accepted after lease %s was "
                     "granted on the partition",
                     item.group.c_str(), ull(item.partition_id.value), item.transaction_id.c_str(),
                     short_id(*item.lease_id).c_str(), short_id(newer.id).c_str()));
    return;
  }
}

void Checker::configure_answered(const ConfigureCmd& cmd, const Reply& reply) {
  if (refused_valid_request(reply)) {
    fail(kInv7, "a valid configure was refused: " + describe(reply));
    return;
  }
  if (std::holds_alternative<ConfigureReply>(reply.body)) configured_[cmd.queue] = cmd;
}

// ---- worker transactions ----

void Checker::txn_submitted(ReplyHandle h, uint64_t attempt, const TxnCmd& cmd,
                            const PopMessage& input, bool resend) {
  TxnAttempt& t = txn_attempts_[attempt];
  t.last_submit_seq = world_.seq();
  ++t.submits;
  AckInfo& info = txn_acks_[h];
  info.submit_seq = world_.seq();
  info.submit_clock_us = lease_clock_us(0);
  for (const TxnOperation& op : cmd.operations) {
    if (op.is_ack) {
      GpKey key{op.ack.group, op.ack.partition_id.value};
      GroupPartition& g = gps_[key];
      g.acks.push_back(AckRecord{info.submit_seq, 0});
      info.records.push_back({key, g.acks.size() - 1});
      continue;
    }
    if (resend) continue;
    for (const PushItem& it : op.items) {
      Attempt& a = attempts_[attempt];
      a.msg_ids.push_back(it.message_id);
      a.queues.insert(it.queue);
      sent_[it.message_id] =
          SentItem{attempt, it.queue, it.partition, it.transaction_id, it.payload};
      t.out_msg = it.message_id;
    }
  }
  if (!resend) {
    // A timer's message is pushed when it fires, later: not part of the attempt's atomicity.
    for (const TimerOp& op : cmd.timers) {
      sent_[op.message_id] = SentItem{attempt, op.queue, op.partition, op.txn, op.payload};
      t.timer_msg = op.message_id;
    }
  }
  t.input_key = input.queue + "/" + input.partition + "/" + input.transaction_id;
  t.input_pid = input.partition_id.value;
  t.input_offset = input.offset.value;
}

void Checker::txn_answered(ReplyHandle h, uint64_t attempt, const TxnCmd& cmd, const Reply& reply,
                           const RequestId& request_id, bool lost) {
  auto ait = txn_acks_.find(h);
  if (ait == txn_acks_.end()) return;
  AckInfo info = std::move(ait->second);
  txn_acks_.erase(ait);
  for (const auto& [key, idx] : info.records) gps_[key].acks[idx].answer_seq = world_.seq();
  TxnAttempt& t = txn_attempts_[attempt];
  const auto* r = std::get_if<TxnReply>(&reply.body);
  if (r != nullptr) {
    auto [fit, fresh] = txn_first_answer_.try_emplace(request_id, *r, starts_);
    if (!fresh &&
        (fit->second.first.success != r->success || fit->second.first.reason != r->reason)) {
      if (fit->second.second != starts_ && !fit->second.first.success) {
        // A rollback logs nothing, so its outcome is not kept past a restart or a leader
        // change: a retry is planned afresh. A commit's outcome is logged with its entry.
        world_.count("txn_rollback_replanned");
      } else {
        fail(kInv3, strf("transaction request %s retried: first answered success=%d %s, now "
                         "success=%d %s",
                         short_id(request_id).c_str(), fit->second.first.success,
                         fit->second.first.reason.c_str(), r->success, r->reason.c_str()));
        return;
      }
    }
    if (r->success) {
      t.committed = true;
    } else {
      t.rollback_seq = world_.seq();
    }
  }
  if (lost) return;
  if (refused_valid_request(reply)) {
    fail(kInv7, "a valid transaction was refused: " + describe(reply));
    return;
  }
  if (r == nullptr) return;  // 503: outcome unknown
  if (!r->success) {
    world_.count("txn_rollbacks");
    return;
  }
  world_.count("txn_commits");
  const TxnAck* ack = nullptr;
  const PushItem* out = nullptr;
  for (const TxnOperation& op : cmd.operations) {
    if (op.is_ack) ack = &op.ack;
    if (!op.is_ack && !op.items.empty()) out = &op.items[0];
  }
  const PushResult* pr = nullptr;
  bool ack_ok = false;
  for (const TxnResult& res : r->results) {
    if (res.type == TxnResultType::push && !res.pushes.empty()) pr = &res.pushes[0];
    if (res.type == TxnResultType::ack) ack_ok = res.ack.success;
  }
  if (ack == nullptr || out == nullptr || pr == nullptr || !ack_ok) {
    fail(kInv7, strf("transaction for %s answered success without a successful ack and push "
                     "result: %s",
                     t.input_key.c_str(), describe(reply).c_str()));
    return;
  }
  check_push_result(attempt, *out, *pr, 0);
  // The input is acked for the worker group: it must not be delivered to it again.
  GroupPartition& g = gp(ack->group, ack->partition_id);
  g.settled_answer_seq.try_emplace(t.input_offset, world_.seq());
  g.acked.insert(t.input_offset);
}

// ---- crashes ----

uint64_t Checker::clients_queues(const Store& store) {
  uint64_t n = 0;
  for (const auto& [id, q] : store.queues()) n += q.name != kOpsQueue;
  return n;
}

void Checker::before_crash(int node, const Node& process) {
  // Requests still pending at the crash die with the process: they can no longer apply.
  std::erase_if(pops_, [&](const auto& kv) { return world_.pending_at(kv.first) == node; });
  for (auto& [h, info] : acks_) {
    if (world_.pending_at(h) != node) continue;
    for (const auto& [key, idx] : info.records) {
      if (gps_[key].acks[idx].answer_seq == 0) gps_[key].acks[idx].answer_seq = world_.seq();
    }
  }
  if (params_.nodes > 1) return;  // a follower recovers only up to its persisted commit
  Snapshot snap;
  const Store& store = process.store();
  // The operator's queue and group come and go (deletes, seeks back): not counted.
  snap.queues = clients_queues(store);
  for (const PartitionState& p : store.partitions()) {
    const QueueState* q = store.queue(p.queue);
    if (q != nullptr && q->name == kOpsQueue) continue;
    snap.next_offset[p.id.value] = p.next_offset.value;
  }
  store.cursors().for_each([&](const std::string& group, PartitionId pid, const CursorRow& row) {
    if (group != kOpsGroup) snap.cursor_next[{group, pid.value}] = row.next.value;
  });
  snapshot_ = std::move(snap);
}

void Checker::after_start(int node, const Node& process) {
  ++starts_;
  if (params_.nodes > 1) return;  // checked on the leader at the end
  verify_recovered(process);
  if (!snapshot_) return;
  const Store& store = process.store();
  if (clients_queues(store) < snapshot_->queues) {
    fail(kInv1, strf("recovery lost queues: %llu after, %llu before the crash",
                     ull(clients_queues(store)), ull(snapshot_->queues)));
  }
  for (const auto& [pid, next] : snapshot_->next_offset) {
    const PartitionState* p = store.partition(PartitionId(pid));
    if (p == nullptr || p->next_offset.value < next) {
      fail(kInv1, strf("recovery lost committed messages of p%llu: next_offset %llu, was %llu",
                       ull(pid), ull(p ? p->next_offset.value : 0), ull(next)));
    }
  }
  for (const auto& [key, next] : snapshot_->cursor_next) {
    const CursorRow* row = store.cursor(key.first, PartitionId(key.second));
    if (row == nullptr || row->next.value < next) {
      fail(kInv4,
           strf("recovery moved group %s's cursor on p%llu back to %llu from %llu",
                key.first.c_str(), ull(key.second), ull(row ? row->next.value : 0), ull(next)));
    }
  }
  snapshot_.reset();
}

}  // namespace queen::sim
