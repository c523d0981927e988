#include "server/observability.h"

#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "io/real/latency.h"
#include "server/edge_counters.h"
#include "server/forward_counters.h"
#include "server/json_writer.h"

namespace queen::server {
namespace {

// Set when the binary starts (static initialization), for queen_uptime_seconds.
const auto kProcessStart = std::chrono::steady_clock::now();

constexpr const char* kContentType = "text/plain; version=0.0.4; charset=utf-8";

struct Label {
  std::string_view name;
  std::string_view value;
};

// Appends families and samples in the text exposition format.
class Exposition {
 public:
  void family(std::string_view name, std::string_view type, std::string_view help) {
    out_ += "# HELP ";
    out_ += name;
    out_ += ' ';
    out_ += help;
    out_ += "\n# TYPE ";
    out_ += name;
    out_ += ' ';
    out_ += type;
    out_ += '\n';
  }
  void sample(std::string_view name, std::initializer_list<Label> labels, std::string_view value) {
    out_ += name;
    if (labels.size() > 0) {
      out_ += '{';
      bool first = true;
      for (const Label& l : labels) {
        if (!first) out_ += ',';
        first = false;
        out_ += l.name;
        out_ += "=\"";
        append_escaped(utf8_lossy(l.value));
        out_ += '"';
      }
      out_ += '}';
    }
    out_ += ' ';
    out_ += value;
    out_ += '\n';
  }
  void sample(std::string_view name, std::initializer_list<Label> labels, uint64_t value) {
    sample(name, labels, std::to_string(value));
  }
  void sample(std::string_view name, std::initializer_list<Label> labels, int64_t value) {
    sample(name, labels, std::to_string(value));
  }
  // A family with a single unlabelled sample.
  void one(std::string_view name, std::string_view type, std::string_view help, uint64_t value) {
    family(name, type, help);
    sample(name, {}, value);
  }
  std::string take() { return std::move(out_); }

 private:
  void append_escaped(std::string_view v) {
    for (char c : v) {
      if (c == '\\') {
        out_ += "\\\\";
      } else if (c == '"') {
        out_ += "\\\"";
      } else if (c == '\n') {
        out_ += "\\n";
      } else {
        out_ += c;
      }
    }
  }

  std::string out_;
};

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", s);
  return buf;
}

std::string bound_text(int64_t us) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", static_cast<double>(us) / 1e6);
  return buf;
}

// The samples of one histogram: cumulative buckets, +Inf, sum (seconds) and count.
void histogram(Exposition& x, const std::string& name, std::string_view label,
               std::string_view value, const real::LatencyHistogram::Snapshot& s) {
  const auto& bounds = real::LatencyHistogram::kBoundsUs;
  std::string bucket = name + "_bucket";
  for (size_t i = 0; i <= bounds.size(); ++i) {
    std::string le = i < bounds.size() ? bound_text(bounds[i]) : "+Inf";
    if (label.empty()) {
      x.sample(bucket, {{"le", le}}, s.cumulative[i]);
    } else {
      x.sample(bucket, {{label, value}, {"le", le}}, s.cumulative[i]);
    }
  }
  char sum[32];
  std::snprintf(sum, sizeof sum, "%.6f", static_cast<double>(s.sum_us) / 1e6);
  if (label.empty()) {
    x.sample(name + "_sum", {}, sum);
    x.sample(name + "_count", {}, s.count);
  } else {
    x.sample(name + "_sum", {{label, value}}, sum);
    x.sample(name + "_count", {{label, value}}, s.count);
  }
}

void render_latencies(Exposition& x) {
  const real::ProcessLatencies& l = real::process_latencies();
  x.family("queen_request_duration_seconds", "histogram",
           "Time from a request's dispatch at the edge to its answer, by kind.");
  for (size_t k = 0; k < real::kRequestKinds; ++k) {
    histogram(x, "queen_request_duration_seconds", "kind",
              real::request_kind_name(static_cast<real::RequestKind>(k)), l.requests[k].snapshot());
  }
  x.family("queen_fsync_duration_seconds", "histogram", "Time of each fdatasync of a log file.");
  histogram(x, "queen_fsync_duration_seconds", "", "", l.fsync.snapshot());
  x.family("queen_handoff_wait_seconds", "histogram",
           "Time work handed from one thread to the next waited for that thread, by stage: "
           "command (edge to node), disk (node to disk writer), sync (fsync done to node), "
           "reply (node to edge).");
  for (size_t k = 0; k < real::kHandoffs; ++k) {
    histogram(x, "queen_handoff_wait_seconds", "stage",
              real::handoff_name(static_cast<real::Handoff>(k)), l.handoffs[k].snapshot());
  }
}

