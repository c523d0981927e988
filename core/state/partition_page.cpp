#include "core/state/partition_page.h"

#include <algorithm>

namespace queen {

std::vector<const PartitionState*> partition_page(
    const Store& store, const QueueState& q, const PartitionPageArgs& args, uint64_t* matched,
    const std::function<void(const PartitionState&)>& visit) {
  auto by_name = [](const PartitionState* a, const PartitionState* b) { return a->name < b->name; };
  uint64_t keep = args.offset > UINT64_MAX - args.limit ? UINT64_MAX : args.offset + args.limit;
  std::vector<const PartitionState*> heap;  // the smallest names so far, the largest on top
  for (PartitionId pid : q.partitions) {
    const PartitionState* p = store.partition(pid);
    if (visit) visit(*p);
    if (!args.search.empty() && p->name.view().find(args.search) == std::string_view::npos)
      continue;
    ++*matched;
    if (keep == 0) continue;
    if (heap.size() < keep) {
      heap.push_back(p);
      std::push_heap(heap.begin(), heap.end(), by_name);
    } else if (by_name(p, heap.front())) {
      std::pop_heap(heap.begin(), heap.end(), by_name);
      heap.back() = p;
      std::push_heap(heap.begin(), heap.end(), by_name);
    }
  }
  std::sort_heap(heap.begin(), heap.end(), by_name);
  if (heap.size() <= args.offset) return {};
  return {heap.begin() + static_cast<std::ptrdiff_t>(args.offset), heap.end()};
}

}  // namespace queen
