#include "core/node/node.h"

#include <algorithm>
#include <climits>
#include <deque>
#include <map>
#include <set>

#include <xxhash.h>

#include "core/consume/engine.h"
#include "core/kv/kv.h"
#include "core/kv/locks.h"
#include "core/timers/timers.h"
#include "core/planner/planner.h"
#include "core/qlog/log.h"
#include "core/state/store.h"

namespace queen {
namespace {

constexpr TimerId kFlushTimer = 1;
constexpr TimerId kCheckpointTimer = 2;
constexpr TimerId kWakeTimer = 3;
constexpr TimerId kTimerTick = 4;
constexpr TimerId kSweepTimer = 5;
constexpr int64_t kClaimMarginMsMax = 250;

struct Parked {
  ReplyHandle handle = 0;
  Reply reply;
};

struct InFlight {
  Entry entry;
  WrittenEntry written;
  uint32_t syncs_left = 0;
};

// The answer recorded for a request id, so a retry under it gets the first outcome.
struct Outcome {
  uint64_t index = 0;  // the entry that carries it
  Reply reply;
  int64_t at_ms = 0;
};

struct LongPoll {
  ReplyHandle handle = 0;
  PopCmd cmd;
  int64_t stop_at_ms = 0;  // claims stop here: a margin before the caller's deadline
};

Reply error_reply(int status, std::string code, std::string message, int retry_after_s = 0) {
  return Reply{ErrorReply{status, std::move(code), std::move(message), retry_after_s}};
}

}  // namespace

struct NodeImpl {
  NodeImpl(Env& e, NodeConfig c)
      : env(e),
        config(c),
        writer(e, c.segment_bytes),
        planner(e, store),
        engine(e, store, config),
        kv(store),
        locks(kv),
        timers(store) {}

  Env& env;
  NodeConfig config;
  Store store;
  LogWriter writer;
  Planner planner;
  Engine engine;
  KvPlanner kv;
  LockPlanner locks;
  TimerPlanner timers;
  NodeStats stats;
  bool serving = false;
  bool stopped = false;

  OpenEntry open;
  std::deque<Entry> sealed;  // sealed, waiting for room in the pipeline
  std::map<uint64_t, InFlight> inflight;
  std::map<uint64_t, uint64_t> sync_tokens;  // token -> entry index
  uint64_t next_token = 1;
  uint64_t last_sealed = 0;
  uint64_t last_written = 0;
  uint64_t commit = 0;
  int64_t last_entry_now_us = 0;

  std::multimap<uint64_t, Parked> answers;  // sent once the entry at the key commits
  std::vector<Parked> checkpoint_waiters;   // sent after the next checkpoint commits
  std::set<ReplyHandle> cancelled;

  std::map<RequestId, Outcome> outcomes;
  std::deque<std::pair<int64_t, RequestId>> outcome_order;
  RequestId current_request;  // of the command being handled

  std::map<uint64_t, LongPoll> polls;
  std::map<std::string, std::set<uint64_t>> polls_by_queue;
  std::map<ReplyHandle, uint64_t> poll_of_handle;
  std::set<std::pair<int64_t, uint64_t>> poll_deadlines;
  uint64_t poll_seq = 0;

  bool flush_armed = false;
  bool checkpoint_armed = false;
  bool timer_tick_armed = false;
  bool sweep_armed = false;
  int64_t wake_at_ms = INT64_MAX;

  // -------------------------------------------------------------- entries
  void request_flush() {
    if (flush_armed) return;
    flush_armed = true;
    env.set_timer(kFlushTimer, 0);
  }

  void seal() {
    if (open.empty()) return;
    Entry e = std::move(open.entry);
    e.term = Term(1);
    e.now_us = std::max(env.now_us(), std::max(last_entry_now_us, store.last_now_us()) + 1);
    last_entry_now_us = e.now_us;
    last_sealed = e.index.value;
    sealed.push_back(std::move(e));
    open = OpenEntry{};
    open.entry.index = LogIndex(last_sealed + 1);
  }