// The node's commit latency in the edge's histogram form (the bounds are the same).
real::LatencyHistogram::Snapshot cumulative(const LatencyBuckets& b) {
  real::LatencyHistogram::Snapshot s;
  uint64_t below = 0;
  for (size_t i = 0; i < b.counts.size(); ++i) s.cumulative[i] = below += b.counts[i];
  s.count = b.count;
  s.sum_us = b.sum_us;
  return s;
}

// What the operator alerts on: the disk gate, admission outcomes, slow commands, commit time.
void render_alerting(const MetricsReply& m, Exposition& x) {
  const EdgeCounters& e = edge_counters();
  x.one("queen_raft_storage_full", "gauge",
        "1 while the disk gate refuses writes that grow storage (QUEEN_RAFT_DISK_HIGH_PCT).",
        e.storage_full.load() ? 1 : 0);
  x.family("queen_raft_admit_total", "counter",
           "Requests by admission outcome: admitted at once, admitted after waiting, refused "
           "429 (overloaded: the budget stayed full; queue_full: the node's queue was full), "
           "refused 507 (storage_full).");
  for (size_t k = 0; k < kAdmitOutcomes; ++k) {
    x.sample("queen_raft_admit_total",
             {{"outcome", admit_outcome_name(static_cast<AdmitOutcome>(k))}}, e.admit[k].load());
  }
  x.one("queen_raft_admit_in_use_bytes", "gauge",
        "Bytes of the admission budget (QUEEN_RAFT_ADMIT_MAX_MB) held by requests whose "
        "answers are not yet sent.",
        e.admit_in_use_bytes.load());
  x.one("queen_raft_admit_waiting", "gauge", "Requests waiting for admission permits.",
        e.admit_waiting.load());
  x.one("queen_http_serving_on_node", "gauge",
        "1 while the node thread serves the connections itself (QUEEN_HTTP_THREADS 0, or "
        "QUEEN_HTTP_NODE_BUSY_MAX and few requests in flight), 0 while the edge threads do.",
        e.serving_on_node.load() ? 1 : 0);
  x.one("queen_http_connections_moved_total", "counter",
        "Connections moved between the node thread and an edge thread as the placement changed.",
        e.connections_moved.load());
  x.one("queen_raft_slow_commands_total", "counter",
        "Commands answered later than QUEEN_RAFT_SLOW_COMMAND_MS after dispatch (long polls "
        "and fetches that wait for minBytes excepted).",
        e.slow_commands.load());
  x.family("queen_raft_commit_duration_seconds", "histogram",
           "Time from an entry's sealing to its commit, on the node that proposed it.");
  histogram(x, "queen_raft_commit_duration_seconds", "", "", cumulative(m.traffic.commit_latency));
}

void render_forwarding(const MetricsReply& m, Exposition& x) {
  const ForwardCounters& c = forward_counters();
  x.family("queen_raft_forwarded_commands_total", "counter",
           "Prepared commands: forwarded to the leader (sent), served for a peer (served), "
           "failed with their stream (lost), sent again under the same request id after a "
           "retry answer, a failed stream or a change of leader (retried), answered "
           "outcome_unknown at their deadline (outcome_unknown).");
  x.sample("queen_raft_forwarded_commands_total", {{"event", "sent"}}, c.sent.load());
  x.sample("queen_raft_forwarded_commands_total", {{"event", "served"}}, c.served.load());
  x.sample("queen_raft_forwarded_commands_total", {{"event", "lost"}}, c.lost.load());
  x.sample("queen_raft_forwarded_commands_total", {{"event", "retried"}}, m.forward_retries);
  x.sample("queen_raft_forwarded_commands_total", {{"event", "outcome_unknown"}},
           m.forward_unknown);
  x.one("queen_raft_leadership_transfers_total", "counter",
        "Graceful stops that handed leadership to another voter.", m.transfers);
}

void render_process(Exposition& x) {
  double up =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - kProcessStart).count();
  x.family("queen_uptime_seconds", "gauge", "Seconds since this process started.");
  x.sample("queen_uptime_seconds", {}, seconds_text(up));
  x.family("queen_build_info", "gauge", "Always 1; the version is a label.");
  x.sample("queen_build_info", {{"version", kVersion}}, uint64_t{1});
  x.one("queen_process_resident_memory_bytes", "gauge", "Resident memory of this process.",
        resident_bytes());
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  x.one("queen_cpu_user_microseconds_total", "counter", "User CPU time of this process.",
        micros(ru.ru_utime));
  x.one("queen_cpu_system_microseconds_total", "counter", "System CPU time of this process.",
        micros(ru.ru_stime));
}

