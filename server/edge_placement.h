// Where the HTTP connections are served (server/http_server.h): on the node thread itself while
// few requests are in flight, so a request and its answer cross no thread, and on the edge
// threads once more are, so parsing and rendering run beside the node rather than queue behind
// it. The measure is the mean number of requests in flight over each tick (the time requests
// spent between their dispatch and their answer within it, per time passed; a request held for
// seconds counts in every tick it spans, not at its end). Switching needs the measure past
// its bound for several ticks in a row, and coming back needs it well below, so a load near
// the bound does not make the connections hop.
//
// Contract: begin and end are safe from any thread (a mutex held for a few additions), and
// each begin is followed by one end with the same start; tick and on_node's changes happen
// on one thread; on_node may be read from any thread. Times are microseconds of one monotonic
// clock.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>

namespace queen::server {

struct PlacementOptions {
  // QUEEN_HTTP_NODE_BUSY_MAX: the node thread serves connections while at most this many
  // requests are in flight on average; 0: never (the edge threads always do).
  double busy_max = 0;
  int ticks_to_edge = 3;   // ticks in a row above busy_max before moving to the edge threads
  int ticks_to_node = 20;  // ticks in a row below busy_max * back_fraction before coming back
  double back_fraction = 0.6;
};

constexpr int64_t kPlacementTickMs = 100;

class Placement {
 public:
  explicit Placement(PlacementOptions options = {}) : options_(options) {
    on_node_.store(options_.busy_max > 0, std::memory_order_relaxed);
  }

  bool adaptive() const { return options_.busy_max > 0; }
  bool on_node() const { return on_node_.load(std::memory_order_relaxed); }
  // A request dispatched at `start_us`, and its answer (or its end unanswered) at `end_us`.
  void begin(int64_t start_us) {
    if (!adaptive()) return;
    std::lock_guard lock(mutex_);
    start_sum_us_ += start_us;
    ++in_flight_;
  }
  void end(int64_t start_us, int64_t end_us) {
    if (!adaptive()) return;
    std::lock_guard lock(mutex_);
    done_us_ += end_us - start_us;
    start_sum_us_ -= start_us;
    --in_flight_;
  }
  // Every kPlacementTickMs. Returns true when the placement changed.
  bool tick(int64_t now_us);
  double last_busy() const { return last_busy_; }

 private:
  // The time all requests have spent in flight up to `now_us`: the ended ones whole, the
  // others up to now.
  int64_t busy_total_us(int64_t now_us);

  PlacementOptions options_;
  std::atomic<bool> on_node_{false};
  std::mutex mutex_;  // the three counts change together
  int64_t in_flight_ = 0;
  int64_t start_sum_us_ = 0;  // of the requests in flight
  int64_t done_us_ = 0;       // of the ended requests
  std::optional<int64_t> last_tick_us_;
  int64_t last_total_us_ = 0;
  double last_busy_ = 0;
  int ticks_past_ = 0;  // ticks in a row past the bound towards the other placement
};

}  // namespace queen::server