  void write_sealed() {
    while (!sealed.empty() && inflight.size() < config.pipeline_max) {
      Entry e = std::move(sealed.front());
      sealed.pop_front();
      uint64_t idx = e.index.value;
      InFlight f;
      f.written = writer.write(e);
      f.entry = std::move(e);
      for (LogId log : f.written.touched)
        f.syncs_left += writer.sync(log, [&] {
          sync_tokens[next_token] = idx;
          return next_token++;
        });
      last_written = idx;
      inflight.emplace(idx, std::move(f));
    }
    if (config.mutants.answer_before_fsync) send_answers();
  }

  void on_flush() {
    flush_armed = false;
    if (!open.empty() && inflight.size() + sealed.size() < config.pipeline_max) seal();
    write_sealed();
  }

  void commit_ready() {
    while (!inflight.empty() && inflight.begin()->second.syncs_left == 0) {
      auto node = inflight.extract(inflight.begin());
      InFlight& f = node.mapped();
      store.apply(f.entry, f.written.locations);
      planner.on_applied(f.entry);
      engine.on_applied(f.entry);
      kv.on_applied(f.entry);
      timers.on_applied(f.entry);
      commit = f.entry.index.value;
      ++stats.entries_committed;
    }
    send_answers();
    write_sealed();
    if (!open.empty()) request_flush();
  }

  void send_answers() {
    uint64_t upto = config.mutants.answer_before_fsync ? last_written : commit;
    while (!answers.empty() && answers.begin()->first <= upto) {
      Parked p = std::move(answers.begin()->second);
      answers.erase(answers.begin());
      send(std::move(p));
    }
  }

  void send(Parked p) {
    if (cancelled.erase(p.handle)) {
      if (auto* pop = std::get_if<PopReply>(&p.reply.body)) engine.hand_back(*pop);
      return;
    }
    env.reply(p.handle, std::move(p.reply));
  }

  void park_at(uint64_t index, ReplyHandle h, Reply r) {
    answers.emplace(index, Parked{h, std::move(r)});
  }

  // Parks the answer of a planned command at the entry that carries it, or at the last
  // sealed entry when it planned nothing new (all duplicates, a no-op configure).
  void park_planned(ReplyHandle h, Reply r) {
    uint64_t index = open.empty() ? last_sealed : open.entry.index.value;
    record_outcome(index, r);
    park_at(index, h, std::move(r));
    if (open.empty()) {
      send_answers();
    } else {
      after_plan();
    }
  }

  // -------------------------------------------------------------- request ids
  void expire_outcomes(int64_t now_ms) {
    while (!outcome_order.empty() &&
           (outcome_order.front().first + config.request_id_window_ms <= now_ms ||
            outcome_order.size() > config.request_outcomes_max)) {
      outcomes.erase(outcome_order.front().second);
      outcome_order.pop_front();
    }
  }

  void record_outcome(uint64_t index, const Reply& r) {
    if (current_request.is_nil()) return;
    int64_t now_ms = env.now_ms();
    outcomes[current_request] = Outcome{index, r, now_ms};
    outcome_order.emplace_back(now_ms, current_request);
  }

  // A retry under a request id already planned gets the first outcome, once it commits.
  bool answer_known(ReplyHandle h, const RequestId& id) {
    if (id.is_nil()) return false;
    expire_outcomes(env.now_ms());
    auto it = outcomes.find(id);
    if (it == outcomes.end()) return false;
    park_at(it->second.index, h, it->second.reply);
    send_answers();
    return true;
  }

  void after_plan() {
    if (open.commands >= config.batch_cmds_max || open.bytes >= config.batch_bytes_max) {
      seal();
      write_sealed();
    } else {
      request_flush();
    }
  }

  // -------------------------------------------------------------- checkpoints
  void on_checkpoint() {
    checkpoint_armed = false;
    auto effects = engine.take_checkpoint();
    uint64_t needs = open.empty() ? last_sealed : open.entry.index.value;
    if (!effects.empty()) {
      needs = open.entry.index.value;
      for (auto& e : effects) open.entry.effects.push_back(std::move(e));
      ++open.commands;
      ++stats.checkpoints;
      after_plan();
    }
    for (auto& w : checkpoint_waiters) answers.emplace(needs, std::move(w));
    checkpoint_waiters.clear();
    send_answers();
  }

  void answer_after_checkpoint(ReplyHandle h, Reply r) {
    if (config.consume_fast) {
      send(Parked{h, std::move(r)});
      return;
    }
    checkpoint_waiters.push_back(Parked{h, std::move(r)});
  }