void render_raft(const MetricsReply& m, Exposition& x) {
  x.one("queen_raft_node_id", "gauge", "This node's id in QUEEN_RAFT_PEERS.", m.node_id);
  x.family("queen_raft_role", "gauge", "1 for the role this node holds now, 0 for the others.");
  for (const char* role : {"leader", "follower", "pre_candidate", "candidate"})
    x.sample("queen_raft_role", {{"role", role}}, uint64_t{m.role == role ? 1u : 0u});
  x.one("queen_raft_term", "gauge", "The node's current Raft term.", m.term);
  x.one("queen_raft_leader", "gauge", "The node id of the known leader (0: none known).", m.leader);
  x.one("queen_raft_writable", "gauge",
        "1 when this node leads and has applied an entry of its term (it plans writes).",
        m.writable ? 1 : 0);
  x.family("queen_raft_index", "gauge", "Raft log indexes: commit, applied, last (own log).");
  x.sample("queen_raft_index", {{"kind", "commit"}}, m.commit_index);
  x.sample("queen_raft_index", {{"kind", "applied"}}, m.applied_index);
  x.sample("queen_raft_index", {{"kind", "last"}}, m.last_index);
  x.one("queen_raft_inflight", "gauge", "Log entries written or proposed, not yet applied.",
        m.inflight_entries);
  x.one("queen_raft_entries_committed_total", "counter", "Log entries committed and applied.",
        m.entries_committed);
  x.one("queen_raft_fsyncs_total", "counter", "Completed fsyncs of log files.", m.syncs);
  x.one("queen_raft_entries_read_back_total", "counter",
        "Entries read back from the log files to catch a follower up.", m.entries_read_back);
  x.one("queen_store_checkpoints_total", "counter", "Store checkpoints written and synced.",
        m.store_checkpoints);
  x.one("queen_log_files_reclaimed_total", "counter",
        "Log files removed once a checkpoint held everything they carried.", m.log_files_reclaimed);
  x.one("queen_raft_snapshots_sent_total", "counter",
        "Snapshots started to followers the log could no longer catch up.", m.snapshots_sent);
  x.one("queen_raft_snapshots_installed_total", "counter",
        "Snapshots this node installed from a leader.", m.snapshots_installed);
  x.one("queen_raft_messages_refused_total", "counter",
        "Peer messages refused: malformed, a term or index out of bounds, or not from a member.",
        m.raft_messages_refused);
  x.one("queen_raft_recovered_entries", "gauge", "Entries replayed from disk at start.",
        m.recovered_entries);
  x.one("queen_raft_torn_tails_cut", "gauge", "Torn log tails cut at start.", m.torn_tails_cut);
}

void render_traffic(const MetricsReply& m, Exposition& x) {
  const TrafficCounters& t = m.traffic;
  x.one("queen_push_requests_total", "counter", "Push requests answered.", t.push_requests);
  x.family("queen_push_messages_total", "counter", "Pushed messages by outcome.");
  x.sample("queen_push_messages_total", {{"status", "queued"}}, t.push_queued);
  x.sample("queen_push_messages_total", {{"status", "duplicate"}}, t.push_duplicates);
  x.sample("queen_push_messages_total", {{"status", "error"}}, t.push_failed);
  x.family("queen_pop_requests_total", "counter", "Pops answered, with messages or empty.");
  x.sample("queen_pop_requests_total", {{"result", "delivered"}}, t.pop_delivered);
  x.sample("queen_pop_requests_total", {{"result", "empty"}}, t.pop_empty);
  x.one("queen_pop_messages_total", "counter", "Messages handed out by pops.", t.pop_messages);
  x.family("queen_ack_total", "counter", "Acks answered, by result.");
  x.sample("queen_ack_total", {{"result", "success"}}, t.ack_success);
  x.sample("queen_ack_total", {{"result", "failed"}}, t.ack_failed);
  x.family("queen_transactions_total", "counter", "Transactions answered, by outcome.");
  x.sample("queen_transactions_total", {{"outcome", "committed"}}, t.txn_committed);
  x.sample("queen_transactions_total", {{"outcome", "rolled_back"}}, t.txn_rolled_back);
  x.one("queen_messages_deleted_total", "counter", "Messages deleted through the API.",
        t.messages_deleted);
  x.family("queen_errors_total", "counter", "Error answers of the node, by code.");
  for (const auto& [code, n] : t.errors)
    x.sample("queen_errors_total", {{"code", std::string(errc_code(code))}}, n);
  x.one("queen_consume_checkpoints_total", "counter", "Checkpoint entries logged.", m.checkpoints);
  x.one("queen_consume_lease_expiries_total", "counter", "Leases that expired unacked.",
        m.lease_expiries);
  x.one("queen_consume_redeliveries_total", "counter", "Messages delivered again.", m.redeliveries);
  x.one("queen_consume_dlq_moves_total", "counter", "Messages moved to the dead-letter list.",
        m.dlq_moves);
}

