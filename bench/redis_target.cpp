// The load generator's Redis target (hiredis): the push and in+out scenarios against Redis
// Streams, the durable peer the broker is measured beside (bench/compare.sh starts it with
// appendonly yes and appendfsync always). A queue is one stream; a push round trip is `batch`
// XADDs pipelined on one connection (redis-benchmark -P); a consumer reads with XREADGROUP
// (COUNT pop_batch, BLOCK 1 s) and acks each batch with one XACK on a second connection, as
// the Queen consumer acks asynchronously. Payloads are the same JSON as Queen's.
#include <hiredis/hiredis.h>

#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <thread>

#include "bench/bench_common.h"

namespace queen::bench {
namespace {

constexpr const char* kGroup = "bench";

struct RedisFree {
  void operator()(redisContext* c) const { redisFree(c); }
};
using Connection = std::unique_ptr<redisContext, RedisFree>;

struct ReplyFree {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using Reply = std::unique_ptr<redisReply, ReplyFree>;

Connection connect(const Options& o) {
  Connection c(redisConnect(o.host.c_str(), std::atoi(o.port.c_str())));
  if (!c || c->err) {
    std::fprintf(stderr, "redis %s:%s: %s\n", o.host.c_str(), o.port.c_str(),
                 c ? c->errstr : "cannot allocate a context");
    return nullptr;
  }
  return c;
}

Reply command(redisContext* c, const std::vector<std::string>& args) {
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  for (const std::string& a : args) argv.push_back(a.data()), lens.push_back(a.size());
  return Reply(static_cast<redisReply*>(
      redisCommandArgv(c, static_cast<int>(args.size()), argv.data(), lens.data())));
}

int64_t elapsed_us(Clock::time_point since) {
  return std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - since).count();
}

// One round trip: `count` XADDs appended, then their replies read.
bool push_batch(redisContext* c, const Options& o, const std::string& stream, int count,
                int64_t sent_us) {
  std::string payload;
  append_payload(o, sent_us, &payload);
  const char* argv[] = {"XADD", stream.c_str(), "*", "d", payload.c_str()};
  size_t lens[] = {4, stream.size(), 1, 1, payload.size()};
  for (int i = 0; i < count; ++i) redisAppendCommandArgv(c, 5, argv, lens);
  bool ok = true;
  for (int i = 0; i < count; ++i) {
    void* raw = nullptr;
    if (redisGetReply(c, &raw) != REDIS_OK) return false;
    Reply r(static_cast<redisReply*>(raw));
    ok = ok && r->type != REDIS_REPLY_ERROR;
  }
  return ok;
}

// A consumer's XACKs on their own connection, at most kAcksQueuedMax batches behind.
class Acker {
 public:
  Acker(const Options& o, const std::string& stream, Totals* t)
      : conn_(connect(o)), stream_(stream), totals_(t) {
    thread_ = std::thread([this] { run(); });
  }
  ~Acker() {
    {
      std::lock_guard<std::mutex> g(mu_);
      closed_ = true;
    }
    changed_.notify_all();
    thread_.join();
  }
  void send(std::vector<std::string> ids) {
    std::unique_lock<std::mutex> g(mu_);
    changed_.wait(g, [&] { return queued_.size() < kAcksQueuedMax; });
    queued_.push_back(std::move(ids));
    changed_.notify_all();
  }

