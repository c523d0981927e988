// queen-bench: the load generator. Keep-alive HTTP connections against one node; producers
// push batches (one partition per push), consumers pop and ack (asynchronously, on a second
// connection), or commit transactions. --target redis runs the same scenarios against Redis
// Streams instead (bench/redis_target.cpp).
// Open loop (--rate > 0): each connection sends on a fixed schedule and latency counts from
// the scheduled instant, so queueing shows. Closed loop (--rate 0): as fast as answers come.
// Prints one JSON result line (for bench/results.jsonl) and a human summary.
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <utility>  // before Boost 1.74 Asio, which uses std::exchange
#include <vector>

#include <boost/asio.hpp>
#include <boost/beast.hpp>
#include <nlohmann/json.hpp>

#include "bench/bench_common.h"

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using json = nlohmann::json;

using namespace queen::bench;

namespace {

// The node connection number `n` talks to.
std::pair<std::string, std::string> endpoint(const Options& o, int n) {
  if (o.hosts.empty()) return {o.host, o.port};
  return o.hosts[static_cast<size_t>(n) % o.hosts.size()];
}

class Client {
 public:
  // Beast reads at most the buffer's free space and grows it 512 bytes at a time: with room
  // for a whole answer up front, a 20 KB push answer takes one read, not forty.
  Client(const Options& o, int n) : host_(endpoint(o, n)), stream_(ioc_) {
    buffer_.reserve(kReadBufferBytes);
    connect();
  }
  // Returns the status, or 0 on a transport error (the connection is then renewed).
  int request(http::verb verb, const std::string& target, const std::string& body,
              std::string* out) {
    try {
      http::request<http::string_body> req{verb, target, 11};
      req.set(http::field::host, host_.first);
      req.keep_alive(true);
      if (!body.empty()) {
        req.set(http::field::content_type, "application/json");
        req.body() = body;
        req.prepare_payload();
      }
      http::write(stream_, req);
      http::response<http::string_body> res;
      http::read(stream_, buffer_, res);
      if (out) *out = std::move(res.body());
      return res.result_int();
    } catch (const std::exception&) {
      connect();
      return 0;
    }
  }