void render_dedup(const MetricsReply& m, Exposition& x) {
  x.one("queen_dedup_checks_total", "counter", "transactionIds looked up in the dedup window.",
        m.dedup_checks);
  x.one("queen_dedup_duplicates_total", "counter", "Lookups that found the original.",
        m.dedup_duplicates);
  x.family("queen_dedup_exact_checks_total", "counter",
           "Exact checks: an offset a partition's hash ring named, or a small partition's "
           "window scanned whole.");
  x.sample("queen_dedup_exact_checks_total", {{"by", "ring_candidate"}}, m.dedup_ring_candidates);
  x.sample("queen_dedup_exact_checks_total", {{"by", "cold_scan"}}, m.dedup_cold_scans);
  x.one("queen_dedup_ring_bytes", "gauge", "Memory of the partitions' dedup hash rings.",
        m.dedup_ring_bytes);
  x.one("queen_dedup_ring_catch_ups_total", "counter",
        "Dedup rings read back at a start and brought up to the rows written after them.",
        m.dedup_ring_catch_ups);
  x.one("queen_dedup_ring_evictions_total", "counter",
        "Dedup rings dropped, least recently used first, to keep them within "
        "QUEEN_RAFT_DEDUP_FRONT_MB; each warms again from its rows at its next use.",
        m.dedup_ring_evictions);
  x.one("queen_row_hash_reads_total", "counter",
        "Message records read for their transactionId hashes (dedup checks, acks).",
        m.row_hash_reads);
  x.one("queen_row_hash_cache_bytes", "gauge",
        "Memory of the append rows' hashes cached (QUEEN_ROW_HASH_CACHE_MB bounds it).",
        m.row_hash_cache_bytes);
}

void render_queues(const MetricsReply& m, Exposition& x) {
  uint64_t partitions = 0, dlq = 0;
  for (const QueueMetrics& q : m.queues) {
    partitions += q.partitions;
    dlq += q.dlq;
  }
  x.one("queen_queues", "gauge", "Queues.", m.queues.size());
  x.one("queen_partitions", "gauge", "Partitions over all queues.", partitions);
  x.family("queen_queue_depth", "gauge",
           "Messages not yet consumed in queue mode (__QUEUE_MODE__), per queue.");
  for (const QueueMetrics& q : m.queues)
    x.sample("queen_queue_depth", {{"queue", q.queue}}, q.depth);
  x.family("queen_queue_messages_total", "counter", "Messages appended to the queue.");
  for (const QueueMetrics& q : m.queues)
    x.sample("queen_queue_messages_total", {{"queue", q.queue}}, q.messages);
  x.family("queen_queue_messages_deleted_total", "counter", "Messages of the queue deleted.");
  for (const QueueMetrics& q : m.queues)
    x.sample("queen_queue_messages_deleted_total", {{"queue", q.queue}}, q.deleted);
  x.family("queen_queue_partitions", "gauge", "Partitions of the queue.");
  for (const QueueMetrics& q : m.queues)
    x.sample("queen_queue_partitions", {{"queue", q.queue}}, uint64_t{q.partitions});
  x.family("queen_dlq_depth", "gauge", "Dead letters over all queues.");
  x.sample("queen_dlq_depth", {{"scope", "cluster"}}, dlq);
  x.family("queen_dlq_depth_by_queue", "gauge", "Dead letters of the queue.");
  for (const QueueMetrics& q : m.queues)
    x.sample("queen_dlq_depth_by_queue", {{"queue", q.queue}}, q.dlq);
  x.family("queen_queue_pop_lag_milliseconds", "gauge",
           "How old messages were when pops handed them out, over the last minute or two: "
           "average and maximum (0 when nothing was popped).");
  for (const QueueMetrics& q : m.queues) {
    x.sample("queen_queue_pop_lag_milliseconds", {{"queue", q.queue}, {"stat", "avg"}},
             q.pop_lag_avg_ms);
    x.sample("queen_queue_pop_lag_milliseconds", {{"queue", q.queue}, {"stat", "max"}},
             q.pop_lag_max_ms);
  }
}

