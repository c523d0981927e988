#include "sim/checker.h"

#include <algorithm>

#include "core/state/store.h"
#include "io/sim/describe.h"
#include "io/sim/trace.h"

namespace queen::sim {
namespace {

constexpr const char* kInv1 = "1 answered pushes survive";
constexpr const char* kInv2 = "2 gapless offsets, applied once";
constexpr const char* kInv3 = "3 a transactionId stored once, a request id answered once";
constexpr const char* kInv6T = "6 a transaction is all or nothing";
constexpr const char* kInv4 = "4 delivery order, no redelivery after ack, DLQ exactly once";
constexpr const char* kInv5 = "5 at most one live lease per group and partition";
constexpr const char* kInv6 = "6 a push request is all or nothing";
constexpr const char* kInv7 = "7 answers mean what they say";
constexpr uint32_t kReadPageMax = 1000;
// A request id retried this close to the end of its window may find its record swept.
constexpr int64_t kRequestWindowMarginUs = 10'000'000;
const char* const kGroups[] = {"g1", "__QUEUE_MODE__"};
constexpr const char* kWorkerGroup = "wk";
constexpr const char* kWorkerInput = "qa";
constexpr const char* kWorkerOutput = "wout";
constexpr const char* kWorkerNs = "wk";
constexpr const char* kWorkerTimers = "wtimer";

unsigned long long ull(uint64_t v) {
  return static_cast<unsigned long long>(v);
}

bool refused_valid_request(const Reply& reply) {
  const auto* e = std::get_if<ErrorReply>(&reply.body);
  return e != nullptr && api::is_refusal(e->code);
}

}  // namespace

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
  snap.queues = store.queues().size();
  for (const auto& [pid, p] : store.partitions()) snap.next_offset[pid.value] = p.next_offset.value;
  for (const auto& [key, row] : store.cursors()) {
    snap.cursor_next[{key.group, key.pid.value}] = row.next.value;
  }
  snapshot_ = std::move(snap);
}