 private:
  void connect() {
    beast::error_code ec;
    stream_.close();
    asio::ip::tcp::resolver resolver(ioc_);
    auto eps = resolver.resolve(host_.first, host_.second, ec);
    if (!ec) stream_.connect(eps, ec);
  }
  static constexpr size_t kReadBufferBytes = 64 * 1024;
  std::pair<std::string, std::string> host_;
  asio::io_context ioc_;
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
};

// `digits` lowercase hex digits of v's low bits, most significant first.
void append_hex(uint64_t v, int digits, std::string* out) {
  static constexpr char kHex[] = "0123456789abcdef";
  char buf[16];
  for (int i = digits - 1; i >= 0; --i, v >>= 4) buf[i] = kHex[v & 0xf];
  out->append(buf, static_cast<size_t>(digits));
}

// A transactionId shaped as the Queen SDKs' (a UUIDv7 minted per message), unique to the
// run (its start), the producer and the item's number. Formatted by hand: snprintf was about
// a quarter of the generator's CPU, on the cores it shares with the broker.
void append_txn_id(const Options& o, int producer, uint64_t n, std::string* out) {
  uint64_t t = static_cast<uint64_t>(o.run_us) & 0xffff'ffff'ffffu;
  append_hex(t >> 16, 8, out);
  *out += '-';
  append_hex(t, 4, out);
  *out += "-7";
  append_hex(static_cast<uint64_t>(producer), 3, out);
  *out += '-';
  append_hex(0x8000 | ((n >> 48) & 0x3fff), 4, out);
  *out += '-';
  append_hex(n, 12, out);
}

// One push body: `count` items, item i into partition first + i * step. With --txn-ids, item
// i names a transactionId of its own (append_txn_id of seq + i).
std::string push_body(const Options& o, uint64_t first, uint64_t step, int count, int64_t sent_us,
                      int producer, uint64_t seq) {
  std::string body;
  size_t item_bytes = static_cast<size_t>(o.payload_bytes) + (o.txn_ids ? 160 : 96);
  body.reserve(static_cast<size_t>(count) * item_bytes + 16);
  body += "{\"items\":[";
  for (int i = 0; i < count; ++i) {
    uint64_t part = first + static_cast<uint64_t>(i) * step;
    if (i > 0) body += ',';
    body += "{\"queue\":\"";
    body += queue_name(o, part);
    body += "\",\"partition\":\"p";
    body += std::to_string(part);
    if (o.txn_ids) {
      body += "\",\"transactionId\":\"";
      append_txn_id(o, producer, seq + static_cast<uint64_t>(i), &body);
    }
    body += "\",\"payload\":";
    append_payload(o, sent_us, &body);
    body += '}';
  }
  body += "]}";
  return body;
}

void producer(const Options& o, int id, Clock::time_point end, Totals* t) {
  Client c(o, id);
  double per_conn_rate = o.rate / o.producers / o.batch;  // pushes per second per connection
  auto next = Clock::now();
  uint64_t seq = 0;
  uint64_t sent = 0;  // items this producer has put in bodies
  while (Clock::now() < end) {
    auto scheduled = next;
    if (per_conn_rate > 0) {
      std::this_thread::sleep_until(next);  // pacing the open loop, not waiting on a condition
      next += std::chrono::microseconds(static_cast<int64_t>(1e6 / per_conn_rate));
    }
    int count = o.batch;
    uint64_t first = (static_cast<uint64_t>(id) * 7919 + seq++) % o.partitions;
    uint64_t step = 0;
    if (o.messages > 0) {
      uint64_t taken = t->next_message.fetch_add(static_cast<uint64_t>(count));
      if (taken >= o.messages) break;
      count = static_cast<int>(std::min<uint64_t>(count, o.messages - taken));
    }
    if (o.fill) {
      first = t->next_fill.fetch_add(static_cast<uint64_t>(o.batch));
      if (first >= o.partitions) break;
      count = static_cast<int>(std::min<uint64_t>(o.batch, o.partitions - first));
      step = 1;
    }
    auto start = per_conn_rate > 0 ? scheduled : Clock::now();
    // Open loop: the payload carries the scheduled instant, so e2e counts a late send too.
    int64_t late_us =
        std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start).count();
    std::string body = push_body(o, first, step, count, now_us() - late_us, id, sent);
    sent += static_cast<uint64_t>(count);
    int status = c.request(http::verb::post, "/api/v1/push", body, nullptr);
    auto us = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start);
    if (status == 201) {
      t->pushed += static_cast<uint64_t>(count);
      t->push_ms.add(us.count());
      if (o.fill) t->filled_us = std::max<int64_t>(t->filled_us, now_us());
    } else {
      ++t->push_errors;
    }
  }
}

// What an ack needs of a popped message, and its send time.
struct Popped {
  std::string transaction_id, partition_id, lease_id;
  int64_t sent_us = -1;
};

// Where `key` first occurs in `body` at or past `from`, or npos. glibc's memmem skips ahead
// by the key (std::string::find stops at each '"' of a payload to compare the rest).
size_t find_key(const std::string& body, std::string_view key, size_t from) {
  if (from >= body.size()) return std::string::npos;
  const void* hit = ::memmem(body.data() + from, body.size() - from, key.data(), key.size());
  return hit ? static_cast<size_t>(static_cast<const char*>(hit) - body.data()) : std::string::npos;
}

// The string value after `key` at or past `*at`, moving `*at` past it; false when absent.
bool scan_string(const std::string& body, std::string_view key, size_t* at, std::string* out) {
  size_t k = find_key(body, key, *at);
  if (k == std::string::npos) return false;
  size_t from = k + key.size();
  size_t to = body.find('"', from);
  if (to == std::string::npos) return false;
  out->assign(body, from, to - from);
  *at = to + 1;
  return true;
}