  // -------------------------------------------------------------- pops
  void handle_pop(ReplyHandle h, const CommandEnvelope& env_cmd, const PopCmd& cmd) {
    int64_t now_ms = env.now_ms();
    auto r = engine.pop(cmd, env.now_us());
    if (r.outcome == Engine::PopOutcome::error) {
      send(Parked{h, Reply{r.error}});
      return;
    }
    if (r.outcome == Engine::PopOutcome::delivered) {
      answer_after_checkpoint(h, Reply{std::move(r.reply)});
      return;
    }
    int64_t left_ms = env_cmd.deadline_ms - now_ms;
    int64_t stop_at = env_cmd.deadline_ms - std::min(kClaimMarginMsMax, std::max<int64_t>(0, left_ms / 4));
    stop_at = std::min(stop_at, env_cmd.deadline_ms - config.pop_reply_margin_ms);
    if (!cmd.wait || now_ms >= stop_at || polls.size() >= config.long_poll_waiters_max) {
      send(Parked{h, Reply{std::move(r.reply)}});
      return;
    }
    uint64_t seq = ++poll_seq;
    polls[seq] = LongPoll{h, cmd, stop_at};
    polls_by_queue[cmd.queue].insert(seq);
    poll_of_handle[h] = seq;
    poll_deadlines.insert({stop_at, seq});
  }

  void drop_poll(uint64_t seq) {
    auto it = polls.find(seq);
    if (it == polls.end()) return;
    auto& set = polls_by_queue[it->second.cmd.queue];
    set.erase(seq);
    if (set.empty()) polls_by_queue.erase(it->second.cmd.queue);
    poll_of_handle.erase(it->second.handle);
    poll_deadlines.erase({it->second.stop_at_ms, seq});
    polls.erase(it);
  }

  void serve_polls(const std::string& queue) {
    auto qit = polls_by_queue.find(queue);
    if (qit == polls_by_queue.end()) return;
    std::vector<uint64_t> seqs(qit->second.begin(), qit->second.end());
    for (uint64_t seq : seqs) {
      LongPoll& lp = polls.at(seq);
      auto r = engine.pop(lp.cmd, env.now_us());
      if (r.outcome == Engine::PopOutcome::empty) continue;
      ReplyHandle h = lp.handle;
      drop_poll(seq);
      if (r.outcome == Engine::PopOutcome::error) {
        send(Parked{h, Reply{r.error}});
      } else {
        answer_after_checkpoint(h, Reply{std::move(r.reply)});
      }
    }
  }

  void expire_polls(int64_t now_ms) {
    while (!poll_deadlines.empty() && poll_deadlines.begin()->first <= now_ms) {
      uint64_t seq = poll_deadlines.begin()->second;
      LongPoll lp = polls.at(seq);
      drop_poll(seq);
      PopReply empty;
      empty.queue = lp.cmd.queue;
      empty.group = lp.cmd.group;
      empty.empty_reason = "timeout";
      send(Parked{lp.handle, Reply{std::move(empty)}});
    }
  }

  // -------------------------------------------------------------- after every event
  void after_event() {
    if (stopped || !serving) return;
    int64_t now_us = env.now_us();
    engine.expire(now_us);
    for (QueueId q : engine.take_woken())
      if (const QueueState* qs = store.queue(q)) serve_polls(qs->name);
    expire_polls(now_us / 1000);
    if ((engine.dirty() || !checkpoint_waiters.empty()) && !checkpoint_armed) {
      checkpoint_armed = true;
      env.set_timer(kCheckpointTimer, config.checkpoint_ms);
    }
    if (config.timer_tick_ms > 0 && !timer_tick_armed && !store.timers().empty()) {
      timer_tick_armed = true;
      env.set_timer(kTimerTick, config.timer_tick_ms);
    }
    if (!sweep_armed && !store.kv_expiries().empty()) {
      sweep_armed = true;
      env.set_timer(kSweepTimer, config.kv_sweep_ms);
    }
    int64_t wake = engine.next_expiry_us();
    wake = wake == INT64_MAX ? INT64_MAX : (wake + 999) / 1000;
    if (!poll_deadlines.empty()) wake = std::min(wake, poll_deadlines.begin()->first);
    if (wake != INT64_MAX && wake != wake_at_ms) {
      wake_at_ms = wake;
      env.set_timer(kWakeTimer, std::max<int64_t>(0, wake - now_us / 1000));
    }
  }

