// The consumer-group family: lists, details, lagging rows, deletes, subscription, seeks.
#include "server/api/common.h"

namespace queen::server {

namespace {

const char* mode_name(SubscriptionMode m) {
  switch (m) {
    case SubscriptionMode::all:
      return "all";
    case SubscriptionMode::new_only:
      return "new";
    case SubscriptionMode::from_time:
      return "timestamp";
  }
  return "all";
}

void render_group_summary(const GroupView& g, JsonWriter& w) {
  w.begin_object();
  w.key("name").string(g.group);
  w.key("topics").begin_array().string(g.queue).end_array();
  w.key("queueName").string(g.queue);
  w.key("members").number(g.members);
  w.key("partitionsWithLag").number(g.partitions_with_lag);
  w.key("totalLag").number(g.total_lag);
  w.key("maxTimeLag").number(g.max_time_lag_s);
  // Dead: no partition of the queue has a cursor of the group (it never consumed there).
  w.key("state").string(g.members == 0 ? "Dead" : g.max_time_lag_s > 300 ? "Lagging" : "Stable");
  w.key("subscriptionMode").string(mode_name(g.mode));
  w.key("subscriptionTimestamp").string_or_null(iso_or_empty(g.subscription_us));
  w.end_object();
}

void render_group_partition(const GroupPartitionView& p, JsonWriter& w) {
  w.begin_object();
  w.key("partition").string(p.partition);
  w.key("partitionId").decimal_string(p.partition_id.value);
  w.key("workerId").string_or_null(lease_text(p.lease_id));
  w.key("lastConsumedAt").string_or_null(iso_or_empty(p.last_consumed_us));
  w.key("totalConsumed").number(p.total_consumed);
  w.key("offsetLag").number(p.offset_lag);
  w.key("timeLagSeconds").number(p.time_lag_s);
  w.key("leaseActive").boolean(p.lease_active);
  w.key("cursor").number(p.cursor.value);
  w.end_object();
}

const std::string& partition_name(const GroupPartitionView& p) {
  return p.partition;
}

// Details: an object keyed by queue name.
HttpAnswer render_group_details(const GroupsReply& reply) {
  JsonWriter w;
  w.begin_object();
  for (const GroupView& g : reply.groups) {
    w.key(g.queue).begin_object();
    w.key("partitions").begin_array();
    for (const GroupPartitionView* p : by_name(g.partitions, partition_name))
      render_group_partition(*p, w);
    w.end_array();
    w.key("totalLag").number(g.total_lag);
    w.key("subscriptionMode").string(mode_name(g.mode));
    w.end_object();
  }
  w.end_object();
  return HttpAnswer{200, w.take(), 0};
}

}  // namespace

// The node answered the page the view asks for (GroupDetailsCmd's queue, offset, limit, search).
HttpAnswer render_group_page(const GroupsReply& reply, const ViewArgs& v) {
  JsonWriter w;
  w.begin_object();
  for (const GroupView& g : reply.groups) {
    w.key(g.queue).begin_object();
    w.key("partitions").begin_array();
    for (const GroupPartitionView& p : g.partitions) render_group_partition(p, w);
    w.end_array();
    w.key("totalLag").number(g.total_lag);
    w.key("subscriptionMode").string(mode_name(g.mode));
    w.key("pagination").begin_object();
    w.key("limit").number(v.limit).key("offset").number(v.offset);
    w.key("total").number(g.partitions_matched);
    w.end_object();
    w.end_object();
  }
  w.end_object();
  return HttpAnswer{200, w.take(), 0};
}

namespace {

// GET /api/v1/consumer-groups/lagging: one row per lagging (group, partition).
HttpAnswer render_lagging(const GroupsReply& reply) {
  JsonWriter w;
  w.begin_array();
  for (const GroupView& g : reply.groups) {
    for (const GroupPartitionView* row : by_name(g.partitions, partition_name)) {
      const GroupPartitionView& p = *row;
      w.begin_object();
      w.key("consumer_group").string(g.group);
      w.key("queue_name").string(g.queue);
      w.key("partition_name").string(p.partition);
      w.key("partition_id").decimal_string(p.partition_id.value);
      w.key("worker_id").string_or_null(lease_text(p.lease_id));
      w.key("offset_lag").number(p.offset_lag);
      w.key("time_lag_seconds").number(p.time_lag_s);
      w.key("lag_hours").number(p.time_lag_s / 3600);
      w.key("oldest_unconsumed_at").string_or_null(iso_or_empty(p.oldest_unconsumed_us));
      w.key("last_consumed_at").string_or_null(iso_or_empty(p.last_consumed_us));
      w.end_object();
    }
  }
  w.end_array();
  return HttpAnswer{200, w.take(), 0};
}

// Details carry partitions and a list never does, so the reply tells them apart when the
// route's hint is not at hand.
HttpAnswer render_groups(const GroupsReply& reply, RenderAs as) {
  if (reply.lagging) return render_lagging(reply);
  bool details = std::any_of(reply.groups.begin(), reply.groups.end(),
                             [](const GroupView& g) { return !g.partitions.empty(); });
  if (as == RenderAs::group_details || details) return render_group_details(reply);
  JsonWriter w;
  w.begin_array();
  for (const GroupView& g : reply.groups) render_group_summary(g, w);
  w.end_array();
  return HttpAnswer{200, w.take(), 0};
}

// One shape for delete, seek and subscription changes: the fields each of them names.
// Each consumer-group change answers its own shape; a queue deletion says whether it existed.
HttpAnswer render_group_change(const GroupChangeReply& r, RenderAs as) {
  JsonWriter w;
  w.begin_object();
  if (r.group.empty()) {                // a queue deletion
    bool existed = r.metadata_deleted;  // deleted either way: no such queue is left
    w.key("deleted").boolean(true).key("queue").string(r.queue).key("existed").boolean(existed);
    w.end_object();
    return HttpAnswer{200, w.take(), 0};
  }
  w.key("success").boolean(true);
  w.key("consumerGroup").string(r.group);
  if (as == RenderAs::group_subscription) {
    w.key("newTimestamp").string(format_iso_us(r.timestamp_us));
    w.key("rowsUpdated").number(r.partitions);
  } else if (as == RenderAs::group_seek) {
    w.key("queueName").string(r.queue);
    w.key("seekToEnd").boolean(r.to_end);
    w.key("targetTimestamp").string_or_null(r.to_end ? "" : format_iso_us(r.timestamp_us));
    w.key("partitionsUpdated").number(r.partitions);
  } else if (as == RenderAs::partition_seek) {
    w.key("queueName").string(r.queue);
    w.key("partitionName").string(r.partition);
    w.key("updated").boolean(r.partitions > 0);
    w.key("cursorMovedTo");
    r.moved_to >= 0 ? w.number(static_cast<uint64_t>(r.moved_to)) : w.null();
  } else {  // a group deletion
    if (!r.queue.empty()) w.key("queueName").string(r.queue);
    w.key("deletedPartitions").number(r.partitions);
    w.key("metadataDeleted").boolean(r.metadata_deleted);
  }
  w.end_object();
  return HttpAnswer{200, w.take(), 0};
}

}  // namespace

namespace {

Parsed parse_subscription(const std::string& group, std::string_view body, int64_t timeout_ms,
                          IdSource& ids) {
  std::string error;
  auto doc = parse_object(body, &error);
  if (!doc) return bad_request(error);
  FieldReader r(*doc, "");
  auto ts = r.opt_string("subscriptionTimestamp");
  if (!r.ok()) return bad_request(r.error());
  if (!ts) return bad_request("Missing subscriptionTimestamp in request body");
  auto us = parse_iso_us(*ts);
  if (!us) return bad_request("subscriptionTimestamp must be an ISO-8601 time");
  return to_node(ids, timeout_ms, SubscriptionCmd{group, *us});
}

Parsed parse_seek(const std::string& group, const std::string& queue, std::string_view body,
                  int64_t timeout_ms, IdSource& ids) {
  std::string error;
  auto doc = parse_object(body.empty() ? std::string_view("{}") : body, &error);
  if (!doc) return bad_request(error);
  FieldReader r(*doc, "");
  auto to_end = r.opt_bool("toEnd");
  auto ts = r.opt_string("timestamp");
  if (!r.ok()) return bad_request(r.error());
  SeekCmd cmd{group, queue, "", to_end.value_or(false), 0};
  if (!cmd.to_end) {
    if (!ts) return bad_request("Must specify either 'toEnd': true or 'timestamp'");
    auto us = parse_iso_us(*ts);
    if (!us) return bad_request("timestamp must be an ISO-8601 time");
    cmd.timestamp_us = *us;
  }
  return to_node(ids, timeout_ms, cmd);
}

}  // namespace

Parsed parse_group_list(const RouteCall& c) {
  return to_node(c.ids, c.settings.stmt_timeout_ms, GroupListCmd{});
}

Parsed parse_group_lagging(const RouteCall& c) {
  GroupListCmd cmd;
  cmd.lagging_min_s = 3600;
  if (auto it = c.query.find("minLagSeconds"); it != c.query.end()) {
    auto v = parse_u64(it->second);  // digits only: no sign, no blank
    if (!v) return bad_request("minLagSeconds must be a non-negative integer");
    cmd.lagging_min_s = static_cast<int64_t>(std::min<uint64_t>(*v, INT64_MAX / 2));
  }
  return to_node(c.ids, c.settings.stmt_timeout_ms, cmd);
}

// With `limit` (or `offset`, `search`, `queue`), each queue's partitions come a page at a
// time with their `pagination`; without, the reference's whole answer.
Parsed parse_group_details(const RouteCall& c) {
  GroupDetailsCmd cmd{c.params.at(0)};
  ViewArgs view;
  bool paged = false;
  for (const char* key : {"limit", "offset", "search", "queue"}) {
    if (c.query.count(key) == 0) continue;
    if (auto error = read_page(c.query, &view)) return bad_request(*error);
    if (const std::string* q = query_text(c.query, "queue")) view.queue = *q;
    cmd.queue = view.queue;
    cmd.offset = view.offset;
    cmd.limit = view.limit;
    cmd.search = view.search;
    paged = true;
    break;
  }
  Parsed p = to_node(c.ids, c.settings.stmt_timeout_ms, std::move(cmd));
  p.render = paged ? RenderAs::group_page : RenderAs::group_details;
  p.view = view;
  return p;
}

Parsed parse_group_delete(const RouteCall& c) {
  std::string error;
  bool metadata = query_bool(c.query, "deleteMetadata", true, &error);
  if (!error.empty()) return bad_request(error);
  std::string queue = c.params.size() > 1 ? c.params[1] : "";
  return to_node(c.ids, c.settings.stmt_timeout_ms, GroupDeleteCmd{c.params[0], queue, metadata});
}

Parsed parse_group_subscription(const RouteCall& c) {
  Parsed p = parse_subscription(c.params.at(0), c.body, c.settings.stmt_timeout_ms, c.ids);
  p.render = RenderAs::group_subscription;
  return p;
}

Parsed parse_group_seek(const RouteCall& c) {
  Parsed p = parse_seek(c.params.at(0), c.params.at(1), c.body, c.settings.stmt_timeout_ms, c.ids);
  p.render = RenderAs::group_seek;
  return p;
}

Parsed parse_partition_seek(const RouteCall& c) {
  SeekCmd cmd{c.params.at(0), c.params.at(1), c.params.at(2), true, 0};
  Parsed p = to_node(c.ids, c.settings.stmt_timeout_ms, std::move(cmd));
  p.render = RenderAs::partition_seek;
  return p;
}

HttpAnswer render_body(const GroupsReply& reply, RenderAs as) {
  return render_groups(reply, as);
}

HttpAnswer render_body(const GroupChangeReply& reply, RenderAs as) {
  return render_group_change(reply, as);
}

}  // namespace queen::server
