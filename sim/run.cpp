#include "sim/run.h"

#include "sim/checker.h"
#include "sim/workload.h"

namespace queen::sim {
namespace {

constexpr int kNode = 0;
constexpr int64_t kDrainCheckEveryUs = 20'000;
constexpr int64_t kStrictAfterHealUs = 6'000'000;  // longer than any pause or restart delay

SimWorld* g_current_world = nullptr;

class Run {
 public:
  Run(const RunParams& p, const RunOptions& o)
      : p_(p),
        world_(p.seed, ClientNetFaults{p.faults.reply_loss_per_mille, p.faults.client_delay_us_min,
                                       p.faults.client_delay_us_max}),
        checker_(world_, p),
        workload_(world_, checker_, p),
        faults_rng_(world_.stream("faults.schedule")) {
    world_.trace().set_echo(o.trace_out);
    g_current_world = &world_;
    world_.before_crash = [this](int n, const Node& node) { checker_.before_crash(n, node); };
    world_.after_start = [this](int n, const Node& node) { checker_.after_start(n, node); };
  }

  RunOutcome go() {
    setup();
    if (ok()) safety();
    if (ok()) heal();
    if (ok()) liveness();
    if (ok()) final_phase();
    return outcome();
  }

 private:
  bool ok() const { return world_.violations().empty(); }

  void setup() {
    for (const char* c : {"crashes", "restarts", "torn_writes", "dropped_writes", "fsync_errors",
                          "read_corruptions", "lost_replies", "node_pauses", "fatal_exits"}) {
      world_.counters()[c] = 0;
    }
    NodeSetup s;
    s.config = p_.node;
    s.disk = p_.faults.disk;
    s.clock = p_.faults.clock;
    s.restart_delay_us_min = p_.faults.restart_delay_ms_min * 1000;
    s.restart_delay_us_max = p_.faults.restart_delay_ms_max * 1000;
    world_.add_node(s);
    world_.note(p_.describe());
    world_.start_node(kNode);
    workload_.start();
  }

  void safety() {
    int64_t end_us = world_.now_us() + p_.safety_ms * 1000;
    while (ok() && world_.now_us() < end_us && world_.step()) inject_faults();
  }

  // Crashes and pauses chosen per dispatched event, so that they land at any point of the
  // node's work, plus a crash right after a push was answered (the window in which an answer
  // given before its fsync would be lost).
  void inject_faults() {
    const FaultParams& f = p_.faults;
    bool pushed = workload_.take_push_answered();
    if (!world_.up(kNode)) return;
    const char* why = nullptr;
    if (faults_rng_.per_100k(f.crash_per_100k_events)) why = "injected";
    if (pushed && faults_rng_.per_mille(f.crash_after_push_reply_per_mille)) {
      why = "injected after a push answer";
    }
    if (f.crash_mid_sync_per_mille > 0 && world_.disk(kNode).volatile_files() >= 2 &&
        faults_rng_.per_mille(f.crash_mid_sync_per_mille)) {
      why = "injected with several files unsynced";
    }
    if (why != nullptr) {
      world_.crash_node(kNode, why, true);
      return;
    }
    if (f.pause_per_100k_events > 0 && !world_.paused(kNode) &&
        faults_rng_.per_100k(f.pause_per_100k_events)) {
      world_.pause_node(kNode, faults_rng_.range(f.pause_ms_min, f.pause_ms_max) * 1000);
    }
  }

  void heal() {
    world_.note("heal: faults off");
    world_.set_client_faults(
        ClientNetFaults{0, p_.faults.client_delay_us_min, p_.faults.client_delay_us_max});
    DiskFaultRates d = p_.faults.disk;
    d.sync_fail_per_mille = 0;
    d.read_corrupt_per_mille = 0;
    world_.set_disk_rates(kNode, d);
    heal_us_ = world_.now_us();
    workload_.enter_liveness(heal_us_ + kStrictAfterHealUs);
  }

  void liveness() {
    int64_t bound_us = heal_us_ + p_.liveness_ms_max * 1000;
    int64_t next_check_us = 0;
    std::string why = "not checked";
    while (ok()) {
      if (world_.now_us() >= next_check_us) {
        next_check_us = world_.now_us() + kDrainCheckEveryUs;
        if (workload_.producers_done() && checker_.drained(&why)) break;
        if (!workload_.producers_done())
          why = "producers unfinished:" + workload_.pending_summary();
      }
      if (world_.now_us() > bound_us || !world_.step()) {
        world_.violation("8 liveness",
                         strf("not finished %lld s after healing: %s",
                              static_cast<long long>(p_.liveness_ms_max / 1000), why.c_str()));
        return;
      }
    }
    if (ok()) {
      world_.counters()["liveness_ms"] = static_cast<uint64_t>((world_.now_us() - heal_us_) / 1000);
    }
  }

  void final_phase() {
    workload_.stop();
    int64_t end_us = world_.now_us() + p_.settle_ms * 1000;
    while (ok() && world_.now_us() < end_us && world_.step()) {
    }
    if (!ok()) return;
    world_.crash_node(kNode, "final restart", false);
    world_.start_node(kNode);
    if (ok()) checker_.final_check();
  }

  RunOutcome outcome() {
    RunOutcome out;
    out.seed = p_.seed;
    out.trace_hash = world_.trace().hash();
    out.trace_lines = world_.trace().lines();
    out.sim_us = world_.elapsed_us();
    out.violations = world_.violations();
    out.counters = world_.counters();
    NodeStats s = world_.total_stats(kNode);
    out.counters["lease_expiries"] = s.lease_expiries;
    out.counters["redeliveries"] = s.redeliveries;
    out.counters["dlq_moves"] = s.dlq_moves;
    out.counters["checkpoints"] = s.checkpoints;
    out.counters["entries_committed"] = s.entries_committed;
    out.counters["recovered_entries"] = s.recovered_entries;
    out.counters["torn_tails_cut"] = s.torn_tails_cut;
    out.counters["pushes_answered"] = checker_.pushes_answered();
    out.counters["pops_answered"] = checker_.pops_answered();
    out.counters["acks_answered"] = checker_.acks_answered();
    return out;
  }

  const RunParams& p_;
  SimWorld world_;
  Checker checker_;
  Workload workload_;
  Rng faults_rng_;
  int64_t heal_us_ = 0;
};

}  // namespace

RunOutcome run_seed(const RunParams& params, const RunOptions& options) {
  Run run(params, options);
  RunOutcome out = run.go();
  g_current_world = nullptr;
  return out;
}

SimWorld* current_world() {
  return g_current_world;
}

}  // namespace queen::sim