  // -------------------------------------------------------------- KV, locks, timers, txns
  void handle_kv(ReplyHandle h, const KvCmd& cmd) {
    KvScratch scratch;
    KvReply r = kv.run(cmd.ops, env.now_us(), &scratch);
    if (!r.ok || scratch.effects.empty()) {
      send(Parked{h, Reply{std::move(r)}});
      return;
    }
    kv.commit(std::move(scratch), &open);
    ++open.commands;
    park_planned(h, Reply{std::move(r)});
  }

  void handle_locks(ReplyHandle h, const LockCmd& cmd) {
    KvScratch scratch;
    LockReply r = locks.run(cmd, env.now_us(), &scratch);
    if (scratch.effects.empty()) {
      send(Parked{h, Reply{std::move(r)}});
      return;
    }
    kv.commit(std::move(scratch), &open);
    ++open.commands;
    park_planned(h, Reply{std::move(r)});
  }

  void handle_timers(ReplyHandle h, const TimerCmd& cmd) {
    TimerScratch scratch;
    TimerReply r = timers.run(cmd.ops, env.now_us(), &scratch);
    timers.commit(std::move(scratch), &open);
    ++open.commands;
    park_planned(h, Reply{std::move(r)});
  }

  void fire_timers() {
    timer_tick_armed = false;
    int64_t now_us = env.now_us();
    auto due = timers.take_due(now_us, open.entry.index.value);
    for (auto& [key, row] : due) {
      PushCmd push;
      push.items.push_back(PushItem{key.first, row.partition, row.txn, row.txn_hash,
                                    row.message_id, row.payload, ""});
      planner.plan_push(push, now_us, &open);
      open.entry.effects.push_back(EffTimerDelete{key.first, key.second});
    }
    if (!due.empty()) after_plan();
  }

  void sweep_kv() {
    sweep_armed = false;
    auto effects = kv.sweep(env.now_us(), open.entry.index.value);
    if (effects.empty()) return;
    for (auto& e : effects) open.entry.effects.push_back(std::move(e));
    ++open.commands;
    after_plan();
  }

  static TxnReply rollback(TxnReply r, std::string reason, std::string error) {
    r.success = false;
    r.reason = std::move(reason);
    r.error = std::move(error);
    r.results.clear();
    return r;
  }

  // Checks every part of the call before changing anything, so a refusal leaves no trace;
  // then plans all of it into the open entry: one entry, all or nothing on disk.
  void handle_txn(ReplyHandle h, const TxnCmd& cmd) {
    int64_t now_us = env.now_us();
    TxnReply reply;
    reply.transaction_id = cmd.transaction_id;
    TxnConsumePlan consume = engine.plan_txn(cmd, now_us);
    if (!consume.ok) return send(Parked{h, Reply{rollback(reply, consume.reason, consume.error)}});
    std::vector<PushItem> items;
    for (const auto& op : cmd.operations)
      if (!op.is_ack) items.insert(items.end(), op.items.begin(), op.items.end());
    if (auto dup = planner.find_duplicate(items, now_us)) {
      std::string e = "QDUP transactionId " + dup->transaction_id + " is already in partition " +
                      dup->partition + " at offset " + std::to_string(dup->offset.value);
      return send(Parked{h, Reply{rollback(reply, "duplicate", e)}});
    }
    KvScratch kv_scratch;
    KvReply kvr = kv.run(cmd.kv, now_us, &kv_scratch);
    if (!kvr.ok) {
      TxnReply r = rollback(reply, "kv_precondition",
                            "QKV precondition " + kvr.kv_reason + " failed at kv[" +
                                std::to_string(kvr.failed_index) + "]");
      r.failed_index = kvr.failed_index;
      r.kv_reason = kvr.kv_reason;
      r.failed_row = kvr.failed_row;
      return send(Parked{h, Reply{std::move(r)}});
    }
    TimerScratch timer_scratch;
    TimerReply tr = timers.run(cmd.timers, now_us, &timer_scratch);
    reply.success = true;
    uint32_t index = 0, ack_no = 0;
    for (uint32_t i = 0; i < cmd.operations.size(); ++i) {
      TxnResult res;
      res.index = index++;
      res.op_index = i;
      if (cmd.operations[i].is_ack) {
        res.type = TxnResultType::ack;
        res.ack = consume.acks.at(ack_no++);
      } else {
        res.type = TxnResultType::push;
        res.pushes = planner.plan_push(PushCmd{cmd.operations[i].items}, now_us, &open).results;
      }
      reply.results.push_back(std::move(res));
    }
    for (auto& k : kvr.results) {
      TxnResult res;
      res.index = index++;
      res.type = TxnResultType::kv;
      res.op_index = k.index;
      res.kv = std::move(k);
      reply.results.push_back(std::move(res));
    }
    for (auto& t : tr.results) {
      TxnResult res;
      res.index = index++;
      res.type = TxnResultType::timer;
      res.op_index = t.index;
      res.success = t.ok;
      res.timer = std::move(t);
      reply.results.push_back(std::move(res));
    }
    for (uint32_t i = 0; i < cmd.positions.size(); ++i) {
      TxnResult res;
      res.index = index++;
      res.type = TxnResultType::position;
      res.op_index = i;
      reply.results.push_back(std::move(res));
    }
    kv.commit(std::move(kv_scratch), &open);
    timers.commit(std::move(timer_scratch), &open);
    for (auto& e : engine.commit_txn(std::move(consume))) open.entry.effects.push_back(std::move(e));
    ++open.commands;
    park_planned(h, Reply{std::move(reply)});
  }