// Lag lives in the leader's consumption engine: a follower renders the families empty.
void render_groups(const MetricsReply& m, Exposition& x) {
  x.family("queen_consumer_group_lag_messages", "gauge",
           "Messages the group has not consumed, over the queue's partitions (leader only).");
  for (const GroupLagMetrics& g : m.groups) {
    x.sample("queen_consumer_group_lag_messages", {{"queue", g.queue}, {"group", g.group}},
             g.lag_messages);
  }
  x.family("queen_consumer_group_lag_seconds", "gauge",
           "Age of the oldest message the group has not consumed (leader only).");
  for (const GroupLagMetrics& g : m.groups) {
    x.sample("queen_consumer_group_lag_seconds", {{"queue", g.queue}, {"group", g.group}},
             g.lag_seconds);
  }
  x.family("queen_consumer_group_partitions_with_lag", "gauge",
           "Partitions where the group has messages to consume (leader only).");
  for (const GroupLagMetrics& g : m.groups) {
    x.sample("queen_consumer_group_partitions_with_lag", {{"queue", g.queue}, {"group", g.group}},
             uint64_t{g.partitions_with_lag});
  }
}

}  // namespace

uint64_t resident_bytes() {
  long pages = 0, resident = 0;
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return 0;
  int n = std::fscanf(f, "%ld %ld", &pages, &resident);
  std::fclose(f);
  long page = sysconf(_SC_PAGESIZE);
  return n == 2 && resident > 0 && page > 0 ? static_cast<uint64_t>(resident) * page : 0;
}

uint64_t micros(const timeval& t) {
  return static_cast<uint64_t>(t.tv_sec) * 1000000 + static_cast<uint64_t>(t.tv_usec);
}

HttpAnswer render_metrics(const MetricsReply& reply) {
  Exposition x;
  render_process(x);
  render_latencies(x);
  render_raft(reply, x);
  render_forwarding(reply, x);
  render_alerting(reply, x);
  render_traffic(reply, x);
  render_dedup(reply, x);
  render_queues(reply, x);
  render_groups(reply, x);
  HttpAnswer a{200, x.take(), 0};
  a.content_type = kContentType;
  return a;
}

HttpAnswer render_metrics_json(const MetricsReply& reply) {
  double up =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - kProcessStart).count();
  uint64_t requests = 0;
  for (const auto& h : real::process_latencies().requests) requests += h.snapshot().count;
  uint64_t messages = reply.traffic.push_queued;
  auto rate = [&](uint64_t n) { return up > 0 ? static_cast<int64_t>(n / up) : 0; };
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  JsonWriter w;
  w.begin_object();
  w.key("uptime").number(static_cast<int64_t>(up));
  w.key("requests").begin_object().key("total").number(requests);
  w.key("rate").number(rate(requests)).end_object();
  w.key("messages").begin_object().key("total").number(messages);
  w.key("rate").number(rate(messages)).end_object();
  w.key("database").begin_object().key("poolSize").number(0).key("idleConnections").number(0);
  w.key("waitingRequests").number(0).end_object();
  w.key("memory").begin_object().key("rss").number(resident_bytes()).key("heapTotal").number(0);
  w.key("heapUsed").number(0).key("external").number(0).key("arrayBuffers").number(0);
  w.end_object();
  w.key("cpu").begin_object().key("user").number(micros(ru.ru_utime));
  w.key("system").number(micros(ru.ru_stime)).end_object();
  w.end_object();
  return HttpAnswer(200, w.take());
}

HttpAnswer render_queue_rollup(const QueuesReply& reply, bool by_task) {
  struct Sum {
    uint64_t queues = 0, partitions = 0, total = 0, pending = 0;
  };
  std::map<std::string, Sum> sums;
  for (const QueueView& q : reply.queues) {
    const std::string& key = by_task ? q.options.task : q.options.ns;
    if (key.empty()) continue;
    Sum& s = sums[key];
    ++s.queues;
    s.partitions += q.partition_count;
    s.total += q.messages;
    s.pending += q.pending;
  }
  const char* name = by_task ? "task" : "namespace";
  JsonWriter w;
  w.begin_object().key(by_task ? "tasks" : "namespaces").begin_array();
  for (const auto& [key, s] : sums) {
    w.begin_object();
    w.key(name).string(utf8_lossy(key));
    w.key("queues").number(s.queues);
    w.key("partitions").number(s.partitions);
    w.key("messages").begin_object();
    w.key("total").number(s.total);
    w.key("pending").number(s.pending);
    w.end_object();
    w.end_object();
  }
  w.end_array().end_object();
  return HttpAnswer{200, w.take(), 0};
}

}  // namespace queen::server
