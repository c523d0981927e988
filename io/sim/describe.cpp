#include "io/sim/describe.h"

#include "io/sim/trace.h"

namespace queen::sim {
namespace {

const char* ack_status_name(AckStatus s) {
  switch (s) {
    case AckStatus::completed:
      return "completed";
    case AckStatus::failed:
      return "failed";
    case AckStatus::retry:
      return "retry";
    case AckStatus::dlq:
      return "dlq";
  }
  return "?";
}

const char* push_status_name(PushStatus s) {
  switch (s) {
    case PushStatus::queued:
      return "queued";
    case PushStatus::duplicate:
      return "duplicate";
    case PushStatus::error:
      return "error";
    case PushStatus::buffered:
      return "buffered";
  }
  return "?";
}

std::string describe_push(const PushCmd& c) {
  std::string s = strf("push n=%zu [", c.items.size());
  for (size_t i = 0; i < c.items.size(); ++i) {
    const PushItem& it = c.items[i];
    s += strf("%s%s/%s:%s", i ? " " : "", it.queue.c_str(), it.partition.c_str(),
              it.transaction_id.c_str());
  }
  return s + "]";
}

std::string describe_pop(const PopCmd& c) {
  return strf("pop %s%s%s g=%s batch=%u%s", c.queue.c_str(), c.partition ? "/" : "",
              c.partition ? c.partition->c_str() : "", c.group.c_str(), c.batch,
              c.wait ? " wait" : "");
}

std::string describe_ack(const AckCmd& c) {
  std::string s = strf("ack n=%zu [", c.items.size());
  for (size_t i = 0; i < c.items.size(); ++i) {
    const AckItem& it = c.items[i];
    s += strf("%sp%llu:%s:%s:%s:L%s", i ? " " : "",
              static_cast<unsigned long long>(it.partition_id.value), it.group.c_str(),
              it.transaction_id.c_str(), ack_status_name(it.status),
              it.lease_id ? short_id(*it.lease_id).c_str() : "-");
  }
  return s + "]";
}

std::string describe_push_reply(const PushReply& r) {
  std::string s = "push-reply [";
  for (size_t i = 0; i < r.results.size(); ++i) {
    const PushResult& x = r.results[i];
    s += strf("%s%s p%llu@%llu", i ? " " : "", push_status_name(x.status),
              static_cast<unsigned long long>(x.partition_id.value),
              static_cast<unsigned long long>(x.offset.value));
  }
  return s + "]";
}

std::string describe_pop_reply(const PopReply& r) {
  if (r.messages.empty()) return strf("pop-reply 204 %s", r.empty_reason.c_str());
  std::string s = strf("pop-reply 200 g=%s L%s [", r.group.c_str(), short_id(r.lease_id).c_str());
  for (size_t i = 0; i < r.messages.size(); ++i) {
    const PopMessage& m = r.messages[i];
    s +=
        strf("%sp%llu@%llu#%u", i ? " " : "", static_cast<unsigned long long>(m.partition_id.value),
             static_cast<unsigned long long>(m.offset.value), m.delivery_attempt);
  }
  return s + "]";
}

std::string describe_ack_reply(const AckReply& r) {
  std::string s = "ack-reply [";
  for (size_t i = 0; i < r.results.size(); ++i) {
    const AckResult& x = r.results[i];
    s += strf("%s%s%s%s%s%s%s", i ? " " : "", x.success ? "ok" : "fail",
              x.lease_released ? ",released" : "", x.dlq ? ",dlq" : "", x.noop ? ",noop" : "",
              x.error.empty() ? "" : ":", x.error.c_str());
  }
  return s + "]";
}

std::string describe_txn(const TxnCmd& c) {
  std::string s = strf("txn T%s [", short_id(c.transaction_id).c_str());
  bool first = true;
  for (const TxnOperation& op : c.operations) {
    if (op.is_ack) {
      s += strf("%sack p%llu:%s:%s:%s:L%s", first ? "" : " ",
                static_cast<unsigned long long>(op.ack.partition_id.value), op.ack.group.c_str(),
                op.ack.transaction_id.c_str(), ack_status_name(op.ack.status),
                op.ack.lease_id ? short_id(*op.ack.lease_id).c_str() : "-");
    } else {
      for (const PushItem& it : op.items) {
        s += strf("%spush %s/%s:%s", first ? "" : " ", it.queue.c_str(), it.partition.c_str(),
                  it.transaction_id.c_str());
      }
    }
    first = false;
  }
  for (const KvOp& kv : c.kv) {
    s += strf("%skv%d %s/%s", first ? "" : " ", static_cast<int>(kv.op), kv.ns.c_str(),
              kv.key.c_str());
    first = false;
  }
  for (const TimerOp& t : c.timers) {
    s += strf("%stimer%d %s/%s", first ? "" : " ", static_cast<int>(t.op), t.queue.c_str(),
              t.timer_key.c_str());
    first = false;
  }
  return s + "]";
}

std::string describe_txn_reply(const TxnReply& r) {
  if (!r.success) return strf("txn-reply rollback %s %s", r.reason.c_str(), r.error.c_str());
  std::string s = "txn-reply ok [";
  for (size_t i = 0; i < r.results.size(); ++i) {
    const TxnResult& x = r.results[i];
    s += i ? " " : "";
    switch (x.type) {
      case TxnResultType::ack:
        s += strf("ack:%s", x.ack.success ? "ok" : "fail");
        break;
      case TxnResultType::push:
        for (const PushResult& p : x.pushes) {
          s += strf("push:%s p%llu@%llu", push_status_name(p.status),
                    static_cast<unsigned long long>(p.partition_id.value),
                    static_cast<unsigned long long>(p.offset.value));
        }
        break;
      case TxnResultType::kv:
        s += strf("kv:%s", x.kv.applied ? "applied" : "not-applied");
        break;
      case TxnResultType::timer:
        s += "timer";
        break;
      case TxnResultType::position:
        s += "position";
        break;
    }
  }
  return s + "]";
}

}  // namespace

std::string short_id(const Uuid& id) {
  return strf("%02x%02x%02x%02x", id.bytes[12], id.bytes[13], id.bytes[14], id.bytes[15]);
}

namespace {

using ull = unsigned long long;

// One overload per command kind and per reply kind (std::visit below: a kind without one
// does not compile).
std::string of(const PushCmd& c) {
  return describe_push(c);
}
std::string of(const PopCmd& c) {
  return describe_pop(c);
}
std::string of(const AckCmd& c) {
  return describe_ack(c);
}
std::string of(const ConfigureCmd& c) {
  return "configure " + c.queue;
}
std::string of(const TxnCmd& c) {
  return describe_txn(c);
}
std::string of(const HealthCmd&) {
  return "health";
}
std::string of(const DlqQueryCmd& c) {
  return "dlq-query " + c.queue;
}
std::string of(const KvCmd& c) {
  std::string s = strf("kv n=%zu [", c.ops.size());
  for (const KvOp& op : c.ops)
    s += strf(" %d:%s/%s", static_cast<int>(op.op), op.ns.c_str(), op.key.c_str());
  return s + " ]";
}
std::string of(const LockCmd& c) {
  std::string s = strf("locks n=%zu [", c.ops.size());
  for (const LockOp& op : c.ops) s += strf(" %d:%s", static_cast<int>(op.op), op.name.c_str());
  return s + " ]";
}
std::string of(const TimerCmd& c) {
  std::string s = strf("timers n=%zu [", c.ops.size());
  for (const TimerOp& op : c.ops)
    s += strf(" %d:%s/%s", static_cast<int>(op.op), op.queue.c_str(), op.timer_key.c_str());
  return s + " ]";
}
std::string of(const TimerQueryCmd& c) {
  return strf("timer-query %d %s", static_cast<int>(c.kind), c.queue.c_str());
}
std::string of(const LeaseExtendCmd& c) {
  return strf("lease-extend L%s %llds", short_id(c.lease_id).c_str(),
              static_cast<long long>(c.seconds));
}
std::string of(const GroupListCmd& c) {
  return c.lagging_min_s ? "groups lagging" : "groups";
}
std::string of(const GroupDetailsCmd& c) {
  return "group " + c.group;
}
std::string of(const GroupDeleteCmd& c) {
  return "group-delete " + c.group + " " + c.queue;
}
std::string of(const SeekCmd& c) {
  return strf("seek %s %s/%s %s", c.group.c_str(), c.queue.c_str(), c.partition.c_str(),
              c.to_end ? "end" : "time");
}
std::string of(const SubscriptionCmd& c) {
  return "subscription " + c.group;
}
std::string of(const DlqReplayCmd& c) {
  return strf("dlq-replay %llu", static_cast<ull>(c.dlq_id));
}
std::string of(const QueueListCmd&) {
  return "queues";
}
std::string of(const QueueGetCmd& c) {
  return "queue " + c.queue;
}
std::string of(const QueueDeleteCmd& c) {
  return "queue-delete " + c.queue;
}
std::string of(const MessageGetCmd& c) {
  return strf("message p%llu:%s", static_cast<ull>(c.partition_id.value), c.transaction_id.c_str());
}
std::string of(const MessageBrowseCmd& c) {
  return "browse " + c.queue;
}
std::string of(const MetricsCmd&) {
  return "metrics";
}
std::string of(const MessageDeleteCmd& c) {
  return strf("message-delete p%llu:%s", static_cast<ull>(c.partition_id.value),
              c.transaction_id.c_str());
}
std::string of(const TraceRecordCmd& c) {
  return strf("trace p%llu:%s", static_cast<ull>(c.partition_id.value), c.transaction_id.c_str());
}
std::string of(const TraceQueryCmd& c) {
  return strf("trace-query %d", static_cast<int>(c.kind));
}
std::string of(const MaintenanceCmd& c) {
  return strf("maintenance %s %d", c.pop ? "pop" : "push", c.enabled ? int(*c.enabled) : -1);
}
std::string of(const MembershipCmd& c) {
  std::string ids;
  for (NodeId id : c.ids) ids += strf(" %llu", static_cast<unsigned long long>(id.value));
  return strf("membership op=%d id=%llu ids=[%s ]", int(c.op),
              static_cast<unsigned long long>(c.id.value), ids.c_str());
}
std::string of(const FetchCmd& c) {
  return strf("fetch n=%zu", c.entries.size());
}
std::string of(const FetchOffsetsCmd& c) {
  return strf("fetch-offsets n=%zu", c.entries.size());
}
std::string of(const PartitionsChangedCmd& c) {
  return "partitions-changed " + c.queue;
}

std::string of(const ErrorReply& r) {
  return strf("error %d %s", static_cast<int>(r.code), r.message.c_str());
}
std::string of(const PushReply& r) {
  return describe_push_reply(r);
}
std::string of(const PopReply& r) {
  return describe_pop_reply(r);
}
std::string of(const AckReply& r) {
  return describe_ack_reply(r);
}
std::string of(const ConfigureReply& r) {
  return strf("configure-reply %s q%llu", r.queue.c_str(), static_cast<ull>(r.queue_id.value));
}
std::string of(const TxnReply& r) {
  return describe_txn_reply(r);
}
std::string of(const HealthReply& r) {
  return "health-reply " + r.role;
}
std::string of(const DlqReply& r) {
  return strf("dlq-reply n=%zu", r.records.size());
}
std::string of(const KvReply& r) {
  return strf("kv-reply %s n=%zu", r.ok ? "ok" : r.kv_reason.c_str(), r.results.size());
}
std::string of(const LockReply& r) {
  std::string s = "locks-reply [";
  for (const LockResult& x : r.results) s += strf(" %s:%d", x.name.c_str(), x.ok ? 1 : 0);
  return s + " ]";
}
std::string of(const TimerReply& r) {
  std::string s = "timers-reply [";
  for (const TimerResult& x : r.results) s += " " + x.status;
  return s + " ]";
}
std::string of(const TimerQueryReply& r) {
  return strf("timer-query-reply n=%zu count=%llu", r.timers.size(), static_cast<ull>(r.count));
}
std::string of(const LeaseExtendReply& r) {
  return strf("lease-extend-reply %d", r.success ? 1 : 0);
}
std::string of(const GroupsReply& r) {
  return strf("groups-reply n=%zu", r.groups.size());
}
std::string of(const GroupChangeReply& r) {
  return strf("group-change-reply %s %s n=%llu", r.group.c_str(), r.queue.c_str(),
              static_cast<ull>(r.partitions));
}
std::string of(const DlqReplayReply& r) {
  return strf("dlq-replay-reply %d %s", r.success ? 1 : 0, r.error.c_str());
}
std::string of(const QueuesReply& r) {
  return strf("queues-reply n=%zu", r.queues.size());
}
std::string of(const MessagesReply& r) {
  return strf("messages-reply n=%zu", r.messages.size());
}
std::string of(const MetricsReply&) {
  return "metrics-reply";
}
std::string of(const MessageDeleteReply& r) {
  return strf("message-delete-reply %d", r.deleted ? 1 : 0);
}
std::string of(const TraceReply& r) {
  return strf("trace-reply n=%zu names=%zu", r.traces.size(), r.names.size());
}
std::string of(const MaintenanceReply& r) {
  return strf("maintenance-reply push=%d pop=%d", r.push ? 1 : 0, r.pop ? 1 : 0);
}
std::string of(const MembershipReply& r) {
  std::string members;
  for (const MemberView& m : r.members)
    members += strf(" %llu%s", static_cast<unsigned long long>(m.id.value), m.voter ? "v" : "l");
  return strf("membership-reply code=%s index=%llu committed=%d [%s ]", r.code.c_str(),
              static_cast<unsigned long long>(r.index), r.committed ? 1 : 0, members.c_str());
}
std::string of(const FetchReply& r) {
  return strf("fetch-reply n=%zu", r.entries.size());
}
std::string of(const FetchOffsetsReply& r) {
  return strf("fetch-offsets-reply n=%zu", r.entries.size());
}
std::string of(const PartitionsChangedReply& r) {
  return strf("partitions-changed-reply n=%zu", r.partitions.size());
}

}  // namespace

std::string describe(const Command& command) {
  return std::visit([](const auto& c) { return of(c); }, command);
}

std::string describe(const Reply& reply) {
  return std::visit([](const auto& r) { return of(r); }, reply.body);
}

}  // namespace queen::sim