// The node renders pop messages with fixed field order (transactionId, partitionId, data,
// leaseId), so the fields are found by scanning, not by parsing 500 messages as a tree.
std::vector<Popped> scan_pop(const std::string& body) {
  std::vector<Popped> out;
  size_t at = body.find("\"messages\":[");
  if (at == std::string::npos) return out;
  for (;;) {
    Popped p;
    if (!scan_string(body, "\"transactionId\":\"", &at, &p.transaction_id)) break;
    if (!scan_string(body, "\"partitionId\":\"", &at, &p.partition_id)) break;
    size_t ts = find_key(body, "\"data\":{\"ts\":", at);
    size_t lease = find_key(body, "\"leaseId\":\"", at);
    if (ts != std::string::npos && ts < lease) p.sent_us = std::atoll(body.c_str() + ts + 13);
    if (lease == std::string::npos) break;
    at = lease;
    if (!scan_string(body, "\"leaseId\":\"", &at, &p.lease_id)) break;
    out.push_back(std::move(p));
  }
  return out;
}

std::string ack_item(const Popped& p) {
  return "{\"transactionId\":\"" + p.transaction_id + "\",\"partitionId\":\"" + p.partition_id +
         "\",\"leaseId\":\"" + p.lease_id + "\",\"status\":\"completed\"";
}

// A consumer's acks go out on their own connection, so the consumer pops its next batch
// while the last one's ack is on its way (acks asynchronous, as the scenario asks). At most
// kAcksQueuedMax batches wait; a consumer that gets ahead of them blocks.
class Acker {
 public:
  Acker(const Options& o, int n, Totals* t) : client_(o, n), totals_(t) {
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
  void send(std::string body) {
    std::unique_lock<std::mutex> g(mu_);
    changed_.wait(g, [&] { return queued_.size() < kAcksQueuedMax; });
    queued_.push_back(std::move(body));
    changed_.notify_all();
  }

 private:
  static constexpr size_t kAcksQueuedMax = 2;
  void run() {
    for (;;) {
      std::string body;
      {
        std::unique_lock<std::mutex> g(mu_);
        changed_.wait(g, [&] { return closed_ || !queued_.empty(); });
        if (queued_.empty()) return;
        body = std::move(queued_.front());
        queued_.pop_front();
      }
      changed_.notify_all();
      auto ts = Clock::now();
      if (client_.request(http::verb::post, "/api/v1/ack/batch", body, nullptr) != 200)
        ++totals_->pop_errors;
      totals_->ack_ms.add(
          std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - ts).count());
    }
  }
  Client client_;
  Totals* totals_;
  std::mutex mu_;
  std::condition_variable changed_;
  std::deque<std::string> queued_;
  bool closed_ = false;
  std::thread thread_;
};

