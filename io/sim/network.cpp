#include "io/sim/network.h"

#include <limits>
#include <memory>

#include "core/raft/raft.h"
#include "io/sim/world.h"

namespace queen::sim {

SimNetwork::SimNetwork(SimWorld& world, NetFaultRates rates, Deliver deliver)
    : world_(world),
      rates_(rates),
      deliver_(std::move(deliver)),
      rng_(world.stream("net")),
      forge_rng_(world.stream("net-forge")),
      stream_rng_(world.stream("net-streams")) {}

bool SimNetwork::stream_breaks(int from, int to) {
  if (cut_.count({from, to}) != 0) return true;
  return rates_.drop_per_mille > 0 && stream_rng_.per_mille(rates_.drop_per_mille);
}

int64_t SimNetwork::stream_delay_us(int from, int to) {
  int64_t delay_us = stream_rng_.range(rates_.delay_us_min, rates_.delay_us_max);
  if (clogged_.count({from, to}) != 0) delay_us += rates_.clog_delay_us;
  return delay_us;
}

Bytes SimNetwork::forged(const Bytes& message) {
  raft::Message m;
  if (!raft::decode_message(message.data(), message.size(), &m)) return {};
  m.term = Term(std::numeric_limits<uint64_t>::max() - forge_rng_.range(0, 1));
  if (forge_rng_.per_mille(500)) m.commit = LogIndex(std::numeric_limits<uint64_t>::max());
  return raft::encode_message(m);
}

void SimNetwork::send(int from, int to, Bytes message) {
  if (cut_.count({from, to}) != 0) {
    world_.count("net_partitioned_drops");
    return;
  }
  if (rates_.drop_per_mille > 0 && rng_.per_mille(rates_.drop_per_mille)) {
    world_.count("net_drops");
    return;
  }
  if (rates_.forge_per_mille > 0 && forge_rng_.per_mille(rates_.forge_per_mille)) {
    Bytes forgery = forged(message);
    if (!forgery.empty()) {
      world_.count("net_forged");
      schedule(from, to, std::move(forgery));
    }
  }
  if (rates_.dup_per_mille > 0 && rng_.per_mille(rates_.dup_per_mille)) {
    world_.count("net_duplicates");
    schedule(from, to, message);
  }
  schedule(from, to, std::move(message));
}

void SimNetwork::schedule(int from, int to, Bytes message) {
  if (in_flight_ >= kInFlightMax) {
    world_.count("net_overflow_drops");
    return;
  }
  int64_t delay_us = rng_.range(rates_.delay_us_min, rates_.delay_us_max);
  if (clogged_.count({from, to}) != 0) delay_us += rates_.clog_delay_us;
  ++in_flight_;
  auto shared = std::make_shared<Bytes>(std::move(message));
  // Addressed to the receiver's current process: a restart loses what was in flight to it.
  uint64_t incarnation = world_.incarnation(to);
  arrive(world_.now_us() + delay_us, from, to, incarnation, std::move(shared));
}

void SimNetwork::arrive(int64_t at_us, int from, int to, uint64_t incarnation,
                        std::shared_ptr<Bytes> message) {
  world_.at(at_us, strf("net %d->%d len=%zu", from, to, message->size()),
            [this, from, to, incarnation, message] {
              if (world_.up(to) && world_.paused(to)) {  // delivered once it runs again
                arrive(world_.resume_us(to), from, to, incarnation, message);
                return;
              }
              --in_flight_;
              if (cut_.count({from, to}) != 0) return;  // cut while in flight
              if (!world_.up(to) || world_.incarnation(to) != incarnation) return;
              deliver_(from, to, *message);
            });
}

void SimNetwork::isolate(int node, int nodes) {
  for (int other = 0; other < nodes; ++other) {
    if (other != node) cut_both(node, other);
  }
}

void SimNetwork::heal() {
  cut_.clear();
  clogged_.clear();
}

}  // namespace queen::sim
