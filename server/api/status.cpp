// The status and analytics family: what the web console and the 2.x dashboard read. The
// current state comes from the node (the queue list, a queue with its partitions, a message
// browse); the past from this process's status history (server/status_history.h). Lists are
// paged here, so a queue with 100k partitions answers one page of them.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <set>

#include "server/api/common.h"
#include "server/edge_counters.h"
#include "server/status_history.h"

namespace queen::server {
namespace {

constexpr uint64_t kPageLimitDefault = 100;
constexpr uint64_t kPageLimitMax = 1000;
constexpr size_t kBucketsMax = 2000;
constexpr int64_t kHourMs = 3'600'000;
constexpr uint64_t kMiB = 1u << 20;

std::string fixed(double v, int decimals = 2) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

std::string iso_ms(int64_t ms) {
  return format_iso_us(ms * 1000);
}

// ---------- query parameters ----------

// A time: ISO-8601, or Unix milliseconds.
std::optional<int64_t> read_time_ms(const std::string& text) {
  if (!text.empty() && text.find_first_not_of("0123456789") == std::string::npos) {
    auto n = parse_u64(text);
    if (n && *n < (uint64_t{1} << 53)) return static_cast<int64_t>(*n);
    return std::nullopt;
  }
  auto us = parse_iso_us(text);
  if (!us) return std::nullopt;
  return *us / 1000;
}

// from/to (default: the `default_range_ms` up to now) and the bucket: bucketSeconds, or the
// named `interval` (minute, hour, day), or the reference's default for the range.
std::optional<std::string> read_range(const QueryParams& q, int64_t now_ms,
                                      int64_t default_range_ms, ViewArgs* v) {
  v->to_ms = now_ms;
  v->from_ms = -1;
  const std::pair<const char*, int64_t*> times[] = {{"from", &v->from_ms}, {"to", &v->to_ms}};
  for (const auto& [name, slot] : times) {
    const std::string* text = query_text(q, name);
    if (!text) continue;
    auto ms = read_time_ms(*text);
    if (!ms) return std::string(name) + " must be an ISO-8601 time or Unix milliseconds";
    *slot = *ms;
  }
  if (v->from_ms < 0) v->from_ms = v->to_ms - default_range_ms;
  if (v->from_ms >= v->to_ms) return std::string("from must be before to");
  if (const std::string* text = query_text(q, "bucketSeconds")) {
    auto n = parse_u64(*text);
    if (!n || *n == 0 || *n > 86400 * 7) return std::string("bucketSeconds must be 1-604800");
    v->bucket_ms = static_cast<int64_t>(*n) * 1000;
  } else if (const std::string* text = query_text(q, "interval")) {
    if (*text == "minute")
      v->bucket_ms = 60'000;
    else if (*text == "hour")
      v->bucket_ms = kHourMs;
    else if (*text == "day")
      v->bucket_ms = 24 * kHourMs;
    else
      return std::string("interval must be minute, hour or day");
  } else {
    v->bucket_ms = default_bucket_ms(v->to_ms - v->from_ms);
  }
  if (static_cast<uint64_t>((v->to_ms - v->from_ms) / v->bucket_ms) >= kBucketsMax)
    return "the range holds more than " + std::to_string(kBucketsMax) +
           " buckets: widen bucketSeconds or narrow from/to";
  return std::nullopt;
}

bool matches(const std::string& name, const std::string& search) {
  return search.empty() || name.find(search) != std::string::npos;
}

// ---------- the current state ----------

struct Totals {
  PartitionStatsView counts;  // the six counters, over every queue
  uint64_t partitions = 0;
};

// A queue's six counters from its sums: pending counts only what no lease holds; completed is
// kept and consumed by queue mode.
PartitionStatsView counts_of(const QueueView& q) {
  PartitionStatsView c;
  c.total = q.messages;
  c.pending = q.pending - std::min(q.pending, q.processing);
  c.processing = q.processing;
  c.completed = q.messages - std::min(q.messages, q.pending);
  c.dead_letter = q.dlq;
  return c;
}

Totals totals_of(const QueuesReply& reply) {
  Totals t;
  for (const QueueView& q : reply.queues) {
    PartitionStatsView c = counts_of(q);
    t.counts.total += c.total;
    t.counts.pending += c.pending;
    t.counts.processing += c.processing;
    t.counts.completed += c.completed;
    t.counts.dead_letter += c.dead_letter;
    t.partitions += q.partition_count;
  }
  return t;
}

void render_pagination(const ViewArgs& v, uint64_t total, JsonWriter& w) {
  w.key("pagination").begin_object();
  w.key("limit").number(v.limit).key("offset").number(v.offset).key("total").number(total);
  w.end_object();
}

// The queue list sorted by name, filtered by the search.
std::vector<const QueueView*> listed(const QueuesReply& reply, const std::string& search) {
  std::vector<const QueueView*> out;
  for (const QueueView& q : reply.queues)
    if (matches(q.name, search)) out.push_back(&q);
  std::sort(out.begin(), out.end(),
            [](const QueueView* a, const QueueView* b) { return a->name < b->name; });
  return out;
}

HttpAnswer render_queue_page(const QueuesReply& reply, const ViewArgs& v) {
  std::vector<const QueueView*> all = listed(reply, v.search);
  JsonWriter w;
  w.begin_object().key("queues").begin_array();
  for (size_t i = v.offset; i < all.size() && i < v.offset + v.limit; ++i)
    render_queue_summary(*all[i], w);
  w.end_array();
  render_pagination(v, all.size(), w);
  w.end_object();
  return HttpAnswer{200, w.take(), 0};
}

void render_queue_config(const QueueView& q, JsonWriter& w) {
  const QueueOptions& o = q.options;
  w.key("queue").begin_object();
  w.key("id").decimal_string(q.id.value);
  w.key("name").string(q.name);
  w.key("namespace").string_or_null(o.ns);
  w.key("task").string_or_null(o.task);
  w.key("priority").number(o.priority);
  w.key("createdAt").string(format_iso_us(q.created_us));
  w.key("config").begin_object();
  w.key("leaseTime").number(o.lease_time_s);
  w.key("retryLimit").number(o.retry_limit);
  w.key("retryDelay").number(o.retry_delay_ms);
  w.key("ttl").number(o.ttl_s);
  w.key("maxQueueSize").number(o.max_size);
  w.key("deadLetterQueue").boolean(o.dead_letter_queue);
  w.end_object();
  w.end_object();
}

void render_partition(const PartitionStatsView& p, JsonWriter& w) {
  w.begin_object();
  w.key("id").decimal_string(p.id.value);
  w.key("name").string(p.name);
  w.key("createdAt").string(format_iso_us(p.created_us));
  w.key("messages");
  render_six_counts(p, w);
  w.key("lastActivity").string_or_null(iso_or_empty(p.newest_us));
  w.key("oldestMessage").string_or_null(iso_or_empty(p.oldest_us));
  w.key("newestMessage").string_or_null(iso_or_empty(p.newest_us));
  w.end_object();
}

// The node answered the page the view asks for (QueueGetCmd's offset, limit and search).
HttpAnswer render_queue_detail(const QueuesReply& reply, const ViewArgs& v) {
  if (reply.queues.empty()) return error_answer(404, "queue_not_found", "Queue not found");
  const QueueView& q = reply.queues.front();
  JsonWriter w;
  w.begin_object();
  render_queue_config(q, w);
  w.key("partitions").begin_array();
  for (const PartitionStatsView& p : q.partitions) render_partition(p, w);
  w.end_array();
  w.key("totals");
  render_six_counts(counts_of(q), w);
  render_pagination(v, q.partitions_matched, w);
  w.end_object();
  return HttpAnswer{200, w.take(), 0};
}

// ---------- the past ----------

std::vector<StatusBucket> buckets_of(const ViewArgs& v) {
  return bucketize(status_history().range(v.from_ms, v.to_ms), v.from_ms, v.to_ms, v.bucket_ms);
}

void render_time_range(const ViewArgs& v, JsonWriter& w) {
  w.key("timeRange").begin_object();
  w.key("from").string(iso_ms(v.from_ms)).key("to").string(iso_ms(v.to_ms));
  w.end_object();
  w.key("bucketMinutes").raw(fixed(static_cast<double>(v.bucket_ms) / 60'000.0, 3));
  w.key("bucketSeconds").number(v.bucket_ms / 1000);
}

double cpu_pct(uint64_t cpu_us, const StatusBucket& b) {
  return b.span_ms > 0 ? static_cast<double>(cpu_us) / (b.span_ms * 10.0) : 0.0;
}

void render_point(const StatusBucket& b, JsonWriter& w) {
  w.begin_object();
  w.key("timestamp").string(iso_ms(b.start_ms));
  w.key("sampleCount").number(b.samples);
  w.key("ingested").number(b.pushed);
  w.key("processed").number(b.acked);
  w.key("popMessages").number(b.popped);
  w.key("ingestedPerSecond").raw(fixed(b.per_second(b.pushed)));
  w.key("processedPerSecond").raw(fixed(b.per_second(b.acked)));
  w.key("popPerSecond").raw(fixed(b.per_second(b.popped)));
  w.key("avgLagMs").number(b.last ? b.last->lag_avg_ms : 0);
  w.key("maxLagMs").number(b.last ? b.last->lag_max_ms : 0);
  w.key("ackFailed").number(b.ack_failed);
  w.key("dlqCount").number(b.dlq_moves);
  w.key("queenRssMb").raw(fixed(b.last ? static_cast<double>(b.last->rss_bytes) / kMiB : 0.0));
  w.key("queenCpuUserPct").raw(fixed(cpu_pct(b.cpu_user_us, b)));
  w.key("queenCpuSysPct").raw(fixed(cpu_pct(b.cpu_system_us, b)));
  w.key("commitIndex").number(b.last ? b.last->commit_index : 0);
  w.key("appliedIndex").number(b.last ? b.last->applied_index : 0);
  w.end_object();
}

// The disk gate: closed (storage_full) at QUEEN_RAFT_DISK_HIGH_PCT, and the disk's use.
void render_disk(JsonWriter& w) {
  int pct = edge_counters().disk_used_pct.load(std::memory_order_relaxed);
  w.key("disk").begin_object();
  w.key("storageFull").boolean(edge_counters().storage_full.load(std::memory_order_relaxed));
  w.key("usedPct");
  if (pct >= 0)
    w.number(pct);
  else
    w.null();
  w.end_object();
}

void render_stats_age(int64_t now_ms, JsonWriter& w) {
  auto latest = status_history().latest();
  w.key("statsAge");
  if (latest)
    w.number(std::max<int64_t>(0, (now_ms - latest->at_ms) / 1000));
  else
    w.null();
}

void render_raft(JsonWriter& w) {
  auto s = status_history().latest().value_or(StatusSample{});
  w.key("raft").begin_object();
  w.key("role").string(s.role.empty() ? "unknown" : s.role);
  w.key("nodeId").number(s.node_id).key("leader").number(s.leader).key("term").number(s.term);
  w.key("commit").number(s.commit_index).key("applied").number(s.applied_index);
  w.key("lastIndex").number(s.last_index);
  w.end_object();
}

HttpAnswer render_status_page(const QueuesReply& reply, const ViewArgs& v) {
  JsonWriter w;
  w.begin_object();
  render_time_range(v, w);
  std::vector<StatusBucket> buckets = buckets_of(v);
  w.key("pointCount").number(buckets.size());
  w.key("throughput").begin_array();
  for (const StatusBucket& b : buckets) render_point(b, w);
  w.end_array();
  std::vector<const QueueView*> all = listed(reply, "");
  w.key("queues").begin_array();
  for (size_t i = 0; i < all.size() && i < kPageLimitDefault; ++i) {
    const QueueView& q = *all[i];
    w.begin_object();
    w.key("id").decimal_string(q.id.value).key("name").string(q.name);
    w.key("namespace").string_or_null(q.options.ns).key("task").string_or_null(q.options.task);
    w.key("partitions").number(q.partition_count);
    w.key("totalConsumed").number(q.messages - std::min(q.messages, q.pending));
    w.end_object();
  }
  w.end_array();
  w.key("queueCount").number(all.size());
  Totals t = totals_of(reply);
  w.key("messages");
  render_six_counts(t.counts, w);
  w.key("deadLetterQueue").begin_object().key("totalMessages").number(t.counts.dead_letter);
  w.end_object();
  render_raft(w);
  render_disk(w);
  render_stats_age(v.to_ms, w);
  w.end_object();
  return HttpAnswer{200, w.take(), 0};
}

struct Spread {
  uint64_t avg = 0, median = 0, min = 0, max = 0;
};

Spread spread_of(std::vector<uint64_t> values) {
  if (values.empty()) return {};
  std::sort(values.begin(), values.end());
  uint64_t sum = 0;
  for (uint64_t x : values) sum += x;
  return {sum / values.size(), values[values.size() / 2], values.front(), values.back()};
}

void render_spread(const char* name, const Spread& s, JsonWriter& w) {
  w.key(name).begin_object();
  w.key("avg").number(s.avg).key("median").number(s.median);
  w.key("min").number(s.min).key("max").number(s.max);
  w.end_object();
}

// Throughput over the last two samples.
StatusBucket latest_rates(int64_t now_ms) {
  std::vector<StatusSample> last = status_history().range(now_ms - kHourMs, now_ms);
  StatusBucket b;
  if (last.size() >= 2) {
    std::vector<StatusSample> two(last.end() - 2, last.end());
    auto buckets = bucketize(two, two[0].at_ms, two[1].at_ms + 1, two[1].at_ms + 1 - two[0].at_ms);
    if (!buckets.empty()) b = buckets.back();
  }
  return b;
}

HttpAnswer render_overview(const QueuesReply& reply, const ViewArgs& v) {
  Totals t = totals_of(reply);
  std::set<std::string> namespaces, tasks;
  std::vector<uint64_t> depth;
  for (const QueueView& q : reply.queues) {
    if (!q.options.ns.empty()) namespaces.insert(q.options.ns);
    if (!q.options.task.empty()) tasks.insert(q.options.task);
    depth.push_back(q.pending);
  }
  std::vector<uint64_t> lag_ms;
  if (auto s = status_history().latest())
    for (const QueueSample& q : s->queues)
      if (q.lag_avg_ms > 0) lag_ms.push_back(q.lag_avg_ms);
  JsonWriter w;
  w.begin_object();
  w.key("queues").number(reply.queues.size());
  w.key("partitions").number(t.partitions);
  w.key("namespaces").number(namespaces.size());
  w.key("tasks").number(tasks.size());
  w.key("messages");
  render_six_counts(t.counts, w);
  w.key("lag").begin_object();
  render_spread("time", spread_of(lag_ms), w);
  render_spread("offset", spread_of(depth), w);
  w.end_object();
  StatusBucket rates = latest_rates(v.to_ms);
  w.key("throughput").begin_object();
  w.key("ingestedPerSecond").raw(fixed(rates.per_second(rates.pushed)));
  w.key("processedPerSecond").raw(fixed(rates.per_second(rates.acked)));
  w.end_object();
  w.key("timestamp").string(iso_ms(v.to_ms));
  render_disk(w);
  render_stats_age(v.to_ms, w);
  w.end_object();
  return HttpAnswer{200, w.take(), 0};
}

// ---------- answered from the history alone ----------

HttpAnswer status_analytics(const ViewArgs& v, const std::string& interval) {
  JsonWriter w;
  w.begin_object().key("dataPoints").begin_array();
  for (const StatusBucket& b : buckets_of(v)) {
    w.begin_object().key("timestamp").string(iso_ms(b.start_ms));
    w.key("messages").number(b.pushed).end_object();
  }
  w.end_array();
  w.key("interval").string(interval);
  w.key("from").string(iso_ms(v.from_ms)).key("to").string(iso_ms(v.to_ms));
  w.end_object();
  return HttpAnswer{200, w.take(), 0};
}

const QueueSample* queue_in(const StatusSample& s, const std::string& name) {
  auto it = std::lower_bound(s.queues.begin(), s.queues.end(), name,
                             [](const QueueSample& q, const std::string& n) { return q.name < n; });
  return it != s.queues.end() && it->name == name ? &*it : nullptr;
}

// Each sampled queue's pushes and pops between consecutive samples, and its pop lag, by
// bucket.
struct QueueBucket {
  uint64_t pushed = 0, popped = 0, lag_avg_ms = 0, lag_max_ms = 0;
};
std::map<std::string, std::vector<QueueBucket>> queue_buckets(const ViewArgs& v,
                                                              const std::string& only) {
  std::vector<StatusSample> samples = status_history().range(v.from_ms, v.to_ms);
  std::vector<StatusBucket> buckets = bucketize({}, v.from_ms, v.to_ms, v.bucket_ms);
  std::map<std::string, std::vector<QueueBucket>> out;
  int64_t start = buckets.empty() ? 0 : buckets.front().start_ms;
  for (size_t i = 1; i < samples.size(); ++i) {
    const StatusSample& s = samples[i];
    if (s.at_ms < start || s.at_ms >= v.to_ms) continue;
    size_t at = static_cast<size_t>((s.at_ms - start) / v.bucket_ms);
    for (const QueueSample& q : s.queues) {
      if (!only.empty() && q.name != only) continue;
      std::vector<QueueBucket>& series = out[q.name];
      series.resize(buckets.size());
      const QueueSample* before = queue_in(samples[i - 1], q.name);
      QueueBucket& b = series[at];
      // A queue the sample before did not hold is new unless that sample was full.
      bool is_new = !before && samples[i - 1].queues.size() < kQueuesSampledMax;
      QueueSample zero;
      if (is_new) before = &zero;
      if (before) {
        b.pushed += q.appended > before->appended ? q.appended - before->appended : 0;
        b.popped += q.popped >= before->popped ? q.popped - before->popped : q.popped;
      }
      b.lag_avg_ms = q.lag_avg_ms;
      b.lag_max_ms = q.lag_max_ms;
    }
  }
  return out;
}

HttpAnswer queue_lag(const ViewArgs& v, const std::string& queue) {
  JsonWriter w;
  w.begin_array();
  for (const auto& [name, series] : queue_buckets(v, queue)) {
    for (size_t i = 0; i < series.size(); ++i) {
      const QueueBucket& b = series[i];
      if (b.popped == 0 && b.lag_max_ms == 0) continue;
      w.begin_object().key("queueName").string(name).key("popCount").number(b.popped);
      w.key("avgLagMs").number(b.lag_avg_ms).key("maxLagMs").number(b.lag_max_ms);
      w.key("bucketTime")
          .string(
              iso_ms(v.from_ms - v.from_ms % v.bucket_ms + static_cast<int64_t>(i) * v.bucket_ms));
      w.end_object();
    }
  }
  w.end_array();
  return HttpAnswer{200, w.take(), 0};
}

HttpAnswer queue_ops(const ViewArgs& v, const std::string& queue) {
  JsonWriter w;
  w.begin_object();
  render_time_range(v, w);
  auto by_queue = queue_buckets(v, queue);
  w.key("series").begin_array();
  for (const auto& [name, series] : by_queue) {
    for (size_t i = 0; i < series.size(); ++i) {
      if (series[i].pushed == 0 && series[i].popped == 0) continue;
      w.begin_object().key("bucket").string(
          iso_ms(v.from_ms - v.from_ms % v.bucket_ms + static_cast<int64_t>(i) * v.bucket_ms));
      w.key("queueName").string(name);
      w.key("pushMessages").number(series[i].pushed).key("popMessages").number(series[i].popped);
      w.end_object();
    }
  }
  w.end_array();
  w.key("queues").begin_array();
  for (const auto& entry : by_queue) w.string(entry.first);
  w.end_array();
  w.end_object();
  return HttpAnswer{200, w.take(), 0};
}

std::string host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "localhost";
  return name;
}

void render_system_point(const StatusBucket& b, JsonWriter& w) {
  w.begin_object().key("timestamp").string(iso_ms(b.start_ms));
  w.key("sampleCount").number(b.samples);
  w.key("metrics").begin_object();
  w.key("cpu").begin_object();
  w.key("userPct").raw(fixed(cpu_pct(b.cpu_user_us, b)));
  w.key("systemPct").raw(fixed(cpu_pct(b.cpu_system_us, b)));
  w.end_object();
  double rss_mb = b.last ? static_cast<double>(b.last->rss_bytes) / kMiB : 0.0;
  w.key("memory").begin_object().key("rssMb").raw(fixed(rss_mb)).end_object();
  w.key("raft").begin_object();
  w.key("role").string(b.last ? b.last->role : "");
  w.key("term").number(b.last ? b.last->term : 0);
  w.key("commit").number(b.last ? b.last->commit_index : 0);
  w.key("applied").number(b.last ? b.last->applied_index : 0);
  w.end_object();
  w.end_object();
  w.end_object();
}

HttpAnswer system_metrics(const ViewArgs& v, const EdgeSettings& settings) {
  std::vector<StatusBucket> buckets = buckets_of(v);
  uint64_t node = status_history().latest().value_or(StatusSample{}).node_id;
  JsonWriter w;
  w.begin_object();
  render_time_range(v, w);
  w.key("replicas").begin_array().begin_object();
  w.key("hostname").string(host_name()).key("port").number(settings.http_port);
  w.key("workerId").number(node);
  w.key("timeSeries").begin_array();
  for (const StatusBucket& b : buckets)
    if (b.samples > 0) render_system_point(b, w);
  w.end_array();
  w.end_object().end_array();
  w.key("replicaCount").number(1);
  w.key("pointCount").number(buckets.size());
  w.end_object();
  return HttpAnswer{200, w.take(), 0};
}

HttpAnswer worker_metrics(const ViewArgs& v, const EdgeSettings& settings) {
  std::vector<StatusBucket> buckets = buckets_of(v);
  uint64_t pushed = 0, acked = 0, popped = 0;
  JsonWriter w;
  w.begin_object();
  render_time_range(v, w);
  w.key("pointCount").number(buckets.size());
  w.key("timeSeries").begin_array();
  for (const StatusBucket& b : buckets) {
    render_point(b, w);
    pushed += b.pushed, acked += b.acked, popped += b.popped;
  }
  w.end_array();
  auto latest = status_history().latest().value_or(StatusSample{});
  w.key("workers").begin_array().begin_object();
  w.key("hostname").string(host_name()).key("port").number(settings.http_port);
  w.key("workerId").number(latest.node_id).key("role").string(latest.role);
  w.end_object().end_array();
  w.key("queues").begin_array();
  for (const QueueSample& q : latest.queues) w.string(q.name);
  w.end_array();
  w.key("summary").begin_object();
  w.key("ingested").number(pushed).key("processed").number(acked).key("popped").number(popped);
  w.end_object();
  w.end_object();
  return HttpAnswer{200, w.take(), 0};
}

// The file buffer of 1.x: pushes here go straight into the Raft log, so it is always empty.
HttpAnswer status_buffers() {
  JsonWriter w;
  w.begin_object().key("pending").number(0).key("failed").number(0);
  w.key("dbHealthy").boolean(true);
  w.key("worker").number(status_history().latest().value_or(StatusSample{}).node_id);
  w.key("note").string("no file buffer: pushes are written to the Raft log before the answer");
  w.end_object();
  return HttpAnswer{200, w.take(), 0};
}

Parsed with_view(Parsed p, RenderAs as, ViewArgs v) {
  p.render = as;
  p.view = std::move(v);
  return p;
}

Parsed timed(std::string_view route, const std::string& queue_filter, const ViewArgs& v,
             const QueryParams& q, const EdgeSettings& settings) {
  if (route == "status/analytics") {
    const std::string* interval = query_text(q, "interval");
    return answer_now(status_analytics(v, interval ? *interval : "hour"));
  }
  if (route == "analytics/queue-lag") return answer_now(queue_lag(v, queue_filter));
  if (route == "analytics/queue-ops") return answer_now(queue_ops(v, queue_filter));
  if (route == "analytics/system-metrics") return answer_now(system_metrics(v, settings));
  return answer_now(worker_metrics(v, settings));
}

}  // namespace

std::optional<std::string> read_page(const QueryParams& q, ViewArgs* v) {
  const std::pair<const char*, uint64_t*> numbers[] = {{"limit", &v->limit},
                                                       {"offset", &v->offset}};
  for (const auto& [name, slot] : numbers) {
    const std::string* text = query_text(q, name);
    if (!text) continue;
    bool digits = !text->empty() && text->find_first_not_of("0123456789") == std::string::npos;
    auto n = digits ? parse_u64(*text) : std::nullopt;
    if (!n) return std::string(name) + " must be a non-negative integer";
    *slot = *n;
  }
  v->limit = std::clamp<uint64_t>(v->limit, 1, kPageLimitMax);
  if (const std::string* s = query_text(q, "search")) v->search = *s;
  return std::nullopt;
}

HttpAnswer render_status(const QueuesReply& reply, RenderAs as, const ViewArgs& view) {
  switch (as) {
    case RenderAs::status_queues:
      return render_queue_page(reply, view);
    case RenderAs::status_queue:
      return render_queue_detail(reply, view);
    case RenderAs::overview:
      return render_overview(reply, view);
    default:
      return render_status_page(reply, view);
  }
}

HttpAnswer render_status_messages(const MessagesReply& reply) {
  JsonWriter w;
  w.begin_array();
  for (size_t i = 0; i < reply.messages.size(); ++i) {
    const PopMessage& m = reply.messages[i];
    w.begin_object();
    w.key("id").uuid(m.message_id);
    w.key("transactionId").string(m.transaction_id);
    w.key("partitionId").decimal_string(m.partition_id.value);
    w.key("queuePath").string(m.queue + "/" + m.partition);
    w.key("queue").string(m.queue).key("partition").string(m.partition);
    w.key("status").string(i < reply.states.size() ? reply.states[i].status : "pending");
    w.key("createdAt").string(format_iso_us(m.created_us));
    w.end_object();
  }
  w.end_array();
  return HttpAnswer{200, w.take(), 0};
}

Parsed parse_status(std::string_view route, const std::string& queue, const QueryParams& q,
                    const EdgeSettings& settings, IdSource& ids) {
  int64_t t = settings.stmt_timeout_ms;
  ViewArgs v;
  if (route == "status/buffers") return answer_now(status_buffers());
  if (route == "analytics/retention" || route == "analytics/queue-parked-replicas" ||
      route == "analytics/postgres-stats") {
    return answer_now(error_answer(
        404, "not_found",
        "not found: /api/v1/" + std::string(route) +
            " reports PostgreSQL tables and 1.x replicas, which this broker does not have"));
  }
  if (route == "stats/refresh") {  // 1.x rolled statistics up in PostgreSQL; these are live
    JsonWriter w;
    w.begin_object().key("skipped").boolean(false);
    w.key("note").string("status figures are computed at each read: nothing to refresh");
    w.end_object();
    return answer_now(HttpAnswer{200, w.take(), 0});
  }
  if (route == "status/queues/messages") {
    QueryParams browse = q;
    browse["queue"] = queue;
    if (!query_text(q, "limit")) browse["limit"] = "50";
    Parsed p = parse_message_browse(browse, settings, ids);
    p.render = RenderAs::status_messages;
    return p;
  }
  if (route == "status/queues" || route == "status/queue") {
    if (auto error = read_page(q, &v)) return bad_request(*error);
    if (route == "status/queue")
      return with_view(to_node(ids, t, QueueGetCmd{queue, v.offset, v.limit, v.search}),
                       RenderAs::status_queue, v);
    QueueListCmd cmd;
    if (const std::string* ns = query_text(q, "namespace")) cmd.ns = *ns;
    if (const std::string* task = query_text(q, "task")) cmd.task = *task;
    return with_view(to_node(ids, t, cmd), RenderAs::status_queues, v);
  }
  bool day = route == "status/analytics";
  if (auto error = read_range(q, ids.now_ms(), day ? 24 * kHourMs : kHourMs, &v))
    return bad_request(*error);
  if (route == "status") return with_view(to_node(ids, t, QueueListCmd{}), RenderAs::status, v);
  if (route == "resources/overview")
    return with_view(to_node(ids, t, QueueListCmd{}), RenderAs::overview, v);
  const std::string* only = query_text(q, "queue");
  return timed(route, only ? *only : "", v, q, settings);
}

}  // namespace queen::server