void consumer(const Options& o, int id, Clock::time_point end, Totals* t, bool txn) {
  Client c(o, o.producers + id);
  std::unique_ptr<Acker> acker;
  if (!txn) acker = std::make_unique<Acker>(o, o.producers + o.consumers + id, t);
  while (Clock::now() < end) {
    std::string q = queue_name(o, static_cast<uint64_t>(id));
    std::string target = "/api/v1/pop/queue/" + q + "?batch=" + std::to_string(o.pop_batch) +
                         "&partitions=" + std::to_string(o.pop_partitions) +
                         "&wait=true&timeout=1000&consumerGroup=bench";
    std::string body;
    auto start = Clock::now();
    int status = c.request(http::verb::get, target, "", &body);
    if (status == 204) continue;
    if (status != 200) {
      ++t->pop_errors;
      continue;
    }
    t->pop_ms.add(
        std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start).count());
    std::vector<Popped> popped = scan_pop(body);
    int64_t now = now_us();
    for (const Popped& p : popped)
      if (p.sent_us >= 0) t->e2e_ms.add(now - p.sent_us);
    t->consumed += popped.size();
    if (popped.empty()) continue;
    ++t->pops;
    if (!txn) {
      std::string acks = "{\"consumerGroup\":\"bench\",\"acknowledgments\":[";
      for (size_t i = 0; i < popped.size(); ++i) {
        if (i > 0) acks += ',';
        acks += ack_item(popped[i]) + '}';
      }
      acks += "]}";
      acker->send(std::move(acks));
      continue;
    }
    for (const Popped& p : popped) {
      std::string ops = "{\"operations\":[" + ack_item(p) +
                        ",\"type\":\"ack\",\"consumerGroup\":\"bench\"},{\"type\":\"push\","
                        "\"items\":[";
      for (int i = 0; i < 10; ++i) {
        if (i > 0) ops += ',';
        ops += "{\"queue\":\"" + o.queue + "-out\",\"partition\":\"" + p.partition_id +
               "\",\"payload\":{\"i\":" + std::to_string(i) + "}}";
      }
      ops += "]}]}";
      auto ts = Clock::now();
      int st = c.request(http::verb::post, "/api/v1/transaction", ops, nullptr);
      if (st == 200) {
        ++t->txns;
        t->txn_ms.add(
            std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - ts).count());
      } else {
        ++t->pop_errors;
      }
    }
  }
}

std::vector<std::pair<std::string, std::string>> parse_hosts(const std::string& list) {
  std::vector<std::pair<std::string, std::string>> out;
  size_t from = 0;
  while (from <= list.size()) {
    size_t comma = list.find(',', from);
    std::string one = list.substr(from, comma == std::string::npos ? comma : comma - from);
    size_t colon = one.rfind(':');
    if (colon == std::string::npos) {
      std::fprintf(stderr, "--hosts wants host:port,host:port; got %s\n", one.c_str());
      std::exit(2);
    }
    out.emplace_back(one.substr(0, colon), one.substr(colon + 1));
    if (comma == std::string::npos) break;
    from = comma + 1;
  }
  return out;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i], v = argv[i + 1];
    if (k == "--target")
      o.target = v;
    else if (k == "--host")
      o.host = v;
    else if (k == "--port")
      o.port = v;
    else if (k == "--scenario")
      o.scenario = v;
    else if (k == "--producers")
      o.producers = std::stoi(v);
    else if (k == "--consumers")
      o.consumers = std::stoi(v);
    else if (k == "--duration-s")
      o.duration_s = std::stod(v);
    else if (k == "--rate")
      o.rate = std::stod(v);
    else if (k == "--batch")
      o.batch = std::stoi(v);
    else if (k == "--payload-bytes")
      o.payload_bytes = std::stoi(v);
    else if (k == "--partitions")
      o.partitions = std::stoull(v);
    else if (k == "--queues")
      o.queues = std::stoi(v);
    else if (k == "--pop-partitions")
      o.pop_partitions = std::stoi(v);
    else if (k == "--pop-batch")
      o.pop_batch = std::stoi(v);
    else if (k == "--queue")
      o.queue = v;
    else if (k == "--label")
      o.label = v;
    else if (k == "--messages")
      o.messages = std::stoull(v);
    else if (k == "--fill")
      o.fill = v == "1" || v == "true";
    else if (k == "--txn-ids")
      o.txn_ids = v == "1" || v == "true";
    else if (k == "--hosts")
      o.hosts = parse_hosts(v);
    else {
      std::fprintf(stderr, "unknown option %s\n", k.c_str());
      std::exit(2);
    }
  }
  return o;
}

