// The stored layout of queue options (core/state/queue_options.h).
#include "core/state/queue_options.h"

namespace queen {

void put_binary(ByteWriter& w, const QueueOptions* options) {
  const QueueOptions& o = *options;
  w.i64(o.lease_time_s);
  w.i64(o.retry_limit);
  w.i64(o.retry_delay_ms);
  w.i64(o.priority);
  w.i64(o.max_size);
  w.i64(o.ttl_s);
  w.u8(o.dead_letter_queue);
  w.u8(o.dlq_after_max_retries);
  w.i64(o.dedup_window_s);
  w.i64(o.delayed_processing_s);
  w.i64(o.window_buffer_s);
  w.u8(o.retention_enabled);
  w.i64(o.retention_s);
  w.i64(o.completed_retention_s);
  w.i64(o.max_wait_time_s);
  // Bit 0: encryption; bit 1: fields added later follow the task (written only when one is
  // set, so options without them keep the older layout byte for byte).
  bool extended = o.min_pop_wait_time_ms != 0;
  w.u8(static_cast<uint8_t>(o.encryption_enabled | (extended << 1)));
  w.str(o.ns);
  w.str(o.task);
  if (extended) w.i64(o.min_pop_wait_time_ms);
}

// Only what put_binary writes is accepted (a bool byte is 0 or 1, no flag beyond the two, the
// extension only with a value in it), so that a decoded options value encodes to its bytes.
void get_binary(ByteReader& r, QueueOptions* out) {
  QueueOptions& o = *out;
  auto flag = [&r] {
    uint8_t b = r.u8();
    if (b > 1) r.invalidate();
    return b == 1;
  };
  o.lease_time_s = r.i64();
  o.retry_limit = r.i64();
  o.retry_delay_ms = r.i64();
  o.priority = r.i64();
  o.max_size = r.i64();
  o.ttl_s = r.i64();
  o.dead_letter_queue = flag();
  o.dlq_after_max_retries = flag();
  o.dedup_window_s = r.i64();
  o.delayed_processing_s = r.i64();
  o.window_buffer_s = r.i64();
  o.retention_enabled = flag();
  o.retention_s = r.i64();
  o.completed_retention_s = r.i64();
  o.max_wait_time_s = r.i64();
  uint8_t flags = r.u8();
  if (flags > 3) r.invalidate();
  o.encryption_enabled = (flags & 1) != 0;
  o.ns = r.str();
  o.task = r.str();
  if (flags & 2) {
    o.min_pop_wait_time_ms = r.i64();
    if (o.min_pop_wait_time_ms == 0) r.invalidate();
  }
}

}  // namespace queen