 private:
  static constexpr size_t kAcksQueuedMax = 2;
  void run() {
    for (;;) {
      std::vector<std::string> ids;
      {
        std::unique_lock<std::mutex> g(mu_);
        changed_.wait(g, [&] { return closed_ || !queued_.empty(); });
        if (queued_.empty()) return;
        ids = std::move(queued_.front());
        queued_.pop_front();
      }
      changed_.notify_all();
      std::vector<std::string> args = {"XACK", stream_, kGroup};
      args.insert(args.end(), ids.begin(), ids.end());
      auto ts = Clock::now();
      Reply r = conn_ ? command(conn_.get(), args) : nullptr;
      if (!r || r->type == REDIS_REPLY_ERROR) ++totals_->pop_errors;
      totals_->ack_ms.add(elapsed_us(ts));
    }
  }
  Connection conn_;
  std::string stream_;
  Totals* totals_;
  std::mutex mu_;
  std::condition_variable changed_;
  std::deque<std::vector<std::string>> queued_;
  bool closed_ = false;
  std::thread thread_;
};

// The entries of an XREADGROUP reply: [[stream, [[id, [field, value]], ...]]].
void read_entries(const redisReply* r, std::vector<std::string>* ids, Totals* t) {
  if (r->type != REDIS_REPLY_ARRAY || r->elements == 0) return;
  const redisReply* stream = r->element[0];
  if (stream->type != REDIS_REPLY_ARRAY || stream->elements < 2) return;
  const redisReply* entries = stream->element[1];
  int64_t now = now_us();
  for (size_t i = 0; i < entries->elements; ++i) {
    const redisReply* e = entries->element[i];
    if (e->type != REDIS_REPLY_ARRAY || e->elements < 2) continue;
    ids->emplace_back(e->element[0]->str, e->element[0]->len);
    const redisReply* fields = e->element[1];
    if (fields->type == REDIS_REPLY_ARRAY && fields->elements >= 2) {
      const char* ts = std::strstr(fields->element[1]->str, "\"ts\":");
      if (ts != nullptr) t->e2e_ms.add(now - std::atoll(ts + 5));
    }
  }
}

}  // namespace

bool redis_prepare(const Options& o) {
  Connection c = connect(o);
  if (!c) return false;
  for (int q = 0; q < std::max(1, o.queues); ++q) {
    Reply r = command(c.get(), {"XGROUP", "CREATE", queue_name(o, static_cast<uint64_t>(q)), kGroup,
                                "$", "MKSTREAM"});
    if (!r || (r->type == REDIS_REPLY_ERROR && std::strstr(r->str, "BUSYGROUP") == nullptr)) {
      std::fprintf(stderr, "redis: XGROUP CREATE failed: %s\n", r ? r->str : c->errstr);
      return false;
    }
  }
  return true;
}

void redis_producer(const Options& o, int id, Clock::time_point end, Totals* t) {
  Connection c = connect(o);
  if (!c) return;
  double per_conn_rate = o.rate / o.producers / o.batch;  // round trips per second
  auto next = Clock::now();
  uint64_t seq = 0;
  while (Clock::now() < end) {
    auto scheduled = next;
    if (per_conn_rate > 0) {
      std::this_thread::sleep_until(next);  // pacing the open loop, not waiting on a condition
      next += std::chrono::microseconds(static_cast<int64_t>(1e6 / per_conn_rate));
    }
    auto start = per_conn_rate > 0 ? scheduled : Clock::now();
    int64_t late_us = elapsed_us(start);
    std::string stream = queue_name(o, static_cast<uint64_t>(id) * 7919 + seq++);
    if (push_batch(c.get(), o, stream, o.batch, now_us() - late_us)) {
      t->pushed += static_cast<uint64_t>(o.batch);
      t->push_ms.add(elapsed_us(start));
    } else {
      ++t->push_errors;
      if (c->err) c = connect(o);
      if (!c) return;
    }
  }
}

void redis_consumer(const Options& o, int id, Clock::time_point end, Totals* t) {
  Connection c = connect(o);
  if (!c) return;
  std::string stream = queue_name(o, static_cast<uint64_t>(id));
  Acker acker(o, stream, t);
  std::string consumer = "c" + std::to_string(id);
  std::string count = std::to_string(o.pop_batch);
  while (Clock::now() < end) {
    auto start = Clock::now();
    Reply r = command(c.get(), {"XREADGROUP", "GROUP", kGroup, consumer, "COUNT", count, "BLOCK",
                                "1000", "STREAMS", stream, ">"});
    if (!r || r->type == REDIS_REPLY_ERROR) {
      ++t->pop_errors;
      if (!r && c->err) return;
      continue;
    }
    std::vector<std::string> ids;
    read_entries(r.get(), &ids, t);
    if (ids.empty()) continue;
    t->pop_ms.add(elapsed_us(start));
    t->consumed += ids.size();
    ++t->pops;
    acker.send(std::move(ids));
  }
}

}  // namespace queen::bench
