// Replies to answers: one std::visit over every reply kind, each rendered by its family.
#include <variant>

#include "server/api/common.h"

namespace queen::server {

namespace {

struct ErrcWire {
  unsigned status;
  std::string_view code;  // the reference's
};

// The one table from the core's error codes to HTTP (a code without a row does not compile
// with -Wswitch, and answers 500 if it ever ran).
ErrcWire wire_of(api::Errc e) {
  switch (e) {
    case api::Errc::internal:
      return {500, "internal"};
    case api::Errc::bad_request:
      return {400, "bad_request"};
    case api::Errc::not_found:
      return {404, "not_found"};
    case api::Errc::queue_not_found:
      return {404, "queue_not_found"};
    case api::Errc::no_leader:
      return {503, "no_leader"};
    case api::Errc::not_leader:
      return {503, "retry"};
    case api::Errc::outcome_unknown:
      return {503, "outcome_unknown"};
    case api::Errc::timeout:
      return {503, "timeout"};
    case api::Errc::overloaded:
      return {429, "overloaded"};
    case api::Errc::storage_full:
      return {507, "storage_full"};
    case api::Errc::encryption_unavailable:
      return {500, "encryption_unavailable"};
  }
  return {500, "internal"};
}

}  // namespace

std::string_view errc_code(api::Errc e) {
  return wire_of(e).code;
}

HttpAnswer render_body(const ErrorReply& e, RenderAs as) {
  if (as == RenderAs::membership) return render_membership_error(e);
  ErrcWire wire = wire_of(e.code);
  JsonWriter w;
  w.begin_object().key("error").string(utf8_lossy(e.message)).key("code").string(wire.code);
  if (e.leader != 0) w.key("leader").number(e.leader);  // a 503 retry names the leader
  w.end_object();
  HttpAnswer a{wire.status, w.take(), 0};
  a.retry_after_s = e.retry_after_s;
  return a;
}

size_t rendered_rows(const Reply& reply) {
  size_t rows = 0;
  if (const auto* groups = std::get_if<GroupsReply>(&reply.body))
    for (const GroupView& g : groups->groups) rows += g.partitions.size();
  if (const auto* queues = std::get_if<QueuesReply>(&reply.body))
    for (const QueueView& q : queues->queues) rows += q.partitions.size();
  return rows;
}

HttpAnswer render_reply(const Reply& reply, RenderAs as, const ViewArgs& view) {
  if (const auto* queues = std::get_if<QueuesReply>(&reply.body);
      queues && as >= RenderAs::status && as <= RenderAs::status_queue)
    return render_status(*queues, as, view);
  if (const auto* groups = std::get_if<GroupsReply>(&reply.body);
      groups && as == RenderAs::group_page)
    return render_group_page(*groups, view);
  if (const auto* messages = std::get_if<MessagesReply>(&reply.body);
      messages && as == RenderAs::status_messages)
    return render_status_messages(*messages);
  return std::visit([as](const auto& body) { return render_body(body, as); }, reply.body);
}

}  // namespace queen::server