int usage(const char* why) {
  std::fprintf(stderr, "queen-bench: %s\n", why);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  Options o = parse(argc, argv);
  bool consume = o.scenario == "inout" || o.scenario == "txn";
  Totals t;
  auto begin = Clock::now();
  int64_t begin_us = now_us();
  o.run_us = begin_us;
  auto end = begin + std::chrono::milliseconds(static_cast<int64_t>(o.duration_s * 1000));
  std::vector<std::thread> threads;
  bool redis = o.target == "redis";
  if (o.target != "queen" && !redis) return usage("--target is queen or redis");
  if (redis && o.scenario == "txn") return usage("the redis target has no transactions");
  if (redis && o.txn_ids) return usage("the redis target has no transactionIds");
  if (redis && !redis_prepare(o)) return 1;
  for (int i = 0; i < o.producers; ++i) {
    if (redis)
      threads.emplace_back(redis_producer, std::cref(o), i, end, &t);
    else
      threads.emplace_back(producer, std::cref(o), i, end, &t);
  }
  for (int i = 0; consume && i < o.consumers; ++i) {
    if (redis)
      threads.emplace_back(redis_consumer, std::cref(o), i, end, &t);
    else
      threads.emplace_back(consumer, std::cref(o), i, end, &t, o.scenario == "txn");
  }
  for (auto& th : threads) th.join();
  double secs = std::chrono::duration<double>(Clock::now() - begin).count();
  json r = {{"scenario", o.scenario},
            {"target", o.target},
            {"label", o.label},
            {"seconds", secs},
            {"producers", o.producers},
            {"consumers", consume ? o.consumers : 0},
            {"batch", o.batch},
            {"payload_bytes", o.payload_bytes},
            {"partitions", o.partitions},
            {"queues", o.queues},
            {"pop_partitions", consume ? o.pop_partitions : 0},
            {"nodes", o.hosts.empty() ? 1 : o.hosts.size()},
            {"fill", o.fill},
            {"txn_ids", o.txn_ids},
            {"fill_s",
             o.fill && t.filled_us > 0 ? static_cast<double>(t.filled_us - begin_us) / 1e6 : 0.0},
            {"rate_offered", o.rate},
            {"pushed_per_s", t.pushed / secs},
            {"consumed_per_s", t.consumed / secs},
            {"txns_per_s", t.txns / secs},
            {"push_errors", t.push_errors.load()},
            {"pop_errors", t.pop_errors.load()},
            {"push_p50_ms", t.push_ms.percentile_ms(50)},
            {"push_p99_ms", t.push_ms.percentile_ms(99)},
            {"push_p999_ms", t.push_ms.percentile_ms(99.9)},
            {"e2e_p50_ms", t.e2e_ms.percentile_ms(50)},
            {"e2e_p99_ms", t.e2e_ms.percentile_ms(99)},
            {"e2e_p999_ms", t.e2e_ms.percentile_ms(99.9)},
            {"txn_p50_ms", t.txn_ms.percentile_ms(50)},
            {"txn_p99_ms", t.txn_ms.percentile_ms(99)},
            {"pop_p50_ms", t.pop_ms.percentile_ms(50)},
            {"pop_p99_ms", t.pop_ms.percentile_ms(99)},
            {"ack_p50_ms", t.ack_ms.percentile_ms(50)},
            {"ack_p99_ms", t.ack_ms.percentile_ms(99)},
            {"messages_per_pop", t.pops > 0 ? static_cast<double>(t.consumed) / t.pops : 0.0}};
  std::printf("%s\n", r.dump().c_str());
  std::fprintf(stderr,
               "%s: pushed %.0f msg/s, consumed %.0f msg/s, txns %.0f/s | push p50 %.2f ms "
               "p99 %.2f ms p99.9 %.2f ms | e2e p50 %.2f ms p99 %.2f ms | errors push %llu "
               "pop %llu\n",
               o.scenario.c_str(), t.pushed / secs, t.consumed / secs, t.txns / secs,
               t.push_ms.percentile_ms(50), t.push_ms.percentile_ms(99),
               t.push_ms.percentile_ms(99.9), t.e2e_ms.percentile_ms(50),
               t.e2e_ms.percentile_ms(99), static_cast<unsigned long long>(t.push_errors.load()),
               static_cast<unsigned long long>(t.pop_errors.load()));
  return 0;
}
