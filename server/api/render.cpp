// Replies to answers: one std::visit over every reply kind, each rendered by its family.
#include <variant>

#include "server/api/common.h"

namespace queen::server {

HttpAnswer render_body(const ErrorReply& e, RenderAs) {
  JsonWriter w;
  w.begin_object().key("error").string(utf8_lossy(e.message)).key("code").string(e.code);
  if (e.leader != 0) w.key("leader").number(e.leader);  // a 503 retry names the leader
  w.end_object();
  HttpAnswer a{static_cast<unsigned>(e.http_status), w.take(), 0};
  a.retry_after_s = e.retry_after_s;
  return a;
}

HttpAnswer render_reply(const Reply& reply, RenderAs as) {
  return std::visit([as](const auto& body) { return render_body(body, as); }, reply.body);
}

}  // namespace queen::server
