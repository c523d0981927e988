// The operator: one simulated client that sends the command kinds the producers, consumers
// and workers do not (standalone KV, locks, timers and timer reads, seeks, subscriptions,
// positions moved inside a transaction, group and queue deletes, queue configures, lease
// extends, message gets, traces and deletes, reads of the applied state, maintenance reads,
// DLQ reads and replays), so each meets crashes, leader changes and forwarding. It works on
// objects of its own (KV namespace "ops", locks "ops-lock-N", timers far in the future, group
// "ops-seek", queue "ops-tmp", whose messages the checker leaves aside), except a DLQ replay,
// which pushes a dead letter's message again: the checker learns of it as of a push, and that
// its letter may be gone.
#include <xxhash.h>

#include "core/node/metrics.h"
#include "io/sim/describe.h"
#include "sim/checker_names.h"
#include "sim/workload.h"

namespace queen::sim {

namespace {

constexpr const char* kOpsNs = "ops";
constexpr int64_t kOpsTimeoutMs = 3000;
constexpr int64_t kFarTimerDelayMs = 3'600'000;  // never fires within a run
constexpr int kOpsKeys = 4;

Hash128 txn_hash(const std::string& txn) {
  XXH128_hash_t h = XXH3_128bits(txn.data(), txn.size());
  return Hash128{h.low64, h.high64};
}

// A whole list (read by the node a slice at a time) names each partition once, in id order:
// the first row out of order, or "".
std::string whole_list_fault(const Reply& reply) {
  auto check = [](const auto& rows, auto id_of, const std::string& of) -> std::string {
    for (size_t i = 1; i < rows.size(); ++i)
      if (!(id_of(rows[i - 1]) < id_of(rows[i])))
        return of + ": partition " + std::to_string(id_of(rows[i]).value) + " after " +
               std::to_string(id_of(rows[i - 1]).value);
    return "";
  };
  if (const auto* g = std::get_if<GroupsReply>(&reply.body)) {
    for (const GroupView& v : g->groups) {
      std::string f = check(
          v.partitions, [](const auto& p) { return p.partition_id; }, "group " + v.group);
      if (!f.empty()) return f;
    }
  }
  if (const auto* q = std::get_if<QueuesReply>(&reply.body)) {
    for (const QueueView& v : q->queues) {
      std::string f = check(
          v.partitions, [](const auto& p) { return p.id; }, "queue " + v.name);
      if (!f.empty()) return f;
    }
  }
  return "";
}

}  // namespace

void Workload::operate() {
  if (stopped_ || liveness_) return;  // a replay adds work: none once faults are over
  Rng& rng = ops_rng_;
  ++ops_sent_;
  std::string key = strf("%d", static_cast<int>(rng.below(kOpsKeys)));
  Command cmd;
  switch (rng.below(12)) {
    case 0: {
      KvOp op;
      op.ns = kOpsNs;
      op.key = "k" + key;
      constexpr KvOpKind kOps[] = {KvOpKind::get, KvOpKind::put, KvOpKind::del, KvOpKind::incr};
      op.op = kOps[rng.below(4)];
      if (op.op == KvOpKind::put) {
        op.value = strf("%llu", static_cast<unsigned long long>(ops_sent_));
        op.forever = true;
      }
      if (op.op == KvOpKind::incr) {
        op.key = "n" + key;  // a counter: a put's text is not a number
        op.forever = true;
      }
      cmd = KvCmd{{op}};
      break;
    }
    case 1: {
      LockOp op;
      op.op = rng.per_mille(500) ? LockOpKind::acquire : LockOpKind::release;
      op.name = "ops-lock-" + key;
      op.owner = "ops";
      op.ttl_s = 5;
      cmd = LockCmd{{op}};
      break;
    }
    case 2: {
      TimerOp op;
      op.op = rng.per_mille(500) ? TimerOpKind::schedule : TimerOpKind::cancel;
      op.queue = queue_name(0);
      op.timer_key = "ops-t" + key;
      op.delay_ms = kFarTimerDelayMs;
      op.txn = "ops-timer-" + key;
      op.txn_hash = txn_hash(op.txn);
      op.message_id = mint_id();
      cmd = TimerCmd{{op}};
      break;
    }
    case 3: {
      TimerQueryCmd q;
      q.kind = rng.per_mille(500) ? TimerQueryKind::peek : TimerQueryKind::list;
      q.queue = queue_name(0);
      q.timer_key = "ops-t" + key;
      cmd = q;
      break;
    }
    case 4: {
      SeekCmd s;
      s.group = checking::kOpsGroup;
      s.queue = queue_name(static_cast<int>(rng.below(queues_.size())));
      s.to_end = rng.per_mille(500);
      s.timestamp_us = world_.node_now_us(target_) - rng.range(0, 2'000'000);
      cmd = s;
      break;
    }
    case 5:
      cmd = rng.per_mille(500) ? Command{GroupDeleteCmd{checking::kOpsGroup, "", true}}
                               : Command{LeaseExtendCmd{LeaseId{mint_id()}, 30}};
      break;
    case 6:  // a queue of its own, made and deleted again (it never holds a message)
      cmd = rng.per_mille(500) ? Command{ConfigureCmd{checking::kOpsQueue, {}, false}}
                               : Command{QueueDeleteCmd{checking::kOpsQueue}};
      break;
    case 7:  // a read of the applied state, served by the leader or by any node
      cmd = read_command(key);
      break;
    case 8:
      cmd = message_command(key);
      break;
    case 9:
      cmd = group_command(key);
      break;
    default: {
      DlqQueryCmd q;
      q.queue = queue_name(static_cast<int>(rng.below(2)));  // qa or qb
      q.limit = 5;
      cmd = q;
      break;
    }
  }
  send_op(std::move(cmd));
}

// One of the reads a dashboard or a client makes: listings, details, browsing, fetches by
// offset (any node), metrics and health.
Command Workload::read_command(const std::string& key) {
  Rng& rng = ops_rng_;
  std::string queue = queue_name(static_cast<int>(rng.below(queues_.size())));
  switch (rng.below(11)) {
    case 8: {
      FetchOffsetsCmd f;
      f.entries.push_back(FetchOffsetsEntry{queue, "p" + key});
      return f;
    }
    case 9:
      return MaintenanceCmd{rng.per_mille(500), std::nullopt};  // a read of a switch
    case 10: {
      PartitionsChangedCmd c;
      c.since_us = world_.node_now_us(target_) - rng.range(0, 5'000'000);
      return c;
    }
    case 0:
      return QueueListCmd{};
    case 1:
      return QueueGetCmd{queue};
    case 2: {
      GroupListCmd c;  // the lagging list for the odd-numbered queues (no draw of its own)
      if (queue.back() % 2 == 1) c.lagging_min_s = 0;
      return c;
    }
    case 3:
      return GroupDetailsCmd{checking::kGroups[rng.below(2)]};
    case 4: {
      MessageBrowseCmd b;
      b.queue = queue;
      b.limit = 20;
      return b;
    }
    case 5: {
      FetchCmd f;
      f.entries.push_back(FetchEntry{queue, "p" + key, Offset(rng.below(20)), 4096});
      return f;
    }
    case 6:
      return MetricsCmd{};
    default:
      return HealthCmd{};
  }
}

// The operator's queue holds messages of its own: one is pushed, then read, traced (a logged
// effect) or deleted by its transactionId. The queue may be deleted meanwhile: the answer is
// then "not found".
Command Workload::message_command(const std::string& key) {
  Rng& rng = ops_rng_;
  if (!ops_message_ || rng.per_mille(250)) {
    PushItem item;
    item.queue = checking::kOpsQueue;
    item.partition = "p" + key;
    item.transaction_id = strf("ops-msg-%llu", static_cast<unsigned long long>(ops_sent_));
    item.txn_hash = txn_hash(item.transaction_id);
    item.message_id = mint_id();
    item.payload = "{}";
    PushCmd push;
    push.items.push_back(std::move(item));
    return push;
  }
  auto [pid, txn] = *ops_message_;
  switch (rng.below(4)) {
    case 0:
      return MessageGetCmd{pid, txn, txn_hash(txn)};
    case 1: {
      TraceRecordCmd t;
      t.partition_id = pid;
      t.transaction_id = txn;
      t.txn_hash = txn_hash(txn);
      t.trace_id = mint_id();
      t.names = {"ops"};
      t.data = "{}";
      return t;
    }
    case 2: {
      TraceQueryCmd q;
      q.partition_id = pid;
      q.transaction_id = txn;
      return q;
    }
    default:
      ops_message_.reset();
      return MessageDeleteCmd{pid, txn, txn_hash(txn)};
  }
}

// The operator's group: a subscription from a point in time, or its position in a partition
// moved (or reset) inside a transaction, as a worker commits its progress.
Command Workload::group_command(const std::string& key) {
  Rng& rng = ops_rng_;
  std::string queue = queue_name(static_cast<int>(rng.below(queues_.size())));
  if (rng.per_mille(400)) {
    return SubscriptionCmd{checking::kOpsGroup,
                           world_.node_now_us(target_) - rng.range(0, 2'000'000)};
  }
  TxnCmd t;
  t.transaction_id = mint_id();
  PositionOp op;
  op.queue = queue;
  op.group = checking::kOpsGroup;
  op.partition = "p" + key;
  if (rng.per_mille(800)) op.offset = Offset(rng.below(30));
  t.positions.push_back(std::move(op));
  return t;
}

void Workload::send_op(Command cmd) {
  std::optional<ReplyHandle> h =
      submit(Kind::ops, 0, envelope(std::move(cmd), kOpsTimeoutMs), kOpsTimeoutMs * 1000);
  if (!h) return retry_later(Kind::ops, 0);
  Request& r = requests_.at(*h);
  if (const auto* replay = std::get_if<DlqReplayCmd>(&r.envelope.command)) {
    r.push_attempt = next_attempt_++;
    checker_.push_submitted(r.push_attempt, replay_push_);
    checker_.dlq_replay_submitted(replay_letter_);
  }
}

// A replay of the first letter the DLQ read listed: its message is pushed again (a new
// message id, transactionId "dlq:<id>"), and its letter removed.
void Workload::replay(const DlqRecord& letter) {
  DlqReplayCmd cmd;
  cmd.dlq_id = letter.id;
  cmd.message_id = mint_id();
  PushItem item;
  item.queue = letter.queue;
  item.partition = letter.partition;
  item.payload = letter.payload;
  item.transaction_id = "dlq:" + std::to_string(letter.id);
  item.txn_hash = txn_hash(item.transaction_id);
  item.message_id = cmd.message_id;
  replay_push_ = PushCmd{};
  replay_push_.items.push_back(std::move(item));
  replay_letter_ = letter;
  send_op(std::move(cmd));
}

void Workload::op_answered(const Request& r, const Reply& reply, bool lost) {
  if (std::holds_alternative<PushCmd>(r.envelope.command)) {
    const auto* pr = std::get_if<PushReply>(&reply.body);
    if (!lost && pr != nullptr && pr->results.size() == 1)
      ops_message_ = {pr->results[0].partition_id, pr->results[0].transaction_id};
    return;
  }
  const auto* replay = std::get_if<DlqReplayCmd>(&r.envelope.command);
  if (replay == nullptr) return;
  const PushCmd& cmd = replay_push_;  // the operator sends one request at a time
  const auto* rr = std::get_if<DlqReplayReply>(&reply.body);
  if (rr != nullptr && rr->success) {
    PushReply pushed;
    pushed.results.push_back(rr->push);
    checker_.push_answered(r.push_attempt, cmd, Reply{pushed}, nullptr, lost);
  } else {
    checker_.push_answered(r.push_attempt, cmd, reply, nullptr, /*lost=*/true);
  }
}

void Workload::op_done(const Request& r, const Reply& reply) {
  std::visit(
      [&](const auto& c) {
        using C = std::decay_t<decltype(c)>;
        if (std::holds_alternative<ErrorReply>(reply.body)) return world_.count("ops_errors");
        if constexpr (std::is_same_v<C, GroupDetailsCmd> || std::is_same_v<C, QueueGetCmd> ||
                      std::is_same_v<C, GroupListCmd>) {
          if (std::string f = whole_list_fault(reply); !f.empty())
            world_.violation("whole lists", f);
        }
        if constexpr (std::is_same_v<C, KvCmd>) world_.count("kv_ops");
        if constexpr (std::is_same_v<C, LockCmd>) world_.count("lock_ops");
        if constexpr (std::is_same_v<C, TimerCmd> || std::is_same_v<C, TimerQueryCmd>)
          world_.count("timer_ops");
        if constexpr (std::is_same_v<C, SeekCmd>) world_.count("seeks");
        if constexpr (std::is_same_v<C, GroupDeleteCmd>) world_.count("group_deletes");
        if constexpr (std::is_same_v<C, LeaseExtendCmd>) world_.count("lease_extends");
        if constexpr (std::is_same_v<C, QueueDeleteCmd>) world_.count("queue_deletes");
        if constexpr (std::is_same_v<C, MessageDeleteCmd>) world_.count("message_deletes");
        if constexpr (std::is_same_v<C, TraceRecordCmd> || std::is_same_v<C, TraceQueryCmd>)
          world_.count("traces");
        if constexpr (std::is_same_v<C, SubscriptionCmd>) world_.count("subscriptions");
        if constexpr (std::is_same_v<C, TxnCmd>) world_.count("txn_positions");
        bool read = std::is_same_v<C, QueueListCmd> || std::is_same_v<C, QueueGetCmd> ||
                    std::is_same_v<C, GroupListCmd> || std::is_same_v<C, GroupDetailsCmd> ||
                    std::is_same_v<C, MessageBrowseCmd> || std::is_same_v<C, MessageGetCmd> ||
                    std::is_same_v<C, MaintenanceCmd> || std::is_same_v<C, FetchOffsetsCmd> ||
                    std::is_same_v<C, PartitionsChangedCmd>;
        if (read || command_traits_of::traits(c).any_node) world_.count("reads");
        if constexpr (std::is_same_v<C, DlqReplayCmd>) {
          const auto* rr = std::get_if<DlqReplayReply>(&reply.body);
          if (rr != nullptr && rr->success) world_.count("dlq_replays");
        }
      },
      r.envelope.command);
  const auto* dlq = std::get_if<DlqReply>(&reply.body);
  if (dlq != nullptr && !dlq->records.empty() && ops_rng_.per_mille(700)) {
    world_.count("dlq_reads");
    return replay(dlq->records.front());
  }
  int64_t think_us = ops_rng_.range(10'000, 200'000);
  world_.after(think_us, "ops-next", [this] { operate(); });
}

}  // namespace queen::sim
