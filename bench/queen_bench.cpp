// queen-bench: the load generator. Keep-alive HTTP connections against one node; producers
// push batches (one partition per push), consumers pop and ack, or commit transactions.
// Open loop (--rate > 0): each connection sends on a fixed schedule and latency counts from
// the scheduled instant, so queueing shows. Closed loop (--rate 0): as fast as answers come.
// Prints one JSON result line (for bench/results.jsonl) and a human summary.
#include <utility>  // before Boost 1.74 Asio, which uses std::exchange
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio.hpp>
#include <boost/beast.hpp>
#include <nlohmann/json.hpp>

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using Clock = std::chrono::steady_clock;
using json = nlohmann::json;

namespace {

// Log-linear histogram of microseconds: 64 sub-buckets per power of two (about 1.5% error).
class Histogram {
 public:
  void add(int64_t us) {
    if (us < 0) us = 0;
    std::lock_guard<std::mutex> g(mu_);
    ++counts_[index(static_cast<uint64_t>(us))];
    ++total_;
  }
  double percentile_ms(double p) const {
    std::lock_guard<std::mutex> g(mu_);
    if (total_ == 0) return 0;
    uint64_t want = static_cast<uint64_t>(std::ceil(p / 100.0 * total_));
    uint64_t seen = 0;
    for (const auto& [i, c] : counts_) {
      seen += c;
      if (seen >= want) return value(i) / 1000.0;
    }
    return 0;
  }
  uint64_t total() const {
    std::lock_guard<std::mutex> g(mu_);
    return total_;
  }

