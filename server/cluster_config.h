// The cluster's configuration: QUEEN_RAFT_NODE_ID, QUEEN_RAFT_PEERS, QUEEN_RAFT_LISTEN,
// QUEEN_RAFT_TOKEN, QUEEN_RAFT_ELECTION_MS, QUEEN_RAFT_HEARTBEAT_MS, the consumption
// engine's QUEEN_CONSUME_LEADER_LEASE_MS and QUEEN_RAFT_MAX_CLOCK_SKEW_MS, and how a follower
// forwards: QUEEN_RAFT_CLIENT_OFFLOAD (on: the prepared command, over QUEEN_RAFT_FWD_STREAMS
// streams on the raft port; off: the whole HTTP request).
//
// QUEEN_RAFT_PEERS lists every voter, this node included: `id=raft_host:port/http_host:port`
// separated by commas, e.g. `1=127.0.0.1:7401/127.0.0.1:6641,2=...`. No peers (or only this
// node): a single node, as without the variable. Errors name the variable and the entry.
// The leader lease must be shorter than the election timeout, or a deposed leader could still
// be serving pops when its successor starts to.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/common/result.h"
#include "core/node/config.h"

namespace queen::server {

struct PeerSpec {
  uint64_t id = 0;
  std::string raft_host;
  uint16_t raft_port = 0;
  std::string http_host;
  uint16_t http_port = 0;
};

constexpr int64_t kForwardStreamsDefault = 4;
constexpr int64_t kForwardStreamsMax = 64;

struct ClusterConfig {
  uint64_t node_id = 1;
  std::vector<PeerSpec> peers;  // every voter, this node included, by id
  std::string listen_host = "0.0.0.0";
  uint16_t listen_port = 0;
  std::string token;
  // QUEEN_RAFT_CLUSTER_ID, or a hash of the peer list: peers of another cluster are refused.
  std::string cluster_id;
  bool cluster_id_set = false;                        // by QUEEN_RAFT_CLUSTER_ID, not derived
  std::string tls_cert, tls_key, tls_ca;              // QUEEN_RAFT_TLS_*: mutual TLS between peers
  uint32_t forward_streams = kForwardStreamsDefault;  // QUEEN_RAFT_FWD_STREAMS (1-64)
  bool client_offload = true;                         // QUEEN_RAFT_CLIENT_OFFLOAD
  const PeerSpec* find(uint64_t id) const {
    for (const auto& p : peers)
      if (p.id == id) return &p;
    return nullptr;
  }
};

using Lookup = std::function<std::optional<std::string>(const std::string& name)>;

// Fills node's Raft fields; nullopt (and node untouched but for timers) on a single node.
Result<std::optional<ClusterConfig>> load_cluster_config(const Lookup& lookup, NodeConfig* node);
Result<std::vector<PeerSpec>> parse_peers(const std::string& text);
// "localhost", or an address in 127.0.0.0/8 or ::1.
bool is_loopback(const std::string& host);
std::string derived_cluster_id(const std::vector<PeerSpec>& peers);
// The cluster id is the first boot's for good: kept in `<data_dir>/cluster-id`, so that a
// peer list changed later (nodes added, moved) does not change it. A stored id overrides a
// derived one; one that differs from QUEEN_RAFT_CLUSTER_ID is an error (the folder belongs to
// another cluster).
Status pin_cluster_id(const std::string& data_dir, ClusterConfig* c, NodeConfig* node);

}  // namespace queen::server
