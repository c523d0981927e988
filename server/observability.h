// What operators read: the Prometheus text exposition of a node's MetricsReply
// (GET /metrics/prometheus) and the roll-ups of the queue list by namespace and by task
// (GET /api/v1/resources/namespaces and /tasks).
//
// Contract:
// - The exposition is format 0.0.4: every family has one # HELP and one # TYPE line followed
//   by its samples; counters end in _total; every other line is `name{labels} value`, label
//   values escaped (backslash, quote, newline) and made valid UTF-8. Families come in a fixed
//   order and samples in the reply's order (by name), so the same state renders the same text.
// - The node's figures come from the reply; this module adds only process figures read at
//   render time (uptime, resident memory, CPU time).
// - Roll-ups group queues by their `namespace` / `task` option, sorted by name; queues without
//   one are left out.
#pragma once

#include <sys/time.h>

#include "core/api/replies.h"
#include "server/api/api.h"

namespace queen::server {

// The text/plain answer for /metrics/prometheus.
HttpAnswer render_metrics(const MetricsReply& reply);
// GET /metrics, the reference's fixed JSON shape: {uptime, requests:{total, rate},
// messages:{total, rate}, database:{…0}, memory:{rss, …}, cpu:{user, system}}; rates are per
// second since the process started, requests are those the edge answered, messages those
// pushed (queued).
HttpAnswer render_metrics_json(const MetricsReply& reply);

// This process's resident memory (0 when /proc cannot tell).
uint64_t resident_bytes();
// A CPU time from getrusage, in microseconds.
uint64_t micros(const timeval& t);

// {"namespaces":[{namespace, queues, partitions, messages:{total, pending}}]} or, by task,
// {"tasks":[{task, queues, partitions, messages:{total, pending}}]}.
HttpAnswer render_queue_rollup(const QueuesReply& reply, bool by_task);

}  // namespace queen::server