void Checker::after_start(int node, const Node& process) {
  ++starts_;
  if (params_.nodes > 1) return;  // checked on the leader at the end
  verify_recovered(process);
  if (!snapshot_) return;
  const Store& store = process.store();
  if (store.queues().size() < snapshot_->queues) {
    fail(kInv1, strf("recovery lost queues: %zu after, %llu before the crash",
                     store.queues().size(), ull(snapshot_->queues)));
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

// ---- the end ----

bool Checker::drained(std::string* why) const {
  const Node* n = world_.node(reference_);
  if (n == nullptr) {
    *why = "the node is down";
    return false;
  }
  const Store& store = n->store();
  for (const auto& [pid, p] : store.partitions()) {
    const QueueState* q = store.queue(p.queue);
    std::string queue = q ? q->name : "";
    if (queue == kWorkerOutput || queue == kWorkerTimers) continue;  // nobody consumes these
    std::vector<const char*> groups(std::begin(kGroups), std::end(kGroups));
    if (queue == kWorkerInput && params_.work.workers > 0) groups.push_back(kWorkerGroup);
    for (const char* group : groups) {
      const CursorRow* row = store.cursor(group, pid);
      uint64_t next = row ? row->next.value : 0;
      if (next < p.next_offset.value) {
        *why = strf("group %s has consumed p%llu (%s) up to %llu of %llu", group, ull(pid.value),
                    p.name.c_str(), ull(next), ull(p.next_offset.value));
        return false;
      }
    }
  }
  return true;
}

void Checker::final_check() {
  if (world_.node(reference_) == nullptr) {
    fail(kInv1, "the node did not come back for the final check");
    return;
  }
  if (!verify_recovered(*world_.node(reference_))) return;
  if (!same_messages_everywhere()) return;
  world_.count("worker_timers_fired", timers_stored_);
  final_dlq();
  final_configured();
}

// Cluster: every node (followers restored from a snapshot too) reads back the same messages
// at the same offsets as the reference node.
bool Checker::same_messages_everywhere() {
  size_t before = world_.violations().size();
  std::map<Uuid, std::pair<PartitionId, Offset>> want;
  final_partitions(*world_.node(reference_), &want);
  for (int i = 0; i < world_.node_count() && world_.violations().size() == before; ++i) {
    const Node* n = world_.node(i);
    if (i == reference_ || n == nullptr) continue;
    std::map<Uuid, std::pair<PartitionId, Offset>> found;
    final_partitions(*n, &found);
    if (world_.violations().size() == before && found != want) {
      world_.violation("2 state machine safety",
                       strf("n%d reads back %zu messages, the leader n%d %zu (or others)", i,
                            found.size(), reference_, want.size()));
    }
  }
  return world_.violations().size() == before;
}

bool Checker::verify_recovered(const Node& n) {
  size_t before = world_.violations().size();
  std::map<Uuid, std::pair<PartitionId, Offset>> found;
  final_partitions(n, &found);
  if (world_.violations().size() == before) final_answered(found);
  if (world_.violations().size() == before) final_atomicity(found);
  if (world_.violations().size() == before) final_dedup(found);
  if (world_.violations().size() == before) final_worker(n, found);
  return world_.violations().size() == before;
}

void Checker::final_partitions(const Node& n,
                               std::map<Uuid, std::pair<PartitionId, Offset>>* found) {
  const Store& store = n.store();
  for (const auto& [pid, p] : store.partitions()) {
    uint64_t expect = 0;
    for (const AppendRow& row : p.rows) {
      if (row.base.value != expect) {
        fail(kInv2, strf("p%llu: append row at %llu after %llu", ull(pid.value),
                         ull(row.base.value), ull(expect)));
      }
      expect = row.end().value;
    }
    if (expect != p.next_offset.value) {
      fail(kInv2, strf("p%llu: rows end at %llu, next_offset %llu", ull(pid.value), ull(expect),
                       ull(p.next_offset.value)));
    }
    uint64_t next = 0;
    while (next < p.next_offset.value) {
      Result<std::vector<PopMessage>> r = n.read_messages(pid, Offset(next), kReadPageMax);
      if (!r.ok() || r.value().empty()) {
        // The store holds an append whose message record cannot be read back: recovery
        // replayed an entry that is not whole on disk (or lost bytes it had synced).
        fail(kInv6,
             strf("p%llu: the recovered store holds @%llu but reading it fails: %s", ull(pid.value),
                  ull(next), r.ok() ? "no messages" : r.error().message.c_str()));
        return;
      }
      for (const PopMessage& m : r.value()) {
        if (m.offset.value != next) {
          fail(kInv2, strf("p%llu: read @%llu where @%llu was expected", ull(pid.value),
                           ull(m.offset.value), ull(next)));
          return;
        }
        auto sit = sent_.find(m.message_id);
        if (sit == sent_.end() || sit->second.payload != m.payload) {
          fail(kInv7, strf("p%llu@%llu holds a message no client sent (or a changed payload)",
                           ull(pid.value), ull(next)));
        }
        if (!found->try_emplace(m.message_id, pid, m.offset).second) {
          fail(kInv2, strf("p%llu@%llu: message %s stored twice", ull(pid.value), ull(next),
                           sit != sent_.end() ? sit->second.txn.c_str() : "?"));
        }
        ++next;
      }
    }
  }
  for (const auto& [key, row] : store.cursors()) {
    const PartitionState* p = store.partition(key.pid);
    if (p == nullptr || row.next > p->next_offset) {
      fail(kInv4, strf("group %s's cursor on p%llu is past the partition's end", key.group.c_str(),
                       ull(key.pid.value)));
    }
  }
}

void Checker::final_answered(const std::map<Uuid, std::pair<PartitionId, Offset>>& found) {
  for (const Answered& a : answered_) {
    auto it = found.find(a.msg_id);
    if (it == found.end() || it->second.first != a.pid || it->second.second != a.offset) {
      const SentItem& s = sent_.at(a.msg_id);
      fail(kInv1, strf("push %s answered 201 at p%llu@%llu is %s after recovery", s.txn.c_str(),
                       ull(a.pid.value), ull(a.offset.value),
                       it == found.end() ? "missing" : "elsewhere"));
      return;
    }
  }
}

void Checker::final_atomicity(const std::map<Uuid, std::pair<PartitionId, Offset>>& found) {
  for (const auto& [id, a] : attempts_) {
    size_t present = 0;
    for (const Uuid& m : a.msg_ids) present += found.count(m);
    if (present != 0 && present != a.msg_ids.size()) {
      std::string queues;
      for (const std::string& q : a.queues) queues += (queues.empty() ? "" : ",") + q;
      fail(kInv6, strf("push request %llu (queues %s, first item %s) has %zu of its %zu items "
                       "after recovery",
                       ull(id), queues.c_str(), sent_.at(a.msg_ids[0]).txn.c_str(), present,
                       a.msg_ids.size()));
      return;
    }
  }
}

void Checker::final_dedup(const std::map<Uuid, std::pair<PartitionId, Offset>>& found) {
  // The run is far shorter than the dedup window (dedupWindowSeconds, default 3600 s): every
  // transactionId must be stored once per partition.
  std::map<std::tuple<std::string, std::string, std::string>, std::pair<PartitionId, Offset>> at;
  for (const auto& [id, where] : found) {
    const SentItem& s = sent_.at(id);
    auto [it, fresh] = at.try_emplace({s.queue, s.partition, s.txn}, where);
    if (!fresh) {
      fail(kInv3,
           strf("%s is stored twice in %s/%s: @%llu and @%llu", s.txn.c_str(), s.queue.c_str(),
                s.partition.c_str(), ull(it->second.second.value), ull(where.second.value)));
      return;
    }
  }
}

void Checker::final_worker(const Node& n,
                           const std::map<Uuid, std::pair<PartitionId, Offset>>& found) {
  if (params_.work.workers == 0) return;
  const Store& store = n.store();
  timers_stored_ = 0;
  std::map<std::string, int> outputs;  // input key → outputs stored
  for (const auto& [id, where] : found) {
    const SentItem& s = sent_.at(id);
    if (s.queue == kWorkerOutput && s.txn.rfind("out-", 0) == 0) ++outputs[s.txn.substr(4)];
  }
  std::set<std::pair<uint64_t, uint64_t>> dlq;  // (pid, offset) moved to the DLQ for "wk"
  for (const auto& [qid, entries] : store.dlq()) {
    for (const DlqEntry& e : entries) {
      if (e.group == kWorkerGroup) dlq.insert({e.pid.value, e.offset.value});
    }
  }
  for (const auto& [id, where] : found) {
    const SentItem& s = sent_.at(id);
    if (s.queue == kWorkerTimers && s.txn.rfind("timer-", 0) == 0 &&
        outputs.count(s.txn.substr(6)) == 0) {
      fail(kInv6T, strf("timer %s fired, but the transaction that scheduled it left no output",
                        s.txn.c_str()));
      return;
    }
    if (s.queue == kWorkerTimers) ++timers_stored_;
  }
  for (const auto& [id, where] : found) {
    const SentItem& s = sent_.at(id);
    if (s.queue != kWorkerInput) continue;
    std::string key = s.queue + "/" + s.partition + "/" + s.txn;
    auto oit = outputs.find(key);
    int outs = oit == outputs.end() ? 0 : oit->second;
    bool marker = store.kv_row({kWorkerNs, key}) != nullptr;
    if (outs > 1) {
      fail(kInv3, strf("input %s has %d outputs", key.c_str(), outs));
      return;
    }
    if ((outs == 1) != marker) {
      fail(kInv6T, strf("input %s: output %s but KV marker %s after recovery", key.c_str(),
                        outs ? "present" : "absent", marker ? "present" : "absent"));
      return;
    }
    const CursorRow* cur = store.cursor(kWorkerGroup, where.first);
    bool consumed = cur != nullptr && cur->next.value > where.second.value;
    if (outs == 0 && consumed && dlq.count({where.first.value, where.second.value}) == 0) {
      fail(kInv6T,
           strf("input %s (p%llu@%llu) is consumed by group %s, not in its DLQ, and has "
                "no output: something acked it without its transaction",
                key.c_str(), ull(where.first.value), ull(where.second.value), kWorkerGroup));
      return;
    }
  }
  for (const auto& [attempt, t] : txn_attempts_) {
    bool present = found.count(t.out_msg) != 0;
    if (t.committed && (!present || store.kv_row({kWorkerNs, t.input_key}) == nullptr)) {
      fail(kInv6T, strf("the transaction for input %s was answered success, but its output is "
                        "%s and its KV marker %s after recovery",
                        t.input_key.c_str(), present ? "present" : "missing",
                        store.kv_row({kWorkerNs, t.input_key}) ? "present" : "missing"));
      return;
    }
    if (t.committed && t.timer_msg && found.count(*t.timer_msg) == 0) {
      bool pending = false;
      for (const auto& [tk, row] : store.timers()) pending |= row.message_id == *t.timer_msg;
      bool dead = false;  // failed fires end in the DLQ under group __timer__
      for (const auto& [qid, entries] : store.dlq()) {
        for (const DlqEntry& e : entries) dead |= e.group == "__timer__";
      }
      if (!pending && !dead) {
        fail(kInv6T, strf("the transaction for input %s committed a timer that neither fired "
                          "nor is pending after recovery",
                          t.input_key.c_str()));
        return;
      }
    }
    if (!t.committed && t.rollback_seq != 0 && t.submits == 1 && present) {
      fail(kInv6T, strf("the transaction for input %s was rolled back, but its output is stored",
                        t.input_key.c_str()));
      return;
    }
  }
}

void Checker::final_dlq() {
  const Store& store = world_.node(reference_)->store();
  std::map<std::tuple<std::string, uint64_t, uint64_t>, int> count;
  for (const auto& [qid, entries] : store.dlq()) {
    for (const DlqEntry& e : entries) ++count[{e.group, e.pid.value, e.offset.value}];
  }
  for (const auto& [key, c] : count) {
    if (c > 1) {
      fail(kInv4, strf("group %s: p%llu@%llu is in the DLQ %d times", std::get<0>(key).c_str(),
                       ull(std::get<1>(key)), ull(std::get<2>(key)), c));
    }
  }
  for (const auto& [key, g] : gps_) {
    for (uint64_t o : g.dlq) {
      if (count.count({key.first, key.second, o}) == 0) {
        fail(kInv4, strf("group %s: p%llu@%llu was answered dlq but is not in the DLQ",
                         key.first.c_str(), ull(key.second), ull(o)));
      }
    }
  }
}

void Checker::final_configured() {
  const Store& store = world_.node(reference_)->store();
  for (const auto& [name, cmd] : configured_) {
    const QueueState* q = store.queue(name);
    QueueOptions want = cmd.patch.apply(QueueOptions{});
    if (q == nullptr || q->options.lease_time_s != want.lease_time_s ||
        q->options.retry_limit != want.retry_limit) {
      fail(kInv7, "queue " + name + ": an answered configure is not in the recovered store");
    }
  }
}

}  // namespace queen::sim