  // -------------------------------------------------------------- administration
  void handle_admin(ReplyHandle h, const Command& c) {
    int64_t now_us = env.now_us();
    if (auto* x = std::get_if<LeaseExtendCmd>(&c)) {
      LeaseExtendReply r = engine.extend(*x, now_us);
      if (r.success) return answer_after_checkpoint(h, Reply{std::move(r)});
      return send(Parked{h, Reply{std::move(r)}});
    }
    if (std::holds_alternative<GroupListCmd>(c))
      return send(Parked{h, Reply{engine.groups("", now_us)}});
    if (auto* x = std::get_if<GroupDetailsCmd>(&c))
      return send(Parked{h, Reply{engine.groups(x->group, now_us)}});
    if (auto* x = std::get_if<GroupDeleteCmd>(&c))
      return answer_after_checkpoint(h, Reply{engine.delete_group(*x)});
    if (auto* x = std::get_if<SeekCmd>(&c)) {
      if (!store.queue(x->queue))
        return send(Parked{h, error_reply(404, "queue_not_found", "no queue " + x->queue)});
      return answer_after_checkpoint(h, Reply{engine.seek(*x)});
    }
    if (auto* x = std::get_if<SubscriptionCmd>(&c))
      return answer_after_checkpoint(h, Reply{engine.update_subscription(*x)});
    if (auto* x = std::get_if<DlqReplayCmd>(&c)) return replay_dlq(h, *x);
    if (auto* x = std::get_if<QueueListCmd>(&c)) return send(Parked{h, Reply{queues(*x, "")}});
    if (auto* x = std::get_if<QueueGetCmd>(&c)) {
      QueuesReply r = queues(QueueListCmd{}, x->queue);
      if (r.queues.empty())
        return send(Parked{h, error_reply(404, "queue_not_found", "no queue " + x->queue)});
      return send(Parked{h, Reply{std::move(r)}});
    }
    if (auto* x = std::get_if<QueueDeleteCmd>(&c)) {
      if (!planner.plan_delete_queue(x->queue, &open))
        return send(Parked{h, error_reply(404, "queue_not_found", "no queue " + x->queue)});
      return park_planned(h, Reply{GroupChangeReply{"", x->queue, 0, true}});
    }
    if (auto* x = std::get_if<MessageGetCmd>(&c)) return send(Parked{h, Reply{message(*x)}});
    if (auto* x = std::get_if<MessageBrowseCmd>(&c)) return send(Parked{h, Reply{browse(*x)}});
  }

