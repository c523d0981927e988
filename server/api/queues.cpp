// The queue family: configure, the queue list, one queue, its deletion and the roll-ups.
#include "server/api/common.h"
#include "server/observability.h"

namespace queen::server {

namespace {

void read_options(FieldReader& r, QueueOptionsPatch* p) {
  p->lease_time_s = r.opt_non_negative("leaseTime");
  p->retry_limit = r.opt_non_negative("retryLimit");
  p->retry_delay_ms = r.opt_non_negative("retryDelay");
  p->priority = r.opt_non_negative("priority");
  p->max_size = r.opt_non_negative("maxSize");
  p->ttl_s = r.opt_non_negative("ttl");
  p->dead_letter_queue = r.opt_bool("deadLetterQueue");
  p->dlq_after_max_retries = r.opt_bool("dlqAfterMaxRetries");
  p->dedup_window_s = r.opt_non_negative("dedupWindowSeconds");
  p->delayed_processing_s = r.opt_non_negative("delayedProcessing");
  p->window_buffer_s = r.opt_non_negative("windowBuffer");
  p->retention_enabled = r.opt_bool("retentionEnabled");
  p->retention_s = r.opt_non_negative("retentionSeconds");
  p->completed_retention_s = r.opt_non_negative("completedRetentionSeconds");
  p->max_wait_time_s = r.opt_non_negative("maxWaitTimeSeconds");
  p->encryption_enabled = r.opt_bool("encryptionEnabled");
  p->min_pop_wait_time_ms = r.opt_non_negative("minPopWaitTime");
}

}  // namespace

void render_options(const QueueOptions& o, JsonWriter& w) {
  w.begin_object();
  w.key("leaseTime").number(o.lease_time_s);
  w.key("retryLimit").number(o.retry_limit);
  w.key("retryDelay").number(o.retry_delay_ms);
  w.key("priority").number(o.priority);
  w.key("maxSize").number(o.max_size);
  w.key("ttl").number(o.ttl_s);
  w.key("deadLetterQueue").boolean(o.dead_letter_queue);
  w.key("dlqAfterMaxRetries").boolean(o.dlq_after_max_retries);
  w.key("dedupWindowSeconds").number(o.dedup_window_s);
  w.key("delayedProcessing").number(o.delayed_processing_s);
  w.key("windowBuffer").number(o.window_buffer_s);
  w.key("retentionEnabled").boolean(o.retention_enabled);
  w.key("retentionSeconds").number(o.retention_s);
  w.key("completedRetentionSeconds").number(o.completed_retention_s);
  w.key("maxWaitTimeSeconds").number(o.max_wait_time_s);
  w.key("encryptionEnabled").boolean(o.encryption_enabled);
  w.key("minPopWaitTime").number(o.min_pop_wait_time_ms);
  w.end_object();
}

HttpAnswer render_body(const ConfigureReply& reply, RenderAs) {
  JsonWriter w;
  w.begin_object();
  w.key("configured").boolean(true);
  w.key("queue").string(reply.queue);
  w.key("queueId").decimal_string(reply.queue_id.value);
  w.key("partitionId").decimal_string(reply.default_partition_id.value);
  w.key("namespace").string(reply.options.ns);
  w.key("task").string(reply.options.task);
  w.key("options");
  render_options(reply.options, w);
  w.end_object();
  return HttpAnswer{200, w.take(), 0};
}

namespace {

void render_queue_counts(const QueueView& q, JsonWriter& w) {
  w.key("messages").begin_object();
  w.key("total").number(q.messages);
  w.key("pending").number(q.pending);
  w.key("processing").number(q.processing);
  w.key("deadLetter").number(q.dlq);
  w.end_object();
}

HttpAnswer render_queue_get(const QueueView& q) {
  JsonWriter w;
  w.begin_object();
  w.key("id").decimal_string(q.id.value);
  w.key("name").string(q.name);
  w.key("namespace").string_or_null(q.options.ns);
  w.key("task").string_or_null(q.options.task);
  w.key("createdAt").string(format_iso_us(q.created_us));
  w.key("partitions").begin_array();
  auto name = [](const PartitionStatsView& p) -> const std::string& { return p.name; };
  for (const PartitionStatsView* row : by_name(q.partitions, name)) {
    const PartitionStatsView& p = *row;
    w.begin_object();
    w.key("id").decimal_string(p.id.value);
    w.key("name").string(p.name);
    w.key("createdAt").string(format_iso_us(p.created_us));
    w.key("messages").number(p.total);
    w.key("stats");
    render_six_counts(p, w);
    w.key("oldestMessage").string_or_null(iso_or_empty(p.oldest_us));
    w.key("newestMessage").string_or_null(iso_or_empty(p.newest_us));
    w.end_object();
  }
  w.end_array();
  w.key("totals");
  render_six_counts(sum_of(q.partitions), w);
  w.key("options");
  render_options(q.options, w);
  render_queue_counts(q, w);
  w.end_object();
  return HttpAnswer{200, w.take(), 0};
}

// A get lists its partitions and a list never does.
HttpAnswer render_queues(const QueuesReply& reply) {
  if (reply.queues.size() == 1 && !reply.queues.front().partitions.empty()) {
    return render_queue_get(reply.queues.front());
  }
  JsonWriter w;
  w.begin_object().key("queues").begin_array();
  for (const QueueView& q : reply.queues) render_queue_summary(q, w);
  w.end_array().end_object();
  return HttpAnswer{200, w.take(), 0};
}

}  // namespace

Parsed parse_configure(std::string_view body, const EdgeSettings& settings, IdSource& ids) {
  std::string error;
  auto doc = parse_object(body, &error);
  if (!doc) return bad_request(error);
  FieldReader top(*doc, "");
  ConfigureCmd cmd;
  cmd.queue = top.required_string("queue", /*allow_empty=*/false);
  cmd.patch.ns = top.opt_string("namespace");
  cmd.patch.task = top.opt_string("task");
  auto mode = top.opt_string("mode");
  if (!top.ok()) return bad_request(top.error());
  if (mode && *mode != "merge" && *mode != "replace") {
    return bad_request("mode must be merge or replace");
  }
  cmd.replace = mode && *mode == "replace";
  if (cmd.queue.size() > kNameBytesMax) return name_too_long("queue is");
  if (has_control_char(cmd.queue)) return bad_request("queue " + kNoControlChars);
  auto options = doc->find("options");
  if (options != doc->end() && !options->is_null()) {
    if (!options->is_object()) return bad_request("options must be an object");
    FieldReader r(*options, "options");
    read_options(r, &cmd.patch);
    if (!r.ok()) return bad_request(r.error());
  }
  return to_node(ids, settings.stmt_timeout_ms, std::move(cmd));
}

Parsed parse_queue_route(std::string_view method, const std::string& queue,
                         const QueryParams& query, const EdgeSettings& settings, IdSource& ids) {
  int64_t t = settings.stmt_timeout_ms;
  if (queue.empty()) {
    QueueListCmd cmd;
    if (const std::string* ns = query_text(query, "namespace")) cmd.ns = *ns;
    if (const std::string* task = query_text(query, "task")) cmd.task = *task;
    return to_node(ids, t, cmd);
  }
  if (method == "DELETE") return to_node(ids, t, QueueDeleteCmd{queue});
  return to_node(ids, t, QueueGetCmd{queue});
}

Parsed parse_queue_rollup(RenderAs as, const EdgeSettings& settings, IdSource& ids) {
  Parsed p = to_node(ids, settings.stmt_timeout_ms, QueueListCmd{});
  p.render = as;
  return p;
}

HttpAnswer render_body(const QueuesReply& reply, RenderAs as) {
  if (as == RenderAs::namespaces || as == RenderAs::tasks)
    return render_queue_rollup(reply, as == RenderAs::tasks);
  return render_queues(reply);
}

// The six counters of a queue get, for a partition or the totals.
void render_six_counts(const PartitionStatsView& s, JsonWriter& w) {
  w.begin_object();
  w.key("total").number(s.total);
  w.key("pending").number(s.pending);
  w.key("processing").number(s.processing);
  w.key("completed").number(s.completed);
  w.key("failed").number(0);  // a failed message is pending again or a dead letter
  w.key("deadLetter").number(s.dead_letter);
  w.end_object();
}

PartitionStatsView sum_of(const std::vector<PartitionStatsView>& partitions) {
  PartitionStatsView sum;
  for (const PartitionStatsView& p : partitions) {
    sum.total += p.total;
    sum.pending += p.pending;
    sum.processing += p.processing;
    sum.completed += p.completed;
    sum.dead_letter += p.dead_letter;
  }
  return sum;
}

// One queue of a list: {id, name, namespace, task, createdAt, partitions, messages}.
void render_queue_summary(const QueueView& q, JsonWriter& w) {
  w.begin_object();
  w.key("id").decimal_string(q.id.value);
  w.key("name").string(q.name);
  w.key("namespace").string_or_null(q.options.ns);
  w.key("task").string_or_null(q.options.task);
  w.key("createdAt").string(format_iso_us(q.created_us));
  w.key("partitions").number(q.partition_count);
  render_queue_counts(q, w);
  w.end_object();
}

}  // namespace queen::server
