#include "server/edge_placement.h"

#include <algorithm>

namespace queen::server {

int64_t Placement::busy_total_us(int64_t now_us) {
  std::lock_guard lock(mutex_);
  return done_us_ + in_flight_ * now_us - start_sum_us_;
}

bool Placement::tick(int64_t now_us) {
  int64_t total_us = busy_total_us(now_us);
  std::optional<int64_t> last_us = last_tick_us_;
  int64_t busy_us = total_us - last_total_us_;
  last_tick_us_ = now_us;
  last_total_us_ = total_us;
  if (!adaptive() || !last_us || now_us <= *last_us) return false;
  // A request may begin a moment before the tick's clock read (another thread's clock):
  // its few microseconds past now are not taken from the tick's measure below zero.
  last_busy_ =
      static_cast<double>(std::max<int64_t>(0, busy_us)) / static_cast<double>(now_us - *last_us);
  bool node = on_node();
  bool past = node ? last_busy_ > options_.busy_max
                   : last_busy_ < options_.busy_max * options_.back_fraction;
  ticks_past_ = past ? ticks_past_ + 1 : 0;
  if (ticks_past_ < (node ? options_.ticks_to_edge : options_.ticks_to_node)) return false;
  ticks_past_ = 0;
  on_node_.store(!node, std::memory_order_relaxed);
  return true;
}

}  // namespace queen::server
