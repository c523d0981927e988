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

std::string describe(const Command& command) {
  if (const auto* c = std::get_if<PushCmd>(&command)) return describe_push(*c);
  if (const auto* c = std::get_if<PopCmd>(&command)) return describe_pop(*c);
  if (const auto* c = std::get_if<AckCmd>(&command)) return describe_ack(*c);
  if (const auto* c = std::get_if<ConfigureCmd>(&command)) return "configure " + c->queue;
  if (const auto* c = std::get_if<TxnCmd>(&command)) return describe_txn(*c);
  if (std::holds_alternative<HealthCmd>(command)) return "health";
  if (const auto* c = std::get_if<DlqQueryCmd>(&command)) return "dlq-query " + c->queue;
  return strf("command#%zu", command.index());
}

std::string describe(const Reply& reply) {
  const auto& b = reply.body;
  if (const auto* r = std::get_if<ErrorReply>(&b)) {
    return strf("error %d", static_cast<int>(r->code));
  }
  if (const auto* r = std::get_if<PushReply>(&b)) return describe_push_reply(*r);
  if (const auto* r = std::get_if<PopReply>(&b)) return describe_pop_reply(*r);
  if (const auto* r = std::get_if<AckReply>(&b)) return describe_ack_reply(*r);
  if (const auto* r = std::get_if<ConfigureReply>(&b)) {
    return strf("configure-reply %s q%llu", r->queue.c_str(),
                static_cast<unsigned long long>(r->queue_id.value));
  }
  if (const auto* r = std::get_if<TxnReply>(&b)) return describe_txn_reply(*r);
  if (const auto* r = std::get_if<HealthReply>(&b)) return "health-reply " + r->role;
  if (const auto* r = std::get_if<DlqReply>(&b)) return strf("dlq-reply n=%zu", r->records.size());
  return strf("reply#%zu", b.index());
}

}  // namespace queen::sim
