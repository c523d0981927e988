// The parameters of one simulated run, all chosen from its seed: the cluster, the node's
// configuration, the fault rates of the safety phase and the client workload. Each fault kind
// is switched on or off per seed (swarm testing), so a seed explores a few faults hard
// rather than all of them thinly. describe() renders every parameter on one line, printed at
// the start of the run so that a failing seed says what world it lived in.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/node/config.h"
#include "io/sim/clock.h"
#include "io/sim/disk.h"
#include "io/sim/network.h"

namespace queen::sim {

enum class Mutant {
  none,
  answer_before_fsync,
  skip_lease_check,
  replay_partial_entry,
  commit_without_majority,
  vote_twice,
  no_foreign_lease_grace,
  snapshot_without_log_files,
  delta_after_recovery,
  unbounded_terms,              // peer messages with out-of-bounds terms and indexes are accepted
  forward_fresh_request_id,     // a follower's retry at the leader mints a new request id
  transfer_before_acks_commit,  // a graceful stop hands over before its acks commit
  learner_in_quorum,            // a learner's match counts towards commit
  changes_in_flight,            // a membership change is proposed before the last commits
  removed_leader_serves,        // a leader demoted by a committed change leads on
  no_fence,                     // a wiped disk under its old id votes and is counted
  ungated_version,              // the cluster version rises before every member reads it
};

std::optional<Mutant> parse_mutant(std::string_view name);
const char* mutant_name(Mutant m);
// The invariant (its DESIGN.md number) that must catch the mutant's planted bug.
const char* mutant_invariant(Mutant m);

struct FaultParams {
  uint32_t crash_per_100k_events = 0;             // a crash after any event
  uint32_t crash_after_push_reply_per_mille = 0;  // a crash right after a push was answered
  uint32_t crash_mid_sync_per_mille = 0;  // a crash while two or more files hold unsynced bytes
  uint32_t pause_per_100k_events = 0;     // the node stops running for a while
  int64_t pause_ms_min = 2500;
  int64_t pause_ms_max = 4500;
  uint32_t reply_loss_per_mille = 0;
  int64_t client_delay_us_min = 20;
  int64_t client_delay_us_max = 2000;
  int64_t restart_delay_ms_min = 1;
  int64_t restart_delay_ms_max = 2000;
  // Cluster: a crashed node stays down this long instead, past the hold a leader keeps its
  // log for an absent follower (drawn shorter): it returns to a reclaimed log (a snapshot).
  uint32_t long_outage_per_mille = 0;
  int64_t long_outage_ms_min = 3000;
  int64_t long_outage_ms_max = 8000;
  // Cluster: the leader stops gracefully (Node::hand_over, then its process exits).
  uint32_t graceful_stop_per_100k_events = 0;
  // Cluster: the operator changes the voters (PUT voters: one demoted to a learner, or all
  // voters again), the leader too; healed by making every node a voter again.
  uint32_t membership_per_100k_events = 0;
  // Cluster: a node's disk is wiped and it restarts empty under its old id (once every node
  // pins its disk, and while no other wiped node waits); the operator removes it and adds it
  // back after readmit_delay_ms.
  uint32_t wipe_per_100k_events = 0;
  int64_t readmit_delay_ms = 2000;
  // Cluster: node older_build - 1 starts as an older build (QUEEN_RAFT_FORMAT_MAX=1) and is
  // upgraded at its first restart after upgrade_after_ms (at the heal, if none came).
  uint32_t older_build = 0;
  int64_t upgrade_after_ms = 0;
  // Cluster: after disaster_after_ms (0: never) every disk but one is lost for good, once. The
  // node whose durable log is the most up to date survives: it restarts with
  // QUEEN_RAFT_FORCE_RECOVER, which the operator unsets once its one-voter configuration has
  // committed; the others come back empty with QUEEN_RAFT_JOIN and are added back one by one.
  int64_t disaster_after_ms = 0;
  DiskFaultRates disk;
  ClockModel clock;
};

struct WorkloadParams {
  int queues = 2;
  int partitions_per_queue = 2;
  int producers = 2;
  int pushes_per_producer = 40;
  int items_per_push_max = 4;
  uint32_t two_queue_push_per_mille = 300;  // a push whose items span two queues
  int payload_bytes_max = 600;
  int consumers_per_group = 2;
  uint32_t pop_batch_max = 5;
  uint32_t wait_per_mille = 400;  // long polls
  int64_t pop_wait_ms_max = 2000;
  uint32_t sleep_past_lease_per_mille = 50;
  uint32_t slow_work_per_mille = 100;  // work for most of the lease (still within it)
  uint32_t fail_per_mille = 100;
  uint32_t no_lease_per_mille = 150;  // acks sent without a leaseId
  uint32_t repeat_ack_per_mille = 100;
  uint32_t skip_ack_per_mille = 50;   // a message of the batch left unacked
  uint32_t bogus_ack_per_mille = 20;  // an ack for a transactionId never pushed
  int64_t lease_time_s = 2;
  int64_t retry_limit = 2;
  int64_t retry_delay_ms = 0;
  int64_t request_timeout_ms = 5000;
  int request_attempts_max = 50;
  // Workers (group "wk"): pop one message of queue qa, then one transaction that acks it, pushes
  // its output to queue wout (transactionId derived from the input's) and puts a KV marker.
  int workers = 0;
  uint32_t worker_sleep_past_lease_per_mille = 50;  // the transaction comes after the lease
  uint32_t any_node_per_mille = 300;     // cluster: a request goes to a node chosen at random
  uint32_t cancel_poll_per_mille = 100;  // a long poll whose consumer closes the connection
};

struct RunParams {
  uint64_t seed = 0;
  int nodes = 1;
  Mutant mutant = Mutant::none;
  NetFaultRates net;                       // cluster: the links between nodes
  std::vector<ClockModel> node_clocks;     // cluster: each node's clock, within the skew bound
  uint32_t partition_per_100k_events = 0;  // cluster: one node cut off for a while
  FaultParams faults;
  WorkloadParams work;
  NodeConfig node;
  int64_t safety_ms = 20'000;
  int64_t liveness_ms_max = 120'000;  // the liveness bound after healing
  int64_t settle_ms = 2'000;          // quiet time before the final restart

  std::string describe() const;
};

RunParams choose_params(uint64_t seed, int nodes, Mutant mutant);

// The fault table (params.cpp): every fault by name, the ones a run has on (with the
// counter that shows each acted), and turning one off (queen-sim --without NAME).
std::vector<std::string> fault_names();
std::string faults_on(const RunParams& p);
bool turn_off_fault(RunParams* p, std::string_view name);

}  // namespace queen::sim