 private:
  static uint32_t index(uint64_t v) {
    if (v < 64) return static_cast<uint32_t>(v);
    int exp = 63 - __builtin_clzll(v);  // >= 6
    uint32_t sub = static_cast<uint32_t>((v >> (exp - 6)) & 63);
    return static_cast<uint32_t>((exp - 5) * 64 + sub);
  }
  static double value(uint32_t i) {
    if (i < 64) return i;
    int exp = static_cast<int>(i / 64) + 5;
    uint64_t sub = i % 64;
    return static_cast<double>((uint64_t{1} << exp) + (sub << (exp - 6)));
  }
  mutable std::mutex mu_;
  std::map<uint32_t, uint64_t> counts_;
  uint64_t total_ = 0;
};

struct Options {
  std::string host = "127.0.0.1";
  std::string port = "6632";
  std::string scenario = "push";
  int producers = 8;
  int consumers = 8;
  double duration_s = 10;
  double rate = 0;  // messages/s over all producers; 0 = closed loop
  int batch = 100;
  int payload_bytes = 256;
  uint64_t partitions = 200;
  int queues = 1;
  int pop_batch = 500;
  std::string queue = "bench";
  std::string label;
};

class Client {
 public:
  Client(const Options& o) : o_(o), stream_(ioc_) { connect(); }
  // Returns the status, or 0 on a transport error (the connection is then renewed).
  int request(http::verb verb, const std::string& target, const std::string& body,
              std::string* out) {
    try {
      http::request<http::string_body> req{verb, target, 11};
      req.set(http::field::host, o_.host);
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
    auto eps = resolver.resolve(o_.host, o_.port, ec);
    if (!ec) stream_.connect(eps, ec);
  }
  const Options& o_;
  asio::io_context ioc_;
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
};

int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

struct Totals {
  std::atomic<uint64_t> pushed{0}, consumed{0}, push_errors{0}, pop_errors{0}, txns{0};
  Histogram push_ms, pop_ms, e2e_ms, txn_ms;
};

std::string payload(const Options& o, int64_t sent_us) {
  std::string pad(static_cast<size_t>(std::max(0, o.payload_bytes - 40)), 'x');
  return "{\"ts\":" + std::to_string(sent_us) + ",\"pad\":\"" + pad + "\"}";
}

std::string queue_name(const Options& o, uint64_t i) {
  return o.queues > 1 ? o.queue + "-" + std::to_string(i % o.queues) : o.queue;
}

void producer(const Options& o, int id, Clock::time_point end, Totals* t) {
  Client c(o);
  double per_conn_rate = o.rate / o.producers / o.batch;  // pushes per second per connection
  auto next = Clock::now();
  uint64_t seq = 0;
  while (Clock::now() < end) {
    auto scheduled = next;
    if (per_conn_rate > 0) {
      std::this_thread::sleep_until(next);  // pacing the open loop, not waiting on a condition
      next += std::chrono::microseconds(static_cast<int64_t>(1e6 / per_conn_rate));
    }
    uint64_t part = (static_cast<uint64_t>(id) * 7919 + seq++) % o.partitions;
    json items = json::array();
    int64_t sent = now_us();
    for (int i = 0; i < o.batch; ++i)
      items.push_back({{"queue", queue_name(o, part)},
                       {"partition", "p" + std::to_string(part)},
                       {"payload", json::parse(payload(o, sent))}});
    std::string body = json{{"items", items}}.dump();
    auto start = per_conn_rate > 0 ? scheduled : Clock::now();
    int status = c.request(http::verb::post, "/api/v1/push", body, nullptr);
    auto us = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start);
    if (status == 201) {
      t->pushed += o.batch;
      t->push_ms.add(us.count());
    } else {
      ++t->push_errors;
    }
  }
}

void consumer(const Options& o, int id, Clock::time_point end, Totals* t, bool txn) {
  Client c(o);
  while (Clock::now() < end) {
    std::string q = queue_name(o, static_cast<uint64_t>(id));
    std::string target = "/api/v1/pop/queue/" + q + "?batch=" + std::to_string(o.pop_batch) +
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
    json res = json::parse(body, nullptr, false);
    if (!res.is_object() || !res["messages"].is_array()) continue;
    json acks = json::array();
    int64_t now = now_us();
    for (const auto& m : res["messages"]) {
      if (m["data"].is_object() && m["data"].contains("ts"))
        t->e2e_ms.add(now - m["data"]["ts"].get<int64_t>());
      acks.push_back({{"transactionId", m["transactionId"]},
                      {"partitionId", m["partitionId"]},
                      {"leaseId", m["leaseId"]},
                      {"status", "completed"}});
    }
    t->consumed += acks.size();
    if (!txn) {
      c.request(http::verb::post, "/api/v1/ack/batch",
                json{{"acknowledgments", acks}, {"consumerGroup", "bench"}}.dump(), nullptr);
      continue;
    }
    for (const auto& a : acks) {
      json ops = json::array();
      json ack = a;
      ack["type"] = "ack";
      ack["consumerGroup"] = "bench";
      ops.push_back(ack);
      json items = json::array();
      for (int i = 0; i < 10; ++i)
        items.push_back({{"queue", o.queue + "-out"},
                         {"partition", a["partitionId"].get<std::string>()},
                         {"payload", {{"i", i}}}});
      ops.push_back({{"type", "push"}, {"items", items}});
      auto ts = Clock::now();
      int st = c.request(http::verb::post, "/api/v1/transaction",
                         json{{"operations", ops}}.dump(), nullptr);
      if (st == 200) {
        ++t->txns;
        t->txn_ms.add(
            std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - ts).count());
      }
    }
  }
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i], v = argv[i + 1];
    if (k == "--host") o.host = v;
    else if (k == "--port") o.port = v;
    else if (k == "--scenario") o.scenario = v;
    else if (k == "--producers") o.producers = std::stoi(v);
    else if (k == "--consumers") o.consumers = std::stoi(v);
    else if (k == "--duration-s") o.duration_s = std::stod(v);
    else if (k == "--rate") o.rate = std::stod(v);
    else if (k == "--batch") o.batch = std::stoi(v);
    else if (k == "--payload-bytes") o.payload_bytes = std::stoi(v);
    else if (k == "--partitions") o.partitions = std::stoull(v);
    else if (k == "--queues") o.queues = std::stoi(v);
    else if (k == "--pop-batch") o.pop_batch = std::stoi(v);
    else if (k == "--queue") o.queue = v;
    else if (k == "--label") o.label = v;
    else {
      std::fprintf(stderr, "unknown option %s\n", k.c_str());
      std::exit(2);
    }
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  Options o = parse(argc, argv);
  bool consume = o.scenario == "inout" || o.scenario == "txn";
  Totals t;
  auto begin = Clock::now();
  auto end = begin + std::chrono::milliseconds(static_cast<int64_t>(o.duration_s * 1000));
  std::vector<std::thread> threads;
  for (int i = 0; i < o.producers; ++i) threads.emplace_back(producer, std::cref(o), i, end, &t);
  if (consume)
    for (int i = 0; i < o.consumers; ++i)
      threads.emplace_back(consumer, std::cref(o), i, end, &t, o.scenario == "txn");
  for (auto& th : threads) th.join();
  double secs = std::chrono::duration<double>(Clock::now() - begin).count();
  json r = {{"scenario", o.scenario},
            {"label", o.label},
            {"seconds", secs},
            {"producers", o.producers},
            {"consumers", consume ? o.consumers : 0},
            {"batch", o.batch},
            {"payload_bytes", o.payload_bytes},
            {"partitions", o.partitions},
            {"queues", o.queues},
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
            {"txn_p99_ms", t.txn_ms.percentile_ms(99)}};
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
