// Pages of a queue's partitions in name order, for the views that list them a page at a time
// (a queue's status, a consumer group's details). A page is chosen in one pass over the queue's
// partitions that keeps only the first offset + limit names met so far, so a page near the
// start of a queue of millions of partitions sorts none but itself.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/state/store.h"

namespace queen {

struct PartitionPageArgs {
  uint64_t offset = 0;
  uint64_t limit = 0;  // 0: an empty page (the caller wants every partition another way)
  std::string search;  // a part of the name; empty: every partition
};

// The partitions of `q` whose names contain `args.search`, by name, from the args.offset-th,
// at most args.limit. *matched counts every partition the search matched. `visit`, when set,
// sees each partition of `q` once, in id order, matched or not.
std::vector<const PartitionState*> partition_page(
    const Store& store, const QueueState& q, const PartitionPageArgs& args, uint64_t* matched,
    const std::function<void(const PartitionState&)>& visit = {});

}  // namespace queen
