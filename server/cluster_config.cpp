#include "server/cluster_config.h"

#include <xxhash.h>

#include <algorithm>
#include <boost/asio/ip/address.hpp>
#include <charconv>
#include <filesystem>
#include <fstream>

#include "core/common/text.h"
#include "core/state/entry.h"
#include "server/config.h"

namespace queen::server {
namespace {

std::optional<int64_t> to_i64(std::string_view text) {
  int64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return v;
}

Result<int64_t> positive(const Lookup& lookup, const std::string& name, int64_t fallback) {
  auto text = lookup(name);
  if (!text || text->empty()) return fallback;
  auto v = to_i64(*text);
  if (!v || *v <= 0)
    return make_error(Errc::bad_request, name + "=" + *text + " is not a positive integer");
  return *v;
}

}  // namespace

Result<std::vector<PeerSpec>> parse_peers(const std::string& text) {
  std::vector<PeerSpec> out;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    std::string_view item(text.data() + pos,
                          (comma == std::string::npos ? text.size() : comma) - pos);
    pos = comma == std::string::npos ? text.size() + 1 : comma + 1;
    if (item.empty()) continue;
    auto bad = [&](const char* why) {
      return make_error(Errc::bad_request, "QUEEN_RAFT_PEERS: '" + std::string(item) + "' " + why +
                                               " (expected id=raft_host:port/http_host:port)");
    };
    size_t eq = item.find('=');
    size_t slash = item.find('/');
    if (eq == std::string_view::npos || slash == std::string_view::npos || slash < eq)
      return bad("is malformed");
    auto id = to_i64(item.substr(0, eq));
    if (!id || *id <= 0) return bad("has no positive node id");
    PeerSpec p;
    p.id = static_cast<uint64_t>(*id);
    if (!split_host_port(item.substr(eq + 1, slash - eq - 1), &p.raft_host, &p.raft_port))
      return bad("has a bad raft address");
    if (!split_host_port(item.substr(slash + 1), &p.http_host, &p.http_port))
      return bad("has a bad http address");
    for (const auto& q : out)
      if (q.id == p.id) return bad("repeats a node id");
    out.push_back(p);
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
  return out;
}

bool is_loopback(const std::string& host) {
  if (host == "localhost") return true;
  boost::system::error_code ec;
  auto address = boost::asio::ip::make_address(host, ec);
  return !ec && address.is_loopback();
}

// The peer list itself, as every node of one cluster is given it: a node started with another
// list is of another cluster, and its messages are refused.
std::string derived_cluster_id(const std::vector<PeerSpec>& peers) {
  std::string text;
  for (const auto& p : peers) {
    text += std::to_string(p.id) + "=" + p.raft_host + ":" + std::to_string(p.raft_port) + "/" +
            p.http_host + ":" + std::to_string(p.http_port) + ",";
  }
  return hex_u64(XXH3_64bits(text.data(), text.size()));
}

// QUEEN_RAFT_JOIN, QUEEN_RAFT_PROMOTE_MAX_LAG, QUEEN_RAFT_FORCE_RECOVER,
// QUEEN_RAFT_FORMAT_MAX and QUEEN_RAFT_CLUSTER_VERSION_MS.
Status read_membership_settings(const Lookup& lookup, const ClusterConfig& c, NodeConfig* node) {
  if (auto join = lookup("QUEEN_RAFT_JOIN"); join && !join->empty()) {
    auto on = parse_bool(*join);
    if (!on) return make_error(Errc::bad_request, "QUEEN_RAFT_JOIN=" + *join + " is not a boolean");
    node->join = *on;
  }
  auto lag = positive(lookup, "QUEEN_RAFT_PROMOTE_MAX_LAG", 1000);
  if (!lag.ok()) return lag.error();
  node->promote_max_lag = static_cast<uint64_t>(lag.value());
  if (auto survivor = lookup("QUEEN_RAFT_FORCE_RECOVER"); survivor && !survivor->empty()) {
    auto id = positive(lookup, "QUEEN_RAFT_FORCE_RECOVER", 0);
    if (!id.ok()) return id.error();
    node->force_recover = static_cast<uint64_t>(id.value());
    if (node->join)
      return make_error(Errc::bad_request,
                        "QUEEN_RAFT_FORCE_RECOVER and QUEEN_RAFT_JOIN exclude each other");
  }
  auto format = positive(lookup, "QUEEN_RAFT_FORMAT_MAX", kFormatMax);
  if (!format.ok()) return format.error();
  if (format.value() > kFormatMax)
    return make_error(Errc::bad_request, "QUEEN_RAFT_FORMAT_MAX=" + std::to_string(format.value()) +
                                             " is above " + std::to_string(kFormatMax) +
                                             ", the highest format this build reads");
  node->format_max = static_cast<uint32_t>(format.value());
  if (auto ms = lookup("QUEEN_RAFT_CLUSTER_VERSION_MS"); ms && !ms->empty()) {
    auto v = to_i64(*ms);
    if (!v || *v < 0)
      return make_error(Errc::bad_request, "QUEEN_RAFT_CLUSTER_VERSION_MS=" + *ms +
                                               " is not an integer >= 0 (0 freezes the version)");
    node->cluster_version_ms = *v;
  }
  node->cluster_id = c.cluster_id;
  return ok_status();
}

Status pin_cluster_id(const std::string& data_dir, ClusterConfig* c, NodeConfig* node) {
  std::error_code ec;
  std::filesystem::create_directories(data_dir, ec);
  std::string path = data_dir + "/cluster-id";
  std::ifstream in(path);
  std::string stored;
  if (in && std::getline(in, stored) && !stored.empty()) {
    if (c->cluster_id_set && stored != c->cluster_id)
      return make_error(Errc::bad_request, "QUEEN_RAFT_CLUSTER_ID=" + c->cluster_id +
                                               " but the data folder belongs to cluster " + stored +
                                               " (" + path + ")");
    c->cluster_id = stored;
  } else {
    std::string tmp = path + ".tmp";
    std::ofstream out(tmp, std::ios::trunc);
    out << c->cluster_id << "\n";
    out.close();
    if (!out || std::rename(tmp.c_str(), path.c_str()) != 0)
      return make_error(Errc::io, "cannot write " + path);
  }
  node->cluster_id = c->cluster_id;
  return ok_status();
}

Result<std::optional<ClusterConfig>> load_cluster_config(const Lookup& lookup, NodeConfig* node) {
  ClusterConfig c;
  auto id = positive(lookup, "QUEEN_RAFT_NODE_ID", 1);
  if (!id.ok()) return id.error();
  c.node_id = static_cast<uint64_t>(id.value());
  node->node_id = c.node_id;
  auto peers_text = lookup("QUEEN_RAFT_PEERS");
  if (peers_text && !peers_text->empty()) {
    auto peers = parse_peers(*peers_text);
    if (!peers.ok()) return peers.error();
    c.peers = std::move(peers.value());
  }
  bool cluster = c.peers.size() > 1;
  auto election = positive(lookup, "QUEEN_RAFT_ELECTION_MS", cluster ? 1000 : 150);
  auto heartbeat = positive(lookup, "QUEEN_RAFT_HEARTBEAT_MS", cluster ? 100 : 50);
  auto lease = positive(lookup, "QUEEN_CONSUME_LEADER_LEASE_MS", 400);
  auto skew = positive(lookup, "QUEEN_RAFT_MAX_CLOCK_SKEW_MS", 500);
  for (const auto* r : {&election, &heartbeat, &lease, &skew})
    if (!r->ok()) return r->error();
  node->raft_election_ms = election.value();
  node->raft_heartbeat_ms = heartbeat.value();
  node->leader_lease_ms = lease.value();
  node->max_clock_skew_ms = skew.value();
  if (!cluster) return std::optional<ClusterConfig>();
  const PeerSpec* self = c.find(c.node_id);
  if (!self) {
    return make_error(Errc::bad_request,
                      "QUEEN_RAFT_PEERS does not list this node (QUEEN_RAFT_NODE_ID=" +
                          std::to_string(c.node_id) + ")");
  }
  if (node->raft_heartbeat_ms * 2 > node->raft_election_ms) {
    return make_error(Errc::bad_request,
                      "QUEEN_RAFT_HEARTBEAT_MS must be at most half of QUEEN_RAFT_ELECTION_MS");
  }
  if (node->leader_lease_ms >= node->raft_election_ms) {
    return make_error(Errc::bad_request,
                      "QUEEN_CONSUME_LEADER_LEASE_MS must be below QUEEN_RAFT_ELECTION_MS: a "
                      "deposed leader must stop serving pops before another can be elected");
  }
  // The raft port listens where the peer list says this node is, never on every address
  // unless QUEEN_RAFT_LISTEN asks for it.
  c.listen_host = self->raft_host;
  c.listen_port = self->raft_port;
  if (auto listen = lookup("QUEEN_RAFT_LISTEN"); listen && !listen->empty()) {
    if (!split_host_port(*listen, &c.listen_host, &c.listen_port))
      return make_error(Errc::bad_request, "QUEEN_RAFT_LISTEN=" + *listen + " is not host:port");
  }
  if (auto token = lookup("QUEEN_RAFT_TOKEN")) c.token = *token;
  c.tls_cert = lookup("QUEEN_RAFT_TLS_CERT").value_or("");
  c.tls_key = lookup("QUEEN_RAFT_TLS_KEY").value_or("");
  c.tls_ca = lookup("QUEEN_RAFT_TLS_CA").value_or("");
  int tls_set = !c.tls_cert.empty() + !c.tls_key.empty() + !c.tls_ca.empty();
  if (tls_set != 0 && tls_set != 3) {
    return make_error(Errc::bad_request,
                      "QUEEN_RAFT_TLS_CERT, QUEEN_RAFT_TLS_KEY and QUEEN_RAFT_TLS_CA go together: "
                      "set all three (mutual TLS between the peers) or none");
  }
  bool on_loopback = std::all_of(c.peers.begin(), c.peers.end(),
                                 [](const PeerSpec& p) { return is_loopback(p.raft_host); });
  if (c.token.empty() && tls_set == 0 && !(on_loopback && is_loopback(c.listen_host))) {
    return make_error(Errc::bad_request,
                      "QUEEN_RAFT_TOKEN is unset, but the peers of QUEEN_RAFT_PEERS (or "
                      "QUEEN_RAFT_LISTEN) are not all on loopback: set QUEEN_RAFT_TOKEN to the "
                      "same secret on every node, or QUEEN_RAFT_TLS_CERT, QUEEN_RAFT_TLS_KEY and "
                      "QUEEN_RAFT_TLS_CA for mutual TLS, or any stranger on the network can "
                      "steer the cluster");
  }
  c.cluster_id = lookup("QUEEN_RAFT_CLUSTER_ID").value_or("");
  c.cluster_id_set = !c.cluster_id.empty();
  if (c.cluster_id.empty()) c.cluster_id = derived_cluster_id(c.peers);
  auto streams = positive(lookup, "QUEEN_RAFT_FWD_STREAMS", kForwardStreamsDefault);
  if (!streams.ok()) return streams.error();
  if (streams.value() > kForwardStreamsMax)
    return make_error(Errc::bad_request, "QUEEN_RAFT_FWD_STREAMS must be between 1 and 64");
  c.forward_streams = static_cast<uint32_t>(streams.value());
  if (auto offload = lookup("QUEEN_RAFT_CLIENT_OFFLOAD"); offload && !offload->empty()) {
    auto on = parse_bool(*offload);
    if (!on) {
      return make_error(Errc::bad_request, "QUEEN_RAFT_CLIENT_OFFLOAD=" + *offload +
                                               " is not a boolean (true/false, 1/0, yes/no, "
                                               "on/off)");
    }
    c.client_offload = *on;
  }
  node->voters.clear();
  node->voter_addrs.clear();
  for (const auto& p : c.peers) {
    node->voters.push_back(p.id);
    node->voter_addrs.emplace_back(p.raft_host + ":" + std::to_string(p.raft_port),
                                   p.http_host + ":" + std::to_string(p.http_port));
  }
  if (auto st = read_membership_settings(lookup, c, node); !st.ok()) return st.error();
  node->forward_commands = c.client_offload;  // the node forwards; off: the edge does
  return std::optional<ClusterConfig>(std::move(c));
}

}  // namespace queen::server
