// The checks at the end of a run (sim/checker.h): every node drained, the same messages
// everywhere, and every invariant over what the run left.
#include "sim/checker.h"

#include <algorithm>

#include "core/state/store.h"
#include "io/sim/describe.h"
#include "io/sim/trace.h"
#include "sim/checker_names.h"

namespace queen::sim {

using namespace checking;  // NOLINT: the invariants' names, shared with the other half

// ---- the end ----

bool Checker::drained(std::string* why) const {
  const Node* n = world_.node(reference_);
  if (n == nullptr) {
    *why = "the node is down";
    return false;
  }
  const Store& store = n->store();
  for (const PartitionState& p : store.partitions()) {
    const QueueState* q = store.queue(p.queue);
    std::string queue = q ? q->name : "";
    // Nobody consumes these; the operator's queue holds its own messages, not the clients'.
    if (queue == kWorkerOutput || queue == kWorkerTimers || queue == kOpsQueue) continue;
    std::vector<const char*> groups(std::begin(kGroups), std::end(kGroups));
    if (queue == kWorkerInput && params_.work.workers > 0) groups.push_back(kWorkerGroup);
    for (const char* group : groups) {
      const CursorRow* row = store.cursor(group, p.id);
      uint64_t next = row ? row->next.value : 0;
      if (next < p.next_offset.value) {
        *why = strf("group %s has consumed p%llu (%s) up to %llu of %llu", group, ull(p.id.value),
                    p.name.str().c_str(), ull(next), ull(p.next_offset.value));
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
  for (const PartitionState& p : store.partitions()) {
    const QueueState* q = store.queue(p.queue);
    if (q != nullptr && q->name == kOpsQueue) continue;  // the operator's own messages
    uint64_t expect = 0;
    for (const AppendRow& row : p.rows) {
      if (row.base.value != expect) {
        fail(kInv2, strf("p%llu: append row at %llu after %llu", ull(p.id.value),
                         ull(row.base.value), ull(expect)));
      }
      expect = row.end().value;
    }
    if (expect != p.next_offset.value) {
      fail(kInv2, strf("p%llu: rows end at %llu, next_offset %llu", ull(p.id.value), ull(expect),
                       ull(p.next_offset.value)));
    }
    uint64_t next = 0;
    while (next < p.next_offset.value) {
      Result<std::vector<PopMessage>> r = n.read_messages(p.id, Offset(next), kReadPageMax);
      if (!r.ok() || r.value().empty()) {
        // The store holds an append whose message record cannot be read back: recovery
        // replayed an entry that is not whole on disk (or lost bytes it had synced).
        fail(kInv6,
             strf("p%llu: the recovered store holds @%llu but reading it fails: %s",
                  ull(p.id.value), ull(next), r.ok() ? "no messages" : r.error().message.c_str()));
        return;
      }
      for (const PopMessage& m : r.value()) {
        if (m.offset.value != next) {
          fail(kInv2, strf("p%llu: read @%llu where @%llu was expected", ull(p.id.value),
                           ull(m.offset.value), ull(next)));
          return;
        }
        auto sit = sent_.find(m.message_id);
        if (sit == sent_.end() || sit->second.payload != m.payload) {
          fail(kInv7, strf("p%llu@%llu holds a message no client sent (or a changed payload)",
                           ull(p.id.value), ull(next)));
        }
        if (!found->try_emplace(m.message_id, p.id, m.offset).second) {
          fail(kInv2, strf("p%llu@%llu: message %s stored twice", ull(p.id.value), ull(next),
                           sit != sent_.end() ? sit->second.txn.c_str() : "?"));
        }
        ++next;
      }
    }
  }
  store.cursors().for_each([&](const std::string& group, PartitionId pid, const CursorRow& row) {
    const PartitionState* p = store.partition(pid);
    if (p == nullptr || row.next > p->next_offset) {
      fail(kInv4, strf("group %s's cursor on p%llu is past the partition's end", group.c_str(),
                       ull(pid.value)));
    }
  });
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
      if (count.count({key.first, key.second, o}) == 0 &&
          dlq_replayed_.count({key.first, key.second, o}) == 0) {
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
