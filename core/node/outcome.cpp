#include "core/node/outcome.h"

#include "core/common/bytes.h"

namespace queen {
namespace {

constexpr uint8_t kPushOutcome = 1;
constexpr uint8_t kTxnOutcome = 2;
constexpr uint8_t kKvOutcome = 3;
constexpr uint8_t kLockOutcome = 4;
constexpr uint8_t kTimerOutcome = 5;
constexpr uint8_t kPushRunsOutcome = 6;
// More results than any push body can carry: a count past it is corrupt (runs expand).
constexpr uint32_t kPushResultsMax = 1u << 24;

// One walk over a reply's fields serves both directions: Put writes each field, Get reads it
// back in place. A list's minimum element size (what count() bounds a corrupt count by) is
// the size of its element with every string and list empty. Enums are checked against their
// last value so a corrupt byte fails decoding.
struct Put {
  ByteWriter w;
  void u32(uint32_t& v) { w.u32(v); }
  void u64(uint64_t& v) { w.u64(v); }
  void i64(int64_t& v) { w.i64(v); }
  void flag(bool& v) { w.u8(v ? 1 : 0); }
  void str(std::string& v) { w.str(v); }
  void uuid(Uuid& v) { w.uuid(v); }
  template <class E>
  void enumeration(E& v, E) {
    w.u8(static_cast<uint8_t>(v));
  }
  template <class T, class F>
  void list(std::vector<T>& v, size_t, F each) {
    w.u32(static_cast<uint32_t>(v.size()));
    for (T& x : v) each(*this, x);
  }
};

struct Get {
  ByteReader r;
  void u32(uint32_t& v) { v = r.u32(); }
  void u64(uint64_t& v) { v = r.u64(); }
  void i64(int64_t& v) { v = r.i64(); }
  void flag(bool& v) { v = r.u8() != 0; }
  void str(std::string& v) { v = r.str(); }
  void uuid(Uuid& v) { v = r.uuid(); }
  template <class E>
  void enumeration(E& v, E last) {
    uint8_t b = r.u8();
    if (b > static_cast<uint8_t>(last)) {
      r.invalidate();
      b = 0;
    }
    v = static_cast<E>(b);
  }
  template <class T, class F>
  void list(std::vector<T>& v, size_t min_elem_bytes, F each) {
    uint32_t n = r.count(min_elem_bytes);
    v.resize(n);
    for (T& x : v) each(*this, x);
  }
};

template <class C>
void walk(C& c, std::string& s) {
  c.str(s);
}

template <class C>
void walk(C& c, PushResult& x) {
  c.u32(x.index);
  c.enumeration(x.status, PushStatus::buffered);
  c.uuid(x.message_id);
  c.str(x.transaction_id);
  c.str(x.queue);
  c.str(x.partition);
  c.u64(x.partition_id.value);
  c.u64(x.offset.value);
  c.str(x.error);
}

template <class C>
void walk(C& c, AckResult& x) {
  c.u32(x.index);
  c.str(x.transaction_id);
  c.flag(x.success);
  c.str(x.error);
  c.flag(x.lease_released);
  c.flag(x.dlq);
  c.flag(x.noop);
  c.str(x.queue);
  c.str(x.partition);
}

template <class C>
void walk(C& c, KvRowView& x) {
  c.str(x.key);
  c.str(x.value);
  c.u64(x.version);
  c.i64(x.expires_us);
  c.i64(x.updated_us);
}

template <class C>
void walk(C& c, KvResult& x) {
  c.u32(x.index);
  c.enumeration(x.op, KvOpKind::check);
  c.flag(x.applied);
  c.str(x.reason);
  c.flag(x.found);
  walk(c, x.row);
  c.list(x.rows, 32, [](C& c, KvRowView& row) { walk(c, row); });
  c.list(x.missing, 4, [](C& c, std::string& m) { walk(c, m); });
  c.flag(x.truncated);
  c.str(x.next_after);
}

template <class C>
void walk(C& c, TimerResult& x) {
  c.u32(x.index);
  c.flag(x.ok);
  c.str(x.status);
  c.str(x.queue);
  c.str(x.timer_key);
  c.str(x.txn);
  c.uuid(x.message_id);
  c.i64(x.deliver_at_us);
}

template <class C>
void walk(C& c, LockHolder& x) {
  c.u32(x.slot);
  c.str(x.owner);
  c.u64(x.token);
  c.i64(x.expires_us);
}

template <class C>
void walk(C& c, LockResult& x) {
  c.u32(x.index);
  c.enumeration(x.op, LockOpKind::get);
  c.flag(x.ok);
  c.flag(x.already);
  c.str(x.reason);
  c.str(x.name);
  c.u32(x.slot);
  c.u64(x.token);
  c.str(x.owner);
  c.i64(x.expires_us);
  c.list(x.holders, 24, [](C& c, LockHolder& h) { walk(c, h); });
}

template <class C>
void walk(C& c, TxnResult& x) {
  c.u32(x.index);
  c.enumeration(x.type, TxnResultType::position);
  c.u32(x.op_index);
  c.flag(x.success);
  walk(c, x.ack);
  c.list(x.pushes, 53, [](C& c, PushResult& p) { walk(c, p); });
  walk(c, x.kv);
  walk(c, x.timer);
}

template <class C>
void walk(C& c, TxnReply& x) {
  c.uuid(x.transaction_id);
  c.flag(x.success);
  c.str(x.reason);
  c.str(x.error);
  c.list(x.results, 40, [](C& c, TxnResult& r) { walk(c, r); });
  c.u32(x.failed_index);
  c.str(x.kv_reason);
  walk(c, x.failed_row);
}

template <class C>
void walk(C& c, KvReply& x) {
  c.flag(x.ok);
  c.list(x.results, 40, [](C& c, KvResult& r) { walk(c, r); });
  c.u32(x.failed_index);
  c.str(x.kv_reason);
  walk(c, x.failed_row);
}

template <class C>
void walk(C& c, LockReply& x) {
  c.list(x.results, 40, [](C& c, LockResult& r) { walk(c, r); });
}

template <class C>
void walk(C& c, TimerReply& x) {
  c.list(x.results, 40, [](C& c, TimerResult& r) { walk(c, r); });
}

template <class R>
std::string put_tagged(uint8_t tag, const R& reply) {
  Bytes out;
  Put put{ByteWriter(&out)};
  put.w.u8(tag);
  // The walk takes fields by reference for Get's sake; Put only reads them, so the reply is
  // not copied (every logged transaction, KV, lock and timer answer passes here).
  walk(put, const_cast<R&>(reply));
  return std::string(out.begin(), out.end());
}

template <class R>
std::optional<Reply> get_tagged(ByteReader r) {
  Get get{r};
  R reply;
  walk(get, reply);
  if (!get.r.ok() || get.r.left() != 0) return std::nullopt;
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

// Runs of results that go on from each other (the edge mints one request's message ids in a
// run, and the planner gives its items of one partition offsets in a run): each written as
// its first result and a count, so a push of 100 messages keeps 42 bytes, not 3305.
std::string encode_push(const PushReply& push) {
  Bytes out;
  ByteWriter w(&out);
  w.u8(kPushRunsOutcome);
  w.u32(static_cast<uint32_t>(push.results.size()));
  for (size_t i = 0; i < push.results.size();) {
    const PushResult& r = push.results[i];
    size_t end = i + 1;
    while (end < push.results.size() && continues(push.results[end - 1], push.results[end])) ++end;
    w.u8(static_cast<uint8_t>(r.status));
    w.u32(static_cast<uint32_t>(end - i));
    w.uuid(r.message_id);
    w.u64(r.partition_id.value);
    w.u64(r.offset.value);
    if (r.status == PushStatus::error) w.str(r.error);
    i = end;
  }
  return std::string(out.begin(), out.end());
}

std::optional<PushStatus> read_status(ByteReader& r) {
  uint8_t status = r.u8();
  if (status > static_cast<uint8_t>(PushStatus::buffered)) return std::nullopt;
  return static_cast<PushStatus>(status);
}

// A push answer recorded one result at a time (kPushOutcome, before runs).
std::optional<Reply> decode_push(ByteReader r) {
  PushReply push;
  uint32_t n = r.count(33);
  for (uint32_t i = 0; i < n && r.ok(); ++i) {
    PushResult x;
    x.index = i;
    auto status = read_status(r);
    if (!status) return std::nullopt;
    x.status = *status;
    x.message_id = r.uuid();
    x.partition_id = PartitionId(r.u64());
    x.offset = Offset(r.u64());
    if (x.status == PushStatus::error) x.error = r.str();
    push.results.push_back(std::move(x));
  }
  if (!r.ok() || r.left() != 0) return std::nullopt;
  return Reply{std::move(push)};
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
  PushReply push;
  uint32_t n = r.u32();
  if (n > kPushResultsMax) return std::nullopt;
  while (r.ok() && push.results.size() < n) {
    PushResult first;
    auto status = read_status(r);
    uint32_t count = r.u32();
    if (!status || count == 0 || count > n - push.results.size()) return std::nullopt;
    first.status = *status;
    first.message_id = r.uuid();
    first.partition_id = PartitionId(r.u64());
    first.offset = Offset(r.u64());
    if (first.status == PushStatus::error) first.error = r.str();
    if (!r.ok() || !expand_run(std::move(first), count, &push.results)) return std::nullopt;
  }
  if (!r.ok() || r.left() != 0) return std::nullopt;
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
    case kPushOutcome:
      return decode_push(r);
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
