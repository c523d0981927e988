// SimNetwork: the links between simulated nodes (for clusters; a single node sends nothing).
// A message sent from one node to another is delivered to the receiving incarnation after a
// seeded delay, or not at all.
//
// Fault model (per message, from the network's own stream): dropped (drop_per_mille),
// duplicated (dup_per_mille, the copy with its own delay), delayed within
// [delay_us_min, delay_us_max] and so reordered, or held back by a clogged link (extra
// delay). Links can be cut one way (partition), both ways, or all around one node (isolate);
// a message on a cut link is dropped. heal() restores every link. In-flight messages are
// bounded by kInFlightMax; past it a send is dropped and counted. A forger on the network
// (forge_per_mille) sends, besides the message, a copy whose term is at the top of the range
// (2^64 - 1 or just below, so term + 1 would wrap) and, half the time, whose commit index is
// too: what a stranger on the peers' network could send.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <utility>

#include "core/common/bytes.h"
#include "io/sim/rng.h"

namespace queen::sim {

class SimWorld;

struct NetFaultRates {
  int64_t delay_us_min = 100;
  int64_t delay_us_max = 5000;
  uint32_t drop_per_mille = 0;
  uint32_t dup_per_mille = 0;
  int64_t clog_delay_us = 200'000;  // extra delay on a clogged link
  uint32_t forge_per_mille = 0;
};

class SimNetwork {
 public:
  static constexpr size_t kInFlightMax = 1 << 16;
  // Receives a message at `to` (the world has checked the receiver is up).
  using Deliver = std::function<void(int from, int to, const Bytes& message)>;

  SimNetwork(SimWorld& world, NetFaultRates rates, Deliver deliver);

  void send(int from, int to, Bytes message);
  void set_rates(const NetFaultRates& rates) { rates_ = rates; }
  void cut(int from, int to) { cut_.insert({from, to}); }  // one way
  void cut_both(int a, int b) {
    cut(a, b);
    cut(b, a);
  }
  void isolate(int node, int nodes);
  void clog(int from, int to) { clogged_.insert({from, to}); }
  void heal();
  size_t in_flight() const { return in_flight_; }
  // A forwarded command or reply (a stream between two nodes, not a Raft message): whether
  // the stream breaks under it (a cut link, or a drop), and its delay otherwise. A stream
  // of their own, so Raft's messages keep their draws.
  bool stream_breaks(int from, int to);
  int64_t stream_delay_us(int from, int to);

 private:
  void schedule(int from, int to, Bytes message);
  // The forged copy of a Raft message (empty when the bytes are not one).
  Bytes forged(const Bytes& message);
  void arrive(int64_t at_us, int from, int to, uint64_t incarnation,
              std::shared_ptr<Bytes> message);

  SimWorld& world_;
  NetFaultRates rates_;
  Deliver deliver_;
  Rng rng_;
  Rng forge_rng_;  // a stream of its own: seeds without the forger draw as before
  Rng stream_rng_;  // forwarded commands and replies
  std::set<std::pair<int, int>> cut_;
  std::set<std::pair<int, int>> clogged_;
  size_t in_flight_ = 0;
};

}  // namespace queen::sim
