#include "sim/params.h"

#include <algorithm>

#include "io/sim/rng.h"
#include "io/sim/trace.h"

namespace queen::sim {
namespace {

// Swarm testing: a fault kind is on for about three seeds in four.
uint32_t maybe(Rng& rng, uint32_t lo, uint32_t hi) {
  return rng.per_mille(750) ? static_cast<uint32_t>(rng.range(lo, hi)) : 0;
}

FaultParams choose_faults(Rng& rng) {
  FaultParams f;
  f.crash_per_100k_events = rng.per_mille(850) ? static_cast<uint32_t>(rng.range(50, 600)) : 0;
  f.crash_after_push_reply_per_mille = maybe(rng, 5, 40);
  f.crash_mid_sync_per_mille = maybe(rng, 2, 30);
  f.pause_per_100k_events = maybe(rng, 10, 80);
  f.reply_loss_per_mille = maybe(rng, 5, 80);
  f.client_delay_us_max = rng.range(100, 3000);
  f.restart_delay_ms_max = rng.range(2, 2000);
  DiskFaultRates& d = f.disk;
  d.sync_latency_us_min = rng.range(20, 200);
  d.sync_latency_us_max = d.sync_latency_us_min + rng.range(0, 5000);
  d.sync_slow_per_mille = maybe(rng, 1, 30);
  d.sync_slow_us_max = rng.range(10'000, 120'000);
  d.sync_fail_per_mille = maybe(rng, 1, 10);
  d.read_corrupt_per_mille = maybe(rng, 5, 100);
  d.crash_keep_per_mille = static_cast<uint32_t>(rng.range(0, 500));
  d.crash_torn_per_mille = static_cast<uint32_t>(rng.range(0, 1000 - d.crash_keep_per_mille));
  ClockModel& c = f.clock;
  c.max_skew_us = 500'000;  // QUEEN_RAFT_MAX_CLOCK_SKEW_MS
  c.offset_us = rng.range(-c.max_skew_us, c.max_skew_us);
  c.drift_ppm = rng.range(-200, 200);
  return f;
}

WorkloadParams choose_workload(Rng& rng) {
  WorkloadParams w;
  w.partitions_per_queue = static_cast<int>(rng.range(1, 4));
  w.producers = static_cast<int>(rng.range(1, 4));
  w.pushes_per_producer = static_cast<int>(rng.range(20, 100));
  w.items_per_push_max = static_cast<int>(rng.range(1, 6));
  w.two_queue_push_per_mille = static_cast<uint32_t>(rng.range(0, 500));
  w.payload_bytes_max = static_cast<int>(rng.range(16, 2000));
  w.consumers_per_group = static_cast<int>(rng.range(1, 3));
  w.pop_batch_max = static_cast<uint32_t>(rng.range(1, 10));
  w.wait_per_mille = static_cast<uint32_t>(rng.range(0, 700));
  w.pop_wait_ms_max = rng.range(200, 3000);
  w.sleep_past_lease_per_mille = static_cast<uint32_t>(rng.range(0, 100));
  w.slow_work_per_mille = static_cast<uint32_t>(rng.range(0, 300));
  w.fail_per_mille = static_cast<uint32_t>(rng.range(0, 200));
  w.no_lease_per_mille = static_cast<uint32_t>(rng.range(0, 300));
  w.repeat_ack_per_mille = static_cast<uint32_t>(rng.range(0, 200));
  w.skip_ack_per_mille = static_cast<uint32_t>(rng.range(0, 100));
  w.bogus_ack_per_mille = static_cast<uint32_t>(rng.range(0, 50));
  w.retry_delay_ms = rng.per_mille(500) ? 0 : rng.range(10, 500);
  return w;
}

NodeConfig choose_node_config(Rng& rng, Mutant mutant) {
  NodeConfig c;
  c.checkpoint_ms = rng.range(1, 20);
  c.pipeline_max = static_cast<uint32_t>(rng.range(1, 8));
  if (rng.per_mille(300)) c.batch_cmds_max = static_cast<uint32_t>(rng.range(1, 16));
  if (rng.per_mille(500)) c.segment_bytes = static_cast<uint64_t>(rng.range(2048, 65536));
  c.durable_every_ms = c.checkpoint_ms * 25;  // no draw of its own: seeds keep their worlds
  c.qlog_shards = static_cast<uint32_t>(c.checkpoint_ms % 4);  // nor here: 0 is one log each
  // Nor here: a third of the seeds bound the dedup rings to a few KiB, so that rings are
  // dropped at every store checkpoint tick and warm again while the checkers watch.
  if (c.checkpoint_ms % 3 == 0) c.dedup_front_bytes_max = 4096;
  // The simulated rings are a few KiB: they take rings files as a large node's do, so that
  // crashes meet rings read back and caught up.
  c.rings_file_bytes_min = 0;
  c.mutants.answer_before_fsync = mutant == Mutant::answer_before_fsync;
  c.mutants.skip_lease_check = mutant == Mutant::skip_lease_check;
  c.mutants.replay_partial_entry = mutant == Mutant::replay_partial_entry;
  c.mutants.commit_without_majority = mutant == Mutant::commit_without_majority;
  c.mutants.vote_twice = mutant == Mutant::vote_twice;
  c.mutants.no_foreign_lease_grace = mutant == Mutant::no_foreign_lease_grace;
  c.mutants.snapshot_without_log_files = mutant == Mutant::snapshot_without_log_files;
  c.mutants.delta_after_recovery = mutant == Mutant::delta_after_recovery;
  c.mutants.unbounded_terms = mutant == Mutant::unbounded_terms;
  c.mutants.forward_fresh_request_id = mutant == Mutant::forward_fresh_request_id;
  c.mutants.transfer_before_acks_commit = mutant == Mutant::transfer_before_acks_commit;
  c.mutants.learner_in_quorum = mutant == Mutant::learner_in_quorum;
  c.mutants.changes_in_flight = mutant == Mutant::changes_in_flight;
  c.mutants.removed_leader_serves = mutant == Mutant::removed_leader_serves;
  c.mutants.no_fence = mutant == Mutant::no_fence;
  // Two changes in flight are searched for with the voter-change rule alone (no identity round
  // adding configurations beside the operator's): seed 254 is the first in 1-300.
  if (mutant == Mutant::changes_in_flight) c.cluster_version_ms = 0;
  c.mutants.ungated_version = mutant == Mutant::ungated_version;
  c.checkpoint_deltas_max = c.checkpoint_ms % 2 == 0 ? 2 : 64;  // short chains or the default
  // Whole lists (group details, the lagging list, a queue's detail) in slices of 1-4 partitions
  // (no draw), so that they are read across events with the writes going on between slices.
  c.list_slice_partitions = 1 + c.pipeline_max % 4;
  return c;
}

// A cluster's own faults, drawn after everything else so single-node seeds keep their worlds.
// Clocks: each node its own offset and drift, any two within QUEEN_RAFT_MAX_CLOCK_SKEW_MS.
void choose_cluster(Rng& rng, RunParams* p) {
  p->node.forward_commands = true;  // clients talk to any node
  // Every clock within half the skew bound of simulated time: any two within the bound.
  int64_t half_us = p->node.max_clock_skew_ms * 1000 / 2;
  bool skewed = rng.per_mille(700);
  for (int n = 0; n < p->nodes; ++n) {
    ClockModel c;
    c.max_skew_us = half_us;
    if (skewed) {
      c.offset_us = rng.range(-half_us, half_us);
      c.drift_ppm = rng.range(-100, 100);
    }
    p->node_clocks.push_back(c);
  }
  // The lease mutant shows only when a new leader's clock runs ahead of the old one's: its
  // runs put the clocks at both ends of the bound (no draws: other seeds keep their worlds).
  if (p->mutant == Mutant::no_foreign_lease_grace) {
    for (int n = 0; n < p->nodes; ++n)
      p->node_clocks[n].offset_us = n % 2 == 0 ? half_us : -half_us;
    // Clients follow the leader's hints (followers do not forward), so pops reach a new
    // leader as soon as it serves: as the mutant was first caught.
    p->work.any_node_per_mille = 0;
    p->node.forward_commands = false;
  }
  p->net.delay_us_min = rng.range(50, 500);
  p->net.delay_us_max = p->net.delay_us_min + rng.range(100, 20'000);
  p->net.drop_per_mille = rng.per_mille(500) ? static_cast<uint32_t>(rng.range(1, 50)) : 0;
  p->net.dup_per_mille = rng.per_mille(500) ? static_cast<uint32_t>(rng.range(1, 50)) : 0;
  p->partition_per_100k_events = rng.per_mille(600) ? static_cast<uint32_t>(rng.range(5, 60)) : 0;
  p->liveness_ms_max += 60'000;
  if (rng.per_mille(500)) {  // a small cache: lagging followers are fed from the log files
    p->node.raft_cache_bytes_max = static_cast<uint64_t>(rng.range(1024, 65536));
    p->node.raft_recovered_cached_max = static_cast<uint32_t>(rng.range(0, 16));
  }
  if (p->mutant == Mutant::commit_without_majority || p->mutant == Mutant::vote_twice) {
    p->partition_per_100k_events = std::max<uint32_t>(p->partition_per_100k_events, 40);
  }
  if (rng.per_mille(500)) {  // long outages with small log files: catch-up by snapshot
    p->faults.long_outage_per_mille = static_cast<uint32_t>(rng.range(100, 500));
    p->node.segment_bytes = static_cast<uint64_t>(rng.range(2048, 8192));
    p->node.snapshot_chunk_bytes = static_cast<uint64_t>(rng.range(512, 16384));
    p->node.raft_purge_hold_ms = rng.range(500, 2500);  // shorter than the outages
  }
  // Graceful stops of the leader (SIGTERM): it hands leadership over, then exits.
  if (rng.per_mille(700) || p->mutant == Mutant::transfer_before_acks_commit)
    p->faults.graceful_stop_per_100k_events = static_cast<uint32_t>(rng.range(200, 1500));
  if (p->mutant == Mutant::no_foreign_lease_grace) p->faults.graceful_stop_per_100k_events = 0;
}

// The disk writer's FIFO (backpressure), in about two seeds of five: drawn from a stream of
// its own, so the draws above stay what they were.
void choose_writer(uint64_t seed, RunParams* p) {
  Rng rng = Rng::stream(seed, "params-writer");
  if (!rng.per_mille(400)) return;
  // A slow disk (0.25-16 MB/s) and a short FIFO (1-64 KiB): entries here are a few KiB.
  p->faults.disk.writer_bytes_per_ms = static_cast<uint64_t>(rng.range(1, 64)) << 8;
  p->faults.disk.writer_queue_bytes_max = static_cast<uint64_t>(rng.range(1, 64)) << 10;
}

// Every fault the simulator injects: its name (describe(), --without), whether this seed has
// it on, how to turn it off, and the counter of the final line that shows it acted. Only
// cluster runs have the network's and the leader's faults.
struct FaultRow {
  const char* name;
  bool (*on)(const RunParams&);
  void (*off)(RunParams&);
  const char* counter;
};
#define QUEEN_FAULT(name, field, counter)                                                     \
  FaultRow {                                                                                  \
    name, [](const RunParams& p) { return p.field != 0; }, [](RunParams& p) { p.field = 0; }, \
        counter                                                                               \
  }
const FaultRow kFaults[] = {
    QUEEN_FAULT("crash", faults.crash_per_100k_events, "crashes"),
    QUEEN_FAULT("crash-after-push-reply", faults.crash_after_push_reply_per_mille, "crashes"),
    QUEEN_FAULT("crash-mid-sync", faults.crash_mid_sync_per_mille, "crashes"),
    QUEEN_FAULT("pause", faults.pause_per_100k_events, "node_pauses"),
    QUEEN_FAULT("reply-loss", faults.reply_loss_per_mille, "lost_replies"),
    QUEEN_FAULT("slow-sync", faults.disk.sync_slow_per_mille, "syncs"),
    QUEEN_FAULT("fsync-fail", faults.disk.sync_fail_per_mille, "fsync_errors"),
    QUEEN_FAULT("read-corrupt", faults.disk.read_corrupt_per_mille, "read_corruptions"),
    QUEEN_FAULT("writer-backpressure", faults.disk.writer_bytes_per_ms, "writer_stalls"),
    QUEEN_FAULT("net-drop", net.drop_per_mille, "net_drops"),
    QUEEN_FAULT("net-dup", net.dup_per_mille, "net_duplicates"),
    QUEEN_FAULT("net-forge", net.forge_per_mille, "net_forged"),
    QUEEN_FAULT("partition", partition_per_100k_events, "net_partitioned_drops"),
    QUEEN_FAULT("long-outage", faults.long_outage_per_mille, "snapshots_installed"),
    QUEEN_FAULT("graceful-stop", faults.graceful_stop_per_100k_events, "graceful_stops"),
    QUEEN_FAULT("membership", faults.membership_per_100k_events, "membership_changes"),
    QUEEN_FAULT("wipe", faults.wipe_per_100k_events, "disk_wipes"),
    QUEEN_FAULT("older-build", faults.older_build, "upgrades"),
    QUEEN_FAULT("disaster", faults.disaster_after_ms, "force_recoveries"),
};
#undef QUEEN_FAULT

}  // namespace

std::vector<std::string> fault_names() {
  std::vector<std::string> names;
  for (const FaultRow& f : kFaults) names.emplace_back(f.name);
  return names;
}

bool turn_off_fault(RunParams* p, std::string_view name) {
  for (const FaultRow& f : kFaults) {
    if (name != f.name) continue;
    f.off(*p);
    return true;
  }
  return false;
}

std::string faults_on(const RunParams& p) {
  std::string s;
  for (const FaultRow& f : kFaults) {
    if (!f.on(p)) continue;
    s += (s.empty() ? "" : ",") + std::string(f.name) + "(" + f.counter + ")";
  }
  return s.empty() ? "none" : s;
}

namespace {

// Every mutant: its name on the command line and the invariant (DESIGN.md number) that must
// catch its planted bug.
struct MutantRow {
  Mutant mutant;
  const char* name;
  const char* invariant;
};
constexpr MutantRow kMutants[] = {
    {Mutant::none, "none", ""},
    {Mutant::answer_before_fsync, "answer-before-fsync", "1"},    // an answered push lost
    {Mutant::skip_lease_check, "skip-lease-check", "5"},          // an ack on a lease not live
    {Mutant::replay_partial_entry, "replay-partial-entry", "6"},  // half an entry recovered
    // nodes apply different entries at one index
    {Mutant::commit_without_majority, "commit-without-majority", "2"},
    {Mutant::vote_twice, "vote-twice", "2"},  // two leaders in one term
    // a lease of the old leader handed out again by the new one's clock
    {Mutant::no_foreign_lease_grace, "no-foreign-lease-grace", "5"},
    // a restored follower's store points at messages it cannot read
    {Mutant::snapshot_without_log_files, "snapshot-without-log-files", "6"},
    // rows replayed at recovery missing from the next delta: pushes lost
    {Mutant::delta_after_recovery, "delta-after-recovery", "1"},
    // a forged top term wraps: no leader is elected again
    {Mutant::unbounded_terms, "unbounded-terms", "8"},
    // a retry of a forwarded command applied twice, or answered as not applied
    {Mutant::forward_fresh_request_id, "forward-fresh-request-id", "3"},
    // a graceful stop fails the acks it took instead of committing them
    {Mutant::transfer_before_acks_commit, "transfer-before-acks-commit", "7"},
    // a leader commits with a learner's copy: a later leader lacks a committed entry
    {Mutant::learner_in_quorum, "learner-in-quorum", "2"},
    // two changes in flight: two majorities that do not meet
    {Mutant::changes_in_flight, "changes-in-flight", "2"},
    // a leader demoted by a committed change leads on
    {Mutant::removed_leader_serves, "removed-leader-serves", "2"},
    // a wiped disk counted: a leader lacks what the disk had acknowledged before
    {Mutant::no_fence, "no-fence", "2"},
    // a node of an older build is sent an entry it cannot read
    {Mutant::ungated_version, "ungated-version", "2"},
};

const MutantRow* mutant_row(Mutant m) {
  for (const MutantRow& r : kMutants)
    if (r.mutant == m) return &r;
  return nullptr;
}

}  // namespace

std::optional<Mutant> parse_mutant(std::string_view name) {
  for (const MutantRow& r : kMutants)
    if (name == r.name) return r.mutant;
  return std::nullopt;
}

const char* mutant_name(Mutant m) {
  const MutantRow* r = mutant_row(m);
  return r ? r->name : "?";
}

const char* mutant_invariant(Mutant m) {
  const MutantRow* r = mutant_row(m);
  return r ? r->invariant : "";
}

// The identity faults, from a stream of their own (so the draws before stay what they were):
// wiped disks, and a node of an older build upgraded during the run.
void choose_identity(uint64_t seed, Mutant mutant, RunParams* p) {
  Rng r = Rng::stream(seed, "params-identity");
  FaultParams& f = p->faults;
  // The membership mutants aim at the operator's voter changes, which a wipe holds back.
  if (mutant == Mutant::learner_in_quorum || mutant == Mutant::changes_in_flight ||
      mutant == Mutant::removed_leader_serves)
    return;
  bool wipes = r.per_mille(300) || mutant == Mutant::no_fence;
  if (wipes) f.wipe_per_100k_events = static_cast<uint32_t>(r.range(20, 200));
  if (mutant == Mutant::no_fence) f.wipe_per_100k_events = 400;
  f.readmit_delay_ms = r.range(500, 4000);
  if (r.per_mille(300) || mutant == Mutant::ungated_version) {
    f.older_build = static_cast<uint32_t>(r.range(1, p->nodes));
    f.upgrade_after_ms = r.range(1000, p->safety_ms);
  }
}

// The loss of every disk but one, from a stream of its own. Not in the mutants' runs: each
// searches its seeds for one planted bug in the worlds it was first caught in.
void choose_disaster(uint64_t seed, Mutant mutant, RunParams* p) {
  Rng r = Rng::stream(seed, "params-disaster");
  if (mutant != Mutant::none || !r.per_mille(200)) return;
  p->faults.disaster_after_ms = r.range(1000, std::max<int64_t>(1000, p->safety_ms - 2000));
}

RunParams choose_params(uint64_t seed, int nodes, Mutant mutant) {
  Rng rng = Rng::stream(seed, "params");
  RunParams p;
  p.seed = seed;
  p.nodes = nodes;
  p.mutant = mutant;
  p.faults = choose_faults(rng);
  p.work = choose_workload(rng);
  p.node = choose_node_config(rng, mutant);
  p.safety_ms = rng.range(8'000, 30'000);
  // Drawn last, so the draws above are the same as before workers existed.
  p.work.workers = rng.per_mille(750) ? static_cast<int>(rng.range(1, 3)) : 0;
  p.work.worker_sleep_past_lease_per_mille = static_cast<uint32_t>(rng.range(0, 100));
  if (nodes > 1) choose_cluster(rng, &p);
  // Liveness bound: a fixed allowance plus a budget per message each consumer may have to
  // work through alone (every group reads every message). A consumer picks a queue at random
  // for each pop, so once one queue is drained it may spend a long poll on each other queue
  // for every message it still finds (seed 897: 2 queues, long polls up to 3 s).
  const WorkloadParams& w = p.work;
  int64_t messages_max = int64_t{w.producers} * w.pushes_per_producer * w.items_per_push_max;
  int64_t empty_polls_ms = int64_t{w.queues - 1} * w.wait_per_mille * w.pop_wait_ms_max / 1000;
  int64_t per_message_ms = 100 + empty_polls_ms;
  p.liveness_ms_max = 60'000 + messages_max * per_message_ms / w.consumers_per_group;
  if (w.workers > 0) {
    p.liveness_ms_max =
        std::max(p.liveness_ms_max, 60'000 + messages_max * per_message_ms / w.workers);
  }
  if (nodes > 1) {  // a stream of its own, so the draws above stay what they were
    Rng forge = Rng::stream(seed, "params-forge");
    bool forger = forge.per_mille(300) || mutant == Mutant::unbounded_terms;
    p.net.forge_per_mille = forger ? static_cast<uint32_t>(forge.range(1, 20)) : 0;
  }
  choose_writer(seed, &p);
  if (nodes > 1) {  // a stream of its own, so the draws above stay what they were
    Rng members = Rng::stream(seed, "params-membership");
    bool aimed = mutant == Mutant::learner_in_quorum || mutant == Mutant::changes_in_flight ||
                 mutant == Mutant::removed_leader_serves;
    if ((members.per_mille(500) && mutant != Mutant::no_foreign_lease_grace) || aimed)
      p.faults.membership_per_100k_events = static_cast<uint32_t>(members.range(50, 500));
    if (aimed) p.partition_per_100k_events = std::max<uint32_t>(p.partition_per_100k_events, 40);
    // The planted membership bugs show only while a change is under way: changes come often.
    if (aimed)
      p.faults.membership_per_100k_events = static_cast<uint32_t>(members.range(2000, 5000));
  }
  if (nodes > 1) choose_identity(seed, mutant, &p);
  if (nodes > 1) choose_disaster(seed, mutant, &p);
  return p;
}

std::string RunParams::describe() const {
  const FaultParams& f = faults;
  const DiskFaultRates& d = f.disk;
  const WorkloadParams& w = work;
  std::string s = strf("faults=%s ", faults_on(*this).c_str());
  s += strf(
      "nodes=%d mutant=%s safety_ms=%lld liveness_ms_max=%lld "
      "crash_per_100k_events=%u crash_after_push_reply_per_mille=%u crash_mid_sync_per_mille=%u "
      "pause_per_100k_events=%u "
      "pause_ms=%lld-%lld reply_loss_per_mille=%u client_delay_us=%lld-%lld "
      "restart_delay_ms=%lld-%lld sync_latency_us=%lld-%lld sync_slow_per_mille=%u "
      "sync_slow_us_max=%lld fsync_fail_per_mille=%u read_corrupt_per_mille=%u "
      "crash_keep_per_mille=%u crash_torn_per_mille=%u clock_offset_us=%lld drift_ppm=%lld "
      "max_skew_us=%lld writer_bytes_per_ms=%llu writer_queue_bytes_max=%llu ",
      nodes, mutant_name(mutant), (long long)safety_ms, (long long)liveness_ms_max,
      f.crash_per_100k_events, f.crash_after_push_reply_per_mille, f.crash_mid_sync_per_mille,
      f.pause_per_100k_events, (long long)f.pause_ms_min, (long long)f.pause_ms_max,
      f.reply_loss_per_mille, (long long)f.client_delay_us_min, (long long)f.client_delay_us_max,
      (long long)f.restart_delay_ms_min, (long long)f.restart_delay_ms_max,
      (long long)d.sync_latency_us_min, (long long)d.sync_latency_us_max, d.sync_slow_per_mille,
      (long long)d.sync_slow_us_max, d.sync_fail_per_mille, d.read_corrupt_per_mille,
      d.crash_keep_per_mille, d.crash_torn_per_mille, (long long)f.clock.offset_us,
      (long long)f.clock.drift_ppm, (long long)f.clock.max_skew_us,
      (unsigned long long)d.writer_bytes_per_ms, (unsigned long long)d.writer_queue_bytes_max);
  s += strf(
      "queues=%d partitions_per_queue=%d producers=%d pushes_per_producer=%d "
      "items_per_push_max=%d two_queue_push_per_mille=%u payload_bytes_max=%d "
      "consumers_per_group=%d pop_batch_max=%u wait_per_mille=%u pop_wait_ms_max=%lld "
      "sleep_past_lease_per_mille=%u slow_work_per_mille=%u fail_per_mille=%u "
      "no_lease_per_mille=%u "
      "repeat_ack_per_mille=%u skip_ack_per_mille=%u bogus_ack_per_mille=%u lease_time_s=%lld "
      "retry_limit=%lld retry_delay_ms=%lld workers=%d worker_sleep_past_lease_per_mille=%u ",
      w.queues, w.partitions_per_queue, w.producers, w.pushes_per_producer, w.items_per_push_max,
      w.two_queue_push_per_mille, w.payload_bytes_max, w.consumers_per_group, w.pop_batch_max,
      w.wait_per_mille, (long long)w.pop_wait_ms_max, w.sleep_past_lease_per_mille,
      w.slow_work_per_mille, w.fail_per_mille, w.no_lease_per_mille, w.repeat_ack_per_mille,
      w.skip_ack_per_mille, w.bogus_ack_per_mille, (long long)w.lease_time_s,
      (long long)w.retry_limit, (long long)w.retry_delay_ms, w.workers,
      w.worker_sleep_past_lease_per_mille);
  s += strf("durable_every_ms=%lld dedup_front_bytes_max=%llu ", (long long)node.durable_every_ms,
            (unsigned long long)node.dedup_front_bytes_max);
  s += strf(
      "checkpoint_ms=%lld pipeline_max=%u batch_cmds_max=%u segment_bytes=%llu "
      "qlog_shards=%u",
      (long long)node.checkpoint_ms, node.pipeline_max, node.batch_cmds_max,
      (unsigned long long)node.segment_bytes, node.qlog_shards);
  if (nodes > 1) {
    s += strf(
        " net_delay_us=%lld-%lld net_drop_per_mille=%u net_dup_per_mille=%u "
        "net_forge_per_mille=%u partition_per_100k_events=%u raft_cache_bytes_max=%llu "
        "long_outage_per_mille=%u "
        "snapshot_chunk_bytes=%llu purge_hold_ms=%lld clock_offsets_ms=",
        (long long)net.delay_us_min, (long long)net.delay_us_max, net.drop_per_mille,
        net.dup_per_mille, net.forge_per_mille, partition_per_100k_events,
        (unsigned long long)node.raft_cache_bytes_max, faults.long_outage_per_mille,
        (unsigned long long)node.snapshot_chunk_bytes, (long long)node.raft_purge_hold_ms);
    for (const ClockModel& c : node_clocks)
      s += strf("%lld@%lldppm,", (long long)(c.offset_us / 1000), (long long)c.drift_ppm);
    s += strf(
        " membership_per_100k_events=%u wipe_per_100k_events=%u readmit_delay_ms=%lld "
        "older_build=%u upgrade_after_ms=%lld disaster_after_ms=%lld",
        faults.membership_per_100k_events, faults.wipe_per_100k_events,
        (long long)faults.readmit_delay_ms, faults.older_build, (long long)faults.upgrade_after_ms,
        (long long)faults.disaster_after_ms);
  }
  return s;
}

}  // namespace queen::sim