  void replay_dlq(ReplyHandle h, const DlqReplayCmd& cmd) {
    DlqReplayReply reply;
    QueueId qid;
    const DlqEntry* d = store.dlq_entry(cmd.dlq_id, &qid);
    if (!d) {
      reply.error = "no dead letter " + std::to_string(cmd.dlq_id);
      return send(Parked{h, Reply{std::move(reply)}});
    }
    auto msgs = read(d->pid, d->offset, 1);
    if (!msgs.ok() || msgs.value().empty()) {
      reply.error = "the dead letter's message is gone";
      return send(Parked{h, Reply{std::move(reply)}});
    }
    const PopMessage& m = msgs.value().front();
    PushItem item;
    item.queue = m.queue;
    item.partition = m.partition;
    item.transaction_id = "dlq:" + std::to_string(cmd.dlq_id);
    XXH128_hash_t hh = XXH3_128bits(item.transaction_id.data(), item.transaction_id.size());
    item.txn_hash = Hash128{hh.low64, hh.high64};
    item.message_id = cmd.message_id;
    item.payload = m.payload;
    reply.push = planner.plan_push(PushCmd{{item}}, env.now_us(), &open).results.at(0);
    open.entry.effects.push_back(EffDlqRemove{qid, cmd.dlq_id});
    reply.success = true;
    park_planned(h, Reply{std::move(reply)});
  }

  QueuesReply queues(const QueueListCmd& filter, const std::string& only) {
    QueuesReply reply;
    for (const auto& [id, q] : store.queues()) {
      if (!only.empty() && q.name != only) continue;
      if (!filter.ns.empty() && q.options.ns != filter.ns) continue;
      if (!filter.task.empty() && q.options.task != filter.task) continue;
      QueueView v;
      v.name = q.name;
      v.id = q.id;
      v.options = q.options;
      v.created_us = q.created_us;
      v.partition_count = static_cast<uint32_t>(q.partitions.size());
      for (const auto& [name, pid] : q.partitions) {
        const PartitionState& p = *store.partition(pid);
        v.messages += p.next_offset.value;
        const CursorRow* row = store.cursor("__QUEUE_MODE__", pid);
        v.pending += p.next_offset.value - (row ? std::min(row->next, p.next_offset).value : 0);
        if (!only.empty()) v.partitions.emplace_back(name, p.next_offset.value);
      }
      if (auto it = store.dlq().find(id); it != store.dlq().end()) v.dlq = it->second.size();
      reply.queues.push_back(std::move(v));
    }
    return reply;
  }

  MessagesReply message(const MessageGetCmd& cmd) {
    MessagesReply reply;
    const PartitionState* p = store.partition(cmd.partition_id);
    if (!p) return reply;
    auto o = p->find_hash(cmd.txn_hash, Offset(0), p->next_offset);
    if (!o) return reply;
    auto msgs = read(p->id, *o, 1);
    if (msgs.ok() && !msgs.value().empty()) {
      reply.found = true;
      reply.messages = std::move(msgs.value());
    }
    return reply;
  }

