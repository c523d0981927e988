// What the load generator's targets share (bench/queen_bench.cpp drives a Queen node over
// HTTP, bench/redis_target.cpp a Redis server's Streams): the options, the totals and
// latency histograms they fill, and the payload every target sends.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace queen::bench {

using Clock = std::chrono::steady_clock;

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
    for (uint32_t i = 0; i < kBuckets; ++i) {
      seen += counts_[i];
      if (seen >= want && counts_[i] > 0) return value(i) / 1000.0;
    }
    return 0;
  }
  uint64_t total() const {
    std::lock_guard<std::mutex> g(mu_);
    return total_;
  }

 private:
  static constexpr uint32_t kBuckets = 60 * 64;  // up to 2^64 us
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
  std::array<uint64_t, kBuckets> counts_{};
  uint64_t total_ = 0;
};

struct Options {
  std::string target = "queen";  // queen | redis (bench/redis_target.cpp)
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
  int pop_partitions = 1;  // partitions one pop may lease (1-64)
  std::string queue = "bench";
  std::string label;
  // --hosts h:p,h:p: connections go round-robin over these nodes (a cluster); else host:port.
  std::vector<std::pair<std::string, std::string>> hosts;
  // --fill: every item of a push goes to its own partition, in order, until `partitions` of
  // them hold a message; the run ends then (or at the duration).
  bool fill = false;
  // --messages N: the producers stop once N messages have been pushed in all (0: no limit).
  uint64_t messages = 0;
  // --txn-ids 1: each pushed item names its own transactionId, unique to the run (the
  // broker looks each up in its partition's dedup ring); else the broker makes one.
  bool txn_ids = false;
  int64_t run_us = 0;  // when the run began: the first part of its transactionIds
};

inline int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

struct Totals {
  std::atomic<uint64_t> pushed{0}, consumed{0}, push_errors{0}, pop_errors{0}, txns{0};
  std::atomic<uint64_t> pops{0};       // pop answers that carried messages
  std::atomic<uint64_t> next_fill{0};  // --fill: the next partition to give a message
  std::atomic<int64_t> filled_us{0};   // --fill: when the last one was answered
  std::atomic<uint64_t> next_message{0};  // --messages: messages handed to producers so far
  Histogram push_ms, pop_ms, ack_ms, e2e_ms, txn_ms;
};

// Bodies are built as text: the generator shares the node's cores, so it must stay cheap.
inline void append_payload(const Options& o, int64_t sent_us, std::string* out) {
  *out += "{\"ts\":";
  *out += std::to_string(sent_us);
  *out += ",\"pad\":\"";
  out->append(static_cast<size_t>(std::max(0, o.payload_bytes - 40)), 'x');
  *out += "\"}";
}

inline std::string queue_name(const Options& o, uint64_t i) {
  return o.queues > 1 ? o.queue + "-" + std::to_string(i % o.queues) : o.queue;
}

// The Redis target: the same scenarios against Redis Streams (one stream per queue, XADD
// pipelined `batch` deep; consumers XREADGROUP and XACK on a second connection).
void redis_producer(const Options& o, int id, Clock::time_point end, Totals* t);
void redis_consumer(const Options& o, int id, Clock::time_point end, Totals* t);
// Creates the consumer group (and the stream); false with a message on stderr when Redis
// cannot be reached.
bool redis_prepare(const Options& o);

}  // namespace queen::bench
