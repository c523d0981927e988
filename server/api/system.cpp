// The system family: health, maintenance switches and metrics.
#include "server/api/common.h"
#include "server/observability.h"

namespace queen::server {

// 503 while no leader is known or the leader is settling.
HttpAnswer render_body(const HealthReply& reply, RenderAs) {
  JsonWriter w;
  w.begin_object();
  w.key("status").string(reply.settled ? "healthy" : "settling");
  w.key("engine").string("raft");
  w.key("version").string(kVersion);
  w.key("raft").begin_object();
  w.key("role").string(reply.role);
  w.key("nodeId").number(reply.node_id);
  w.key("leader").number(reply.leader);
  w.key("settled").boolean(reply.settled);
  w.key("term").number(reply.term);
  w.key("applied").number(reply.applied_index);
  w.key("commit").number(reply.commit_index);
  w.key("lag").number(reply.commit_index - std::min(reply.commit_index, reply.applied_index));
  w.key("storageReady").boolean(true);
  // The cluster format entries are written in, and the formats this node reads (1 up to its
  // QUEEN_RAFT_FORMAT_MAX); `fenced`: its disk is not the one the cluster admitted it with.
  w.key("clusterVersion").number(reply.cluster_version);
  w.key("kinds").begin_array();
  for (uint32_t k = 1; k <= reply.format_max; ++k) w.number(k);
  w.end_array();
  w.key("fenced").boolean(reply.fenced);
  w.key("apply").begin_object().key("failure").number(0).key("skipped").number(0).end_object();
  w.end_object();
  w.key("queues").number(reply.queues);
  w.key("partitions").number(reply.partitions);
  w.end_object();
  return HttpAnswer{reply.settled ? 200u : 503u, w.take(), 0};
}

HttpAnswer render_body(const MaintenanceReply& r, RenderAs as) {
  bool pop_route = as == RenderAs::maintenance_pop;
  JsonWriter w;
  w.begin_object();
  w.key("maintenanceMode").boolean(r.push);
  w.key("popMaintenanceMode").boolean(r.pop);
  if (!pop_route) {
    // Buffered pushes are in the log like any other, so the "buffer" never fails.
    w.key("bufferedMessages").number(r.buffered);
    w.key("bufferHealthy").boolean(true);
    w.key("bufferStats").begin_object();
    w.key("pendingCount").number(r.buffered);
    w.key("failedCount").number(0);
    w.key("dbHealthy").boolean(true);
    w.key("failedFiles").begin_object();
    w.key("count").number(0).key("totalBytes").number(0).key("totalMB").number(0);
    w.key("failoverCount").number(0).key("qos0Count").number(0);
    w.end_object();
    w.end_object();
  }
  std::string what =
      pop_route ? (r.pop ? "pops answer empty until pop maintenance is off" : "pops are served")
                : (r.push ? "pushes are stored and held back from consumers"
                          : "pushes are delivered as they come");
  w.key("message").string(what);
  w.end_object();
  return HttpAnswer{200, w.take(), 0};
}

Parsed parse_maintenance(std::string_view method, bool pop, std::string_view body,
                         const EdgeSettings& settings, IdSource& ids) {
  MaintenanceCmd cmd;
  cmd.pop = pop;
  if (method == "POST") {
    std::string error;
    auto doc = parse_object(body.empty() ? std::string_view("{}") : body, &error);
    if (!doc) return bad_request(error);
    FieldReader r(*doc, "");
    auto enabled = r.opt_bool("enabled");
    if (!r.ok() || !enabled) return bad_request("enabled (boolean) is required");
    cmd.enabled = *enabled;
  }
  Parsed p = to_node(ids, settings.stmt_timeout_ms, cmd);
  p.render = pop ? RenderAs::maintenance_pop : RenderAs::maintenance_push;
  return p;
}

Parsed parse_metrics(const EdgeSettings& settings, IdSource& ids, RenderAs as) {
  Parsed p = to_node(ids, settings.stmt_timeout_ms, MetricsCmd{});
  p.render = as;
  return p;
}

// ---------- public: rendering ----------

HttpAnswer render_body(const MetricsReply& reply, RenderAs as) {
  return as == RenderAs::metrics_json ? render_metrics_json(reply) : render_metrics(reply);
}

Parsed parse_health(const EdgeSettings& settings, IdSource& ids) {
  return to_node(ids, settings.stmt_timeout_ms, HealthCmd{});
}

}  // namespace queen::server