  // Newest first, across the matching partitions.
  MessagesReply browse(const MessageBrowseCmd& cmd) {
    MessagesReply reply;
    std::vector<std::pair<int64_t, std::pair<PartitionId, Offset>>> found;
    for (const auto& [id, q] : store.queues()) {
      if (!cmd.queue.empty() && q.name != cmd.queue) continue;
      if (!cmd.ns.empty() && q.options.ns != cmd.ns) continue;
      if (!cmd.task.empty() && q.options.task != cmd.task) continue;
      for (const auto& [name, pid] : q.partitions) {
        if (!cmd.partition.empty() && name != cmd.partition) continue;
        const PartitionState& p = *store.partition(pid);
        size_t taken = 0;
        for (auto r = p.rows.rbegin(); r != p.rows.rend() && taken < cmd.limit; ++r) {
          if (cmd.to_us && r->created_us > cmd.to_us) continue;
          if (cmd.from_us && r->created_us < cmd.from_us) break;
          for (uint32_t i = r->count; i-- > 0 && taken < cmd.limit; ++taken)
            found.push_back({r->created_us, {pid, Offset(r->base.value + i)}});
        }
      }
    }
    std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) {
      return a.first != b.first ? a.first > b.first : a.second > b.second;
    });
    if (found.size() > cmd.limit) found.resize(cmd.limit);
    for (const auto& [at, where] : found) {
      auto msgs = read(where.first, where.second, 1);
      if (msgs.ok() && !msgs.value().empty()) reply.messages.push_back(msgs.value().front());
    }
    reply.found = !reply.messages.empty();
    return reply;
  }

  // -------------------------------------------------------------- reads
  Result<std::vector<PopMessage>> read(PartitionId pid, Offset from, uint32_t max) {
    const PartitionState* p = store.partition(pid);
    if (!p) return make_error(Errc::not_found, "no partition " + std::to_string(pid.value));
    std::vector<PopMessage> out;
    const QueueState* q = store.queue(p->queue);
    for (const AppendRow& row : p->rows) {
      if (row.end() <= from) continue;
      if (out.size() >= max) break;
      auto a = read_append(env, row, pid);
      if (!a.ok()) return a.error();
      for (uint32_t i = 0; i < row.count && out.size() < max; ++i) {
        Offset o(row.base.value + i);
        if (o < from) continue;
        const MessageFrame& f = a.value().frames[i];
        out.push_back(PopMessage{q->name, p->name, pid, o, f.transaction_id, f.message_id,
                                 f.trace_id, row.created_us, f.payload, 1, LeaseId{}});
      }
    }
    return out;
  }

  DlqReply dlq(const DlqQueryCmd& cmd) {
    DlqReply reply;
    for (const auto& [qid, list] : store.dlq()) {
      const QueueState* q = store.queue(qid);
      if (!cmd.queue.empty() && q->name != cmd.queue) continue;
      for (const DlqEntry& d : list) {
        if (!cmd.group.empty() && d.group != cmd.group) continue;
        ++reply.total;
        if (reply.records.size() >= cmd.limit) continue;
        DlqRecord rec{d.id, q->name, "", d.pid, d.group, d.offset, {}, {}, d.error,
                      d.retry_count, d.failed_at_us, "null", 0};
        auto msgs = read(d.pid, d.offset, 1);
        if (msgs.ok() && !msgs.value().empty()) {
          const PopMessage& m = msgs.value().front();
          rec.partition = m.partition;
          rec.message_id = m.message_id;
          rec.transaction_id = m.transaction_id;
          rec.payload = m.payload;
          rec.created_us = m.created_us;
        }
        reply.records.push_back(std::move(rec));
      }
    }
    return reply;
  }
};

Node::Node(Env& env, NodeConfig config) : impl_(std::make_unique<NodeImpl>(env, config)) {}
Node::~Node() = default;

Status Node::start(const std::vector<FileInfo>& files) {
  NodeImpl& n = *impl_;
  RecoveryOptions opt;
  opt.replay_partial_entry = n.config.mutants.replay_partial_entry;
  RecoveryStats rs;
  auto st = recover(n.env, files, opt, &n.store, &n.writer, &rs);
  if (!st.ok()) return st;
  n.stats.recovered_entries = rs.entries_replayed;
  n.stats.torn_tails_cut = rs.torn_tails_cut;
  n.commit = n.last_sealed = n.last_written = n.store.applied().value;
  n.open.entry.index = LogIndex(n.commit + 1);
  n.engine.load();
  n.serving = true;
  n.after_event();
  return ok_status();
}

