#include "core/node/outcome.h"

#include "core/api/binary.h"
#include "core/api/walk.h"
#include "core/common/bytes.h"

namespace queen {
namespace {

// Tags of the kinds kept. Earlier layouts (1: push results one by one, 4: lock answers
// without their holders' times, 6: push runs before the walk) are no longer read: an answer
// kept under one of them (only within the request-id window) is dropped on load, and a retry
// under its id runs again (pushes stay deduplicated by their transactionId).
constexpr uint8_t kTxnOutcome = 2;
constexpr uint8_t kKvOutcome = 3;
constexpr uint8_t kTimerOutcome = 5;
constexpr uint8_t kLockOutcome = 7;
constexpr uint8_t kPushRunsOutcome = 8;
// More results than any push may carry: a count past it is corrupt (runs expand).
constexpr size_t kPushResultsMax = kPushItemsMax;

// Runs of push results that go on from each other (the edge mints one request's message ids
// in a run, and the planner gives its items of one partition offsets in a run): each kept as
// its first result and a count, so a push of 100 messages keeps about 45 bytes, not 3305.
struct PushRun {
  PushStatus status = PushStatus::queued;
  uint32_t count = 0;
  Uuid message_id;
  PartitionId partition_id;
  Offset offset;
  std::string error;
};

template <class C>
void walk(C& c, PushRun& x) {
  c(x.status, x.count, x.message_id, x.partition_id, x.offset, x.error);
}

template <class R>
std::string put_tagged(uint8_t tag, const R& reply) {
  Bytes out;
  ByteWriter w(&out);
  w.u8(tag);
  put_walked(w, reply);  // the walk of core/api/walk.h, as forwarded replies travel
  return std::string(out.begin(), out.end());
}

template <class R>
std::optional<Reply> get_tagged(ByteReader r) {
  R reply;
  if (!get_walked(r, &reply) || r.left() != 0) return std::nullopt;
  return Reply{std::move(reply)};
}

// Whether `b` goes on the run `a` is the last of: the next message id and offset in the same
// partition, both queued or both duplicates.
bool continues(const PushResult& a, const PushResult& b) {
  Uuid next;
  return b.status == a.status && b.status != PushStatus::error &&
         b.partition_id == a.partition_id && b.offset.value == a.offset.value + 1 &&
         uuid_successor(a.message_id, &next) && next == b.message_id;
}

std::string encode_push(const PushReply& push) {
  std::vector<PushRun> runs;
  for (size_t i = 0; i < push.results.size();) {
    const PushResult& r = push.results[i];
    size_t end = i + 1;
    while (end < push.results.size() && continues(push.results[end - 1], push.results[end])) ++end;
    runs.push_back(PushRun{r.status, static_cast<uint32_t>(end - i), r.message_id, r.partition_id,
                           r.offset, r.error});
    i = end;
  }
  return put_tagged(kPushRunsOutcome, runs);
}

// Appends the `count` results of one run from its first.
bool expand_run(PushResult first, uint32_t count, std::vector<PushResult>* out) {
  for (uint32_t k = 0; k < count; ++k) {
    if (k > 0) {
      Uuid next;
      if (!uuid_successor(first.message_id, &next)) return false;
      first.message_id = next;
      first.offset = first.offset.next();
    }
    first.index = static_cast<uint32_t>(out->size());
    out->push_back(first);
  }
  return true;
}

std::optional<Reply> decode_push_runs(ByteReader r) {
  std::vector<PushRun> runs;
  if (!get_walked(r, &runs) || r.left() != 0) return std::nullopt;
  PushReply push;
  for (PushRun& run : runs) {
    if (run.count == 0 || run.count > kPushResultsMax - push.results.size()) return std::nullopt;
    PushResult first;
    first.status = run.status;
    first.message_id = run.message_id;
    first.partition_id = run.partition_id;
    first.offset = run.offset;
    first.error = std::move(run.error);
    if (!expand_run(std::move(first), run.count, &push.results)) return std::nullopt;
  }
  return Reply{std::move(push)};
}

}  // namespace

std::string encode_outcome(const Reply& reply) {
  if (const auto* push = std::get_if<PushReply>(&reply.body))
    return push->refused ? std::string() : encode_push(*push);
  if (const auto* txn = std::get_if<TxnReply>(&reply.body)) return put_tagged(kTxnOutcome, *txn);
  if (const auto* kv = std::get_if<KvReply>(&reply.body)) return put_tagged(kKvOutcome, *kv);
  if (const auto* lock = std::get_if<LockReply>(&reply.body))
    return put_tagged(kLockOutcome, *lock);
  if (const auto* timer = std::get_if<TimerReply>(&reply.body))
    return put_tagged(kTimerOutcome, *timer);
  return {};
}

std::optional<Reply> decode_outcome(const std::string& bytes) {
  ByteReader r(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  switch (r.u8()) {
    case kPushRunsOutcome:
      return decode_push_runs(r);
    case kTxnOutcome:
      return get_tagged<TxnReply>(r);
    case kKvOutcome:
      return get_tagged<KvReply>(r);
    case kLockOutcome:
      return get_tagged<LockReply>(r);
    case kTimerOutcome:
      return get_tagged<TimerReply>(r);
    default:
      return std::nullopt;
  }
}

void fill_outcome_names(const PushCmd& retried, Reply* reply) {
  auto* push = std::get_if<PushReply>(&reply->body);
  if (!push) return;
  for (PushResult& r : push->results) {
    if (!r.queue.empty() || r.index >= retried.items.size()) continue;
    const PushItem& item = retried.items[r.index];
    // A transactionId the edge minted from the message id follows the recorded message id.
    bool minted = item.transaction_id == uuid_to_string(item.message_id);
    r.transaction_id = minted ? uuid_to_string(r.message_id) : item.transaction_id;
    r.queue = item.queue;
    r.partition = item.partition;
  }
}

}  // namespace queen
