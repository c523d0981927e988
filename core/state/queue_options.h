// Queue options: the configure body's fields with the reference's defaults, and the patch
// a configure carries (merge keeps what it leaves out; replace resets it to the default).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/common/bytes.h"

namespace queen {

struct QueueOptions {
  int64_t lease_time_s = 300;  // 60 when the queue is created by a push
  int64_t retry_limit = 3;
  int64_t retry_delay_ms = 1000;
  int64_t priority = 0;
  int64_t max_size = 0;
  int64_t ttl_s = 3600;
  bool dead_letter_queue = true;
  bool dlq_after_max_retries = true;
  int64_t dedup_window_s = 3600;
  int64_t delayed_processing_s = 0;
  int64_t window_buffer_s = 0;
  bool retention_enabled = false;
  int64_t retention_s = 0;
  int64_t completed_retention_s = 0;
  int64_t max_wait_time_s = 0;
  bool encryption_enabled = false;
  std::string ns;
  std::string task;
  int64_t min_pop_wait_time_ms = 0;  // stored and echoed (as in 2.x, it does nothing)
  bool operator==(const QueueOptions&) const = default;
};

constexpr int64_t kPushCreatedLeaseTimeS = 60;

struct QueueOptionsPatch {
  std::optional<int64_t> lease_time_s, retry_limit, retry_delay_ms, priority, max_size, ttl_s;
  std::optional<bool> dead_letter_queue, dlq_after_max_retries;
  std::optional<int64_t> dedup_window_s, delayed_processing_s, window_buffer_s;
  std::optional<bool> retention_enabled;
  std::optional<int64_t> retention_s, completed_retention_s, max_wait_time_s;
  std::optional<bool> encryption_enabled;
  std::optional<std::string> ns, task;
  std::optional<int64_t> min_pop_wait_time_ms;

  // Applies the patch over `base`.
  QueueOptions apply(QueueOptions base) const {
#define QUEEN_PATCH(f) \
  if (f) base.f = *f;
    QUEEN_PATCH(lease_time_s) QUEEN_PATCH(retry_limit) QUEEN_PATCH(retry_delay_ms)
    QUEEN_PATCH(priority) QUEEN_PATCH(max_size) QUEEN_PATCH(ttl_s) QUEEN_PATCH(dead_letter_queue)
    QUEEN_PATCH(dlq_after_max_retries) QUEEN_PATCH(dedup_window_s)
    QUEEN_PATCH(delayed_processing_s) QUEEN_PATCH(window_buffer_s)
    QUEEN_PATCH(retention_enabled) QUEEN_PATCH(retention_s) QUEEN_PATCH(completed_retention_s)
    QUEEN_PATCH(max_wait_time_s) QUEEN_PATCH(encryption_enabled) QUEEN_PATCH(ns)
    QUEEN_PATCH(task) QUEEN_PATCH(min_pop_wait_time_ms)
#undef QUEEN_PATCH
    return base;
  }
};

// The binary form of queue options in log entries, checkpoints and forwarded replies, used by
// the binary walk (core/api/binary.h) in place of a walk: the older layout byte for byte (a
// flags byte, and fields added later written only when set), so older data folders read.
void put_binary(ByteWriter& w, const QueueOptions* o);
void get_binary(ByteReader& r, QueueOptions* o);

}  // namespace queen