void Node::on_command(ReplyHandle h, CommandEnvelope c) {
  NodeImpl& n = *impl_;
  if (n.stopped || !n.serving) {
    n.env.reply(h, error_reply(503, "retry", "the node is not serving yet", 1));
    return;
  }
  bool logged = std::holds_alternative<PushCmd>(c.command) ||
                std::holds_alternative<ConfigureCmd>(c.command) ||
                std::holds_alternative<KvCmd>(c.command) ||
                std::holds_alternative<LockCmd>(c.command) ||
                std::holds_alternative<TimerCmd>(c.command) ||
                std::holds_alternative<TxnCmd>(c.command) ||
                std::holds_alternative<DlqReplayCmd>(c.command) ||
                std::holds_alternative<QueueDeleteCmd>(c.command);
  if (logged && n.answer_known(h, c.request_id)) {
    n.after_event();
    return;
  }
  n.current_request = logged ? c.request_id : RequestId{};
  if (auto* push = std::get_if<PushCmd>(&c.command)) {
    PushReply r = n.planner.plan_push(*push, n.env.now_us(), &n.open);
    n.park_planned(h, Reply{std::move(r)});
  } else if (auto* cfg = std::get_if<ConfigureCmd>(&c.command)) {
    ConfigureReply r = n.planner.plan_configure(*cfg, &n.open);
    n.park_planned(h, Reply{std::move(r)});
  } else if (auto* pop = std::get_if<PopCmd>(&c.command)) {
    n.handle_pop(h, c, *pop);
  } else if (auto* ack = std::get_if<AckCmd>(&c.command)) {
    bool changed = false;
    AckReply r = n.engine.ack(*ack, n.env.now_us(), &changed);
    bool any_success = std::any_of(r.results.begin(), r.results.end(),
                                   [](const AckResult& a) { return a.success; });
    if (changed || any_success) {
      n.answer_after_checkpoint(h, Reply{std::move(r)});
    } else {
      n.send(Parked{h, Reply{std::move(r)}});
    }
  } else if (std::holds_alternative<HealthCmd>(c.command)) {
    HealthReply r{"leader", 1, n.commit, n.store.applied().value, n.store.queues().size(),
                  n.store.partitions().size()};
    n.env.reply(h, Reply{r});
  } else if (auto* dq = std::get_if<DlqQueryCmd>(&c.command)) {
    n.env.reply(h, Reply{n.dlq(*dq)});
  } else if (auto* kv = std::get_if<KvCmd>(&c.command)) {
    n.handle_kv(h, *kv);
  } else if (auto* lk = std::get_if<LockCmd>(&c.command)) {
    n.handle_locks(h, *lk);
  } else if (auto* tm = std::get_if<TimerCmd>(&c.command)) {
    n.handle_timers(h, *tm);
  } else if (auto* tq = std::get_if<TimerQueryCmd>(&c.command)) {
    n.env.reply(h, Reply{n.timers.query(*tq)});
  } else if (auto* tx = std::get_if<TxnCmd>(&c.command)) {
    n.handle_txn(h, *tx);
  } else {
    n.handle_admin(h, c.command);
  }
  n.after_event();
}

void Node::on_timer(TimerId id) {
  NodeImpl& n = *impl_;
  if (n.stopped || !n.serving) return;
  if (id == kFlushTimer) n.on_flush();
  if (id == kCheckpointTimer) n.on_checkpoint();
  if (id == kWakeTimer) n.wake_at_ms = INT64_MAX;
  if (id == kTimerTick) n.fire_timers();
  if (id == kSweepTimer) n.sweep_kv();
  n.after_event();
}

void Node::on_sync_done(uint64_t token, bool ok) {
  NodeImpl& n = *impl_;
  if (n.stopped) return;
  auto it = n.sync_tokens.find(token);
  QUEEN_ASSERT(it != n.sync_tokens.end(), "completion of an unknown sync");
  uint64_t idx = it->second;
  n.sync_tokens.erase(it);
  if (!ok) {
    n.stopped = true;
    n.env.fatal("fsync failed for entry " + std::to_string(idx) + ": stopping to recover");
    return;
  }
  ++n.stats.syncs;
  auto fit = n.inflight.find(idx);
  QUEEN_ASSERT(fit != n.inflight.end() && fit->second.syncs_left > 0, "sync of no entry");
  --fit->second.syncs_left;
  n.commit_ready();
  n.after_event();
}

void Node::on_cancel(ReplyHandle h) {
  NodeImpl& n = *impl_;
  if (auto it = n.poll_of_handle.find(h); it != n.poll_of_handle.end()) {
    n.drop_poll(it->second);
    return;
  }
  for (const auto& w : n.checkpoint_waiters)
    if (w.handle == h) n.cancelled.insert(h);
  for (const auto& [idx, p] : n.answers)
    if (p.handle == h) n.cancelled.insert(h);
}

const Store& Node::store() const { return impl_->store; }

const NodeStats& Node::stats() const {
  NodeImpl& n = *impl_;
  n.stats.lease_expiries = n.engine.stats().lease_expiries;
  n.stats.redeliveries = n.engine.stats().redeliveries;
  n.stats.dlq_moves = n.engine.stats().dlq_moves;
  return n.stats;
}

bool Node::serving() const { return impl_->serving && !impl_->stopped; }

Result<std::vector<PopMessage>> Node::read_messages(PartitionId pid, Offset from,
                                                    uint32_t max) const {
  return impl_->read(pid, from, max);
}

}  // namespace queen
