// The membership family (admin): GET /api/v1/system/raft/membership, POST .../learners,
// POST .../promote, PUT .../voters and DELETE .../members/:id. A refusal answers
// {ok:false, code, error}: 400 for what the request says, 409 for what the cluster's state
// forbids now, 503 leader_unreachable, 504 timeout (?timeoutMs=, 30 s by default).

#include "core/common/text.h"
#include "server/api/common.h"

namespace queen::server {

namespace {

constexpr int64_t kMembershipTimeoutMsDefault = 30000;
constexpr int64_t kMembershipTimeoutMsMax = 600000;

HttpAnswer refusal(unsigned status, std::string_view code, std::string_view error) {
  JsonWriter w;
  w.begin_object().key("ok").boolean(false).key("code").string(code);
  w.key("error").string(utf8_lossy(std::string(error))).end_object();
  return HttpAnswer{status, w.take(), 0};
}

unsigned status_of(std::string_view code) {
  if (code == "bad_request" || code == "not_a_learner" || code == "not_a_member") return 400;
  return 409;
}

// A positive node id: a JSON integer, or a string of digits.
std::optional<uint64_t> node_id_of(const json& v) {
  if (v.is_number_unsigned() && v.get<uint64_t>() > 0) return v.get<uint64_t>();
  if (v.is_number_integer() && v.get<int64_t>() > 0) return static_cast<uint64_t>(v.get<int64_t>());
  if (v.is_string()) {
    auto id = parse_u64(v.get_ref<const std::string&>());
    if (id && *id > 0) return id;
  }
  return std::nullopt;
}

Parsed membership_refused(std::string_view error) {
  return answer_now(refusal(400, "bad_request", error));
}

// ?timeoutMs=: how long the change may take before the answer is 504 timeout.
std::optional<int64_t> timeout_of(const QueryParams& query) {
  const std::string* t = query_text(query, "timeoutMs");
  if (!t || t->empty()) return kMembershipTimeoutMsDefault;
  auto v = parse_u64(*t);
  if (!v || *v == 0 || *v > static_cast<uint64_t>(kMembershipTimeoutMsMax)) return std::nullopt;
  return static_cast<int64_t>(*v);
}

// `key` of `doc`: an array of node ids.
std::optional<std::vector<NodeId>> ids_of(const json& doc, const char* key, std::string* error) {
  const json* list = nullptr;
  if (auto bad = array_field(doc, key, &list)) {
    *error = *bad;
    return std::nullopt;
  }
  std::vector<NodeId> out;
  if (list)
    for (const json& v : *list) {
      auto id = node_id_of(v);
      if (!id) {
        *error = std::string(key) + " must hold positive node ids";
        return std::nullopt;
      }
      out.push_back(NodeId(*id));
    }
  return out;
}

std::optional<Parsed> parse_change_body(std::string_view what, std::string_view body,
                                        MembershipCmd* cmd) {
  std::string error;
  auto doc = parse_object(body, &error);
  if (!doc) return membership_refused(error);
  if (what == "learners") {
    const json* id = field(*doc, "id");
    auto parsed = id ? node_id_of(*id) : std::nullopt;
    if (!parsed) return membership_refused("id must be a positive node id");
    FieldReader r(*doc, "");
    cmd->raft_addr = r.required_string("raft", false);
    cmd->http_addr = r.required_string("http", false);
    if (!r.ok()) return membership_refused(r.error());
    cmd->op = MembershipOp::add_learner;
    cmd->id = NodeId(*parsed);
    return std::nullopt;
  }
  const char* key = what == "promote" ? "ids" : "voters";
  auto ids = ids_of(*doc, key, &error);
  if (!ids) return membership_refused(error);
  if (ids->empty()) return membership_refused(std::string(key) + " must name at least one node");
  cmd->op = what == "promote" ? MembershipOp::promote : MembershipOp::set_voters;
  cmd->ids = std::move(*ids);
  return std::nullopt;
}

}  // namespace

Parsed parse_membership(std::string_view method, std::string_view what, const std::string& id,
                        std::string_view body, const QueryParams& query,
                        const EdgeSettings& settings, IdSource& ids) {
  auto timeout_ms = timeout_of(query);
  if (!timeout_ms) return membership_refused("timeoutMs must be an integer from 1 to 600000");
  MembershipCmd cmd;
  if (method == "DELETE") {
    auto parsed = parse_u64(id);
    if (!parsed || *parsed == 0)
      return membership_refused("the member id must be a positive integer");
    cmd.op = MembershipOp::remove;
    cmd.ids = {NodeId(*parsed)};
  } else if (method != "GET") {
    if (auto refused = parse_change_body(what, body, &cmd)) return std::move(*refused);
  }
  (void)settings;
  Parsed p = to_node(ids, *timeout_ms, cmd);
  p.render = RenderAs::membership;
  return p;
}

// A disk id as 16 hex digits ("" for none): JSON numbers lose precision past 2^53.
std::string disk_text(uint64_t disk) {
  return disk == 0 ? "" : hex_u64(disk);
}

HttpAnswer render_body(const MembershipReply& r, RenderAs) {
  if (!r.code.empty()) return refusal(status_of(r.code), r.code, r.error);
  JsonWriter w;
  w.begin_object().key("ok").boolean(true).key("clusterId").string(r.cluster_id);
  w.key("leader").number(r.leader).key("term").number(r.term).key("commit").number(r.commit);
  w.key("configIndex").number(r.index).key("committed").boolean(r.committed);
  w.key("clusterVersion").number(r.cluster_version).key("formatMax").number(r.format_max);
  w.key("fenced").boolean(r.fenced);
  uint64_t leader_match = 0;
  for (const MemberView& m : r.members)
    if (m.id.value == r.leader) leader_match = m.match;
  w.key("members").begin_array();
  for (const MemberView& m : r.members) {
    w.begin_object().key("id").number(m.id.value);
    w.key("role").string(m.voter ? "voter" : "learner");
    w.key("raft").string(m.raft_addr).key("http").string(m.http_addr);
    w.key("match").number(m.match);
    w.key("lag").number(leader_match - std::min(leader_match, m.match));
    // The identity fence: the disk it is pinned to, the one it last spoke from, and whether
    // those differ (its messages are dropped until it is removed and added back).
    w.key("disk").string(disk_text(m.disk)).key("heardDisk").string(disk_text(m.heard_disk));
    w.key("fenced").boolean(m.disk != 0 && m.heard_disk != 0 && m.disk != m.heard_disk);
    w.key("formatMax").number(m.kinds);
    w.end_object();
  }
  w.end_array().end_object();
  return HttpAnswer{200, w.take(), 0};
}

// The engine's errors on these routes, in the family's shape.
HttpAnswer render_membership_error(const ErrorReply& e) {
  switch (e.code) {
    case api::Errc::timeout:
      return refusal(504, "timeout", e.message);
    case api::Errc::no_leader:
    case api::Errc::not_leader:
    case api::Errc::overloaded:
      return refusal(503, "leader_unreachable", e.message);
    case api::Errc::outcome_unknown:
      return refusal(409, "leader_changed", e.message);
    case api::Errc::bad_request:
      return refusal(400, "bad_request", e.message);
    default:
      return refusal(500, errc_code(e.code), e.message);
  }
}

}  // namespace queen::server
