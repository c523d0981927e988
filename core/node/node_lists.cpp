// Whole lists of partitions read a slice at a time: a group's details without a limit, the
// lagging list and a queue's whole detail. A list of millions of partitions would hold the
// node thread for seconds; read config.list_slice_partitions partitions at a time, with the
// node's other events in between (a zero-delay timer), it holds it for milliseconds.
#include "core/node/node_impl.h"

namespace queen {

namespace {

// The partitions one step reads, shared by the lists being read.
size_t slice_budget(const NodeConfig& config) {
  return std::max<size_t>(1, config.list_slice_partitions);
}

}  // namespace

void NodeImpl::answer_list(ListRead& r) {
  Reply reply = std::visit([](auto& l) { return Reply{std::move(l.reply)}; }, r.list);
  send(Parked{r.handle, std::move(reply)});
}

void NodeImpl::start_list(ListRead r) {
  size_t budget = slice_budget(config);
  if (step_list(r, &budget)) return answer_list(r);
  if (list_reads.size() >= config.list_reads_max)
    return send(
        Parked{r.handle, error_reply(api::Errc::overloaded,
                                     "too many whole lists are being read; retry shortly", 1)});
  list_reads.push_back(std::move(r));
}

void NodeImpl::step_lists() {
  int64_t now_ms = env.now_ms();
  size_t budget = slice_budget(config);
  while (!list_reads.empty() && budget > 0) {
    ListRead r = std::move(list_reads.front());
    list_reads.pop_front();
    if (now_ms > r.deadline_ms) {
      send(Parked{r.handle, error_reply(api::Errc::timeout,
                                        "the list was not read before the request's deadline")});
      continue;
    }
    ++stats.list_slices;
    if (!step_list(r, &budget)) {
      list_reads.push_back(std::move(r));  // its turn ends: the next list goes on first
      continue;
    }
    answer_list(r);
  }
}

bool NodeImpl::step_list(ListRead& r, size_t* budget) {
  if (auto* groups = std::get_if<Engine::GroupListing>(&r.list))
    return engine.list_groups(groups, budget);
  return step_queue_listing(std::get<QueueListing>(r.list), budget);
}

bool NodeImpl::step_queue_listing(QueueListing& l, size_t* budget) {
  QueueView& v = l.reply.queues.front();
  const QueueState* q = store.queue(v.name);
  if (!q || q->id != v.id) return true;  // deleted: what was read of it
  auto it = std::lower_bound(q->partitions.begin(), q->partitions.end(), l.from);
  for (; it != q->partitions.end(); ++it) {
    if (*budget == 0) {
      l.from = *it;
      return false;
    }
    --*budget;
    PartitionStatsView ps = reads.partition_stats(*store.partition(*it), l.dead);
    v.messages += ps.total;
    v.pending += ps.pending + ps.processing;
    v.processing += ps.processing;
    v.partitions.push_back(std::move(ps));
  }
  return true;
}

void NodeImpl::fail_lists(const Reply& reply) {
  while (!list_reads.empty()) {
    send(Parked{list_reads.front().handle, reply});
    list_reads.pop_front();
  }
}

bool NodeImpl::drop_list(ReplyHandle h) {
  auto it = std::find_if(list_reads.begin(), list_reads.end(),
                         [&](const ListRead& r) { return r.handle == h; });
  if (it == list_reads.end()) return false;
  list_reads.erase(it);
  return true;
}

}  // namespace queen
