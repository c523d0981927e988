#include "sim/run.h"

#include <algorithm>
#include <map>
#include <string_view>

#include "sim/checker.h"
#include "sim/workload.h"

namespace queen::sim {
namespace {

constexpr int kNode = 0;                      // a single node's index
constexpr int64_t kSettleMaxUs = 60'000'000;  // cluster: the final restart settles within this
constexpr int64_t kDrainCheckEveryUs = 20'000;
constexpr int64_t kStrictAfterHealUs = 6'000'000;  // longer than any pause or restart delay

SimWorld* g_current_world = nullptr;

class Run : public ClientSink {
 public:
  Run(const RunParams& p, const RunOptions& o)
      : p_(p),
        world_(p.seed, ClientNetFaults{p.faults.reply_loss_per_mille, p.faults.client_delay_us_min,
                                       p.faults.client_delay_us_max}),
        checker_(world_, p),
        workload_(world_, checker_, p),
        faults_rng_(world_.stream("faults.schedule")),
        outage_rng_(world_.stream("faults.outage")),
        membership_rng_(world_.stream("faults.membership")),
        identity_rng_(world_.stream("faults.identity")) {
    world_.trace().set_echo(o.trace_out);
    g_current_world = &world_;
    world_.before_crash = [this](int n, const Node& node) { checker_.before_crash(n, node); };
    world_.after_start = [this](int n, const Node& node) { checker_.after_start(n, node); };
    workload_.disruptions = [this] { return disruptions(); };
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
    s.config.track_applied_chain = true;  // state machine safety compares the chains
    s.disk = p_.faults.disk;
    s.clock = p_.faults.clock;
    s.restart_delay_us_min = p_.faults.restart_delay_ms_min * 1000;
    s.restart_delay_us_max = p_.faults.restart_delay_ms_max * 1000;
    for (int n = 0; n < p_.nodes; ++n) {
      if (!p_.node_clocks.empty()) s.clock = p_.node_clocks[n];
      s.config.node_id = static_cast<uint64_t>(n) + 1;
      s.config.format_max = p_.faults.older_build == s.config.node_id ? 1 : kFormatMax;
      s.config.voters.clear();
      if (p_.nodes > 1)
        for (int v = 1; v <= p_.nodes; ++v) s.config.voters.push_back(static_cast<uint64_t>(v));
      world_.add_node(s);
    }
    world_.network().set_rates(p_.net);
    world_.note(p_.describe());
    for (int n = 0; n < p_.nodes; ++n) world_.start_node(n);
    workload_.start();
  }

  void safety() {
    int64_t end_us = world_.now_us() + p_.safety_ms * 1000;
    while (ok() && world_.now_us() < end_us && world_.step()) {
      check_raft();
      inject_faults();
    }
  }

  bool cluster() const { return p_.nodes > 1; }

  // Faults that may fail a request whatever the node does (a graceful stop is not one).
  uint64_t disruptions() {
    Counters& c = world_.counters();
    return c["crashes"] + c["node_pauses"] + partitions_;
  }

  // A graceful stop of the leader, as on SIGTERM: it hands leadership over (Node::hand_over),
  // then, once another node leads or the hand-over's time is up, writes its stop checkpoint
  // and dedup rings (Node::checkpoint_before_stop) and its process exits once they are
  // durable or the checkpoint's time is up.
  void graceful_stop() {
    const FaultParams& f = p_.faults;
    if (graceful_ >= 0) {
      const Node* node = world_.node(graceful_);
      bool over = node == nullptr || std::string_view(node->raft_view().role) != "leader" ||
                  world_.now_us() >= graceful_until_us_;
      if (!over) return;
      if (graceful_checkpoint_until_us_ < 0)
        graceful_checkpoint_until_us_ = world_.now_us() + kStopCheckpointWaitUs;
      bool written = node == nullptr || world_.checkpoint_before_stop(graceful_);
      if (!written && world_.now_us() < graceful_checkpoint_until_us_) return;
      graceful_checkpoint_until_us_ = -1;
      if (world_.node(graceful_) != nullptr)
        world_.crash_node(graceful_, "graceful stop: exits", true);
      workload_.graceful_stop_ended();
      graceful_ = -1;
      return;
    }
    if (f.graceful_stop_per_100k_events == 0 ||
        !faults_rng_.per_100k(f.graceful_stop_per_100k_events))
      return;
    int leader = writable_leader();
    if (leader < 0 || !world_.hand_over(leader)) return;
    graceful_ = leader;
    graceful_until_us_ = world_.now_us() + (p_.node.hand_over_ack_wait_ms + 3000) * 1000;
    world_.count("graceful_stops");
    world_.note(strf("n%d graceful stop: hands leadership over", leader));
    workload_.graceful_stop_began(leader);
  }

  // The operator changes the voters now and then: one node (the leader, too) is demoted to a
  // learner, or every node is made a voter again (one promotion per change, core/raft).
  void change_membership() {
    const FaultParams& f = p_.faults;
    // While a wiped node waits to be added back, the operator changes nothing else.
    if (membership_waiting() || f.membership_per_100k_events == 0 || recovering() ||
        !membership_rng_.per_100k(f.membership_per_100k_events))
      return;
    MembershipCmd cmd;
    cmd.op = MembershipOp::set_voters;
    // Half the time every node votes; else one or two are left out (demoted to learners). The
    // membership mutants get swings between one voter and all of them: changes of two steps.
    bool aimed = p_.mutant == Mutant::learner_in_quorum || p_.mutant == Mutant::changes_in_flight;
    int keep = membership_rng_.per_mille(aimed ? 300 : 500) ? p_.nodes
               : aimed                                      ? 1
                       : static_cast<int>(membership_rng_.range(1, p_.nodes - 1));
    int first = static_cast<int>(membership_rng_.range(0, p_.nodes - 1));
    for (int k = 0; k < keep; ++k)
      cmd.ids.push_back(NodeId(static_cast<uint64_t>((first + k) % p_.nodes) + 1));
    std::sort(cmd.ids.begin(), cmd.ids.end());
    send_membership(std::move(cmd));
  }

  std::optional<ReplyHandle> send_membership(MembershipCmd cmd) {
    int to = static_cast<int>(membership_rng_.range(0, p_.nodes - 1));
    // After the disaster the operator asks a member: a lost node knows no leader until added.
    if (disaster_at_us_ >= 0 &&
        (to == wiped_ ||
         std::find(readmit_queue_.begin(), readmit_queue_.end(), to) != readmit_queue_.end()))
      to = disaster_survivor_;
    if (!world_.up(to)) return std::nullopt;
    CommandEnvelope env;
    int64_t now_ms = world_.node_now_us(to) / 1000;
    env.request_id =
        RequestId{make_uuid_v7(now_ms, membership_rng_.next(), membership_rng_.next())};
    env.deadline_ms = now_ms + kMembershipTimeoutMs;
    env.command = std::move(cmd);
    auto handle = world_.submit(to, std::move(env), this);
    if (!handle) return std::nullopt;
    membership_waiting_ = true;
    membership_sent_us_ = world_.now_us();
    return handle;
  }

  // A change is on its way (its node may crash: past its deadline it is given up).
  bool membership_waiting() const {
    return membership_waiting_ &&
           world_.now_us() < membership_sent_us_ + (kMembershipTimeoutMs + 1000) * 1000;
  }

  // Healing: a wiped node is added back, and every node is a voter again, asked until a leader
  // answers so.
  void restore_membership() {
    const FaultParams& f = p_.faults;
    if (!cluster() || (f.membership_per_100k_events == 0 && f.wipe_per_100k_events == 0 &&
                       f.disaster_after_ms == 0))
      return;
    membership_restored_ = false;
    restore_membership_again();
  }

  void restore_membership_again() {
    if (membership_restored_ || !ok()) return;
    recover_progress();
    if (recovering()) {
      readmit_at_us_ = std::min(readmit_at_us_, world_.now_us());
      readmit();
    } else if (p_.faults.membership_per_100k_events == 0) {
      membership_restored_ = true;
      return;
    } else if (!membership_waiting()) {
      MembershipCmd cmd;
      cmd.op = MembershipOp::set_voters;
      for (int n = 0; n < p_.nodes; ++n) cmd.ids.push_back(NodeId(static_cast<uint64_t>(n) + 1));
      send_membership(std::move(cmd));
    }
    world_.after(200'000, "membership-restore", [this] { restore_membership_again(); });
  }

  // ---- the identity faults: a wiped disk under its old id, and an older build upgraded

  // The wiped node is fenced until the operator removes it, adds it back as a learner and
  // promotes it: one step per answer, each retried until it is answered.
  void readmit() {
    if (wiped_ < 0 || membership_waiting() || world_.now_us() < readmit_at_us_) return;
    MembershipCmd cmd;
    NodeId id(static_cast<uint64_t>(wiped_) + 1);
    cmd.op = readmit_step_ == 0   ? MembershipOp::remove
             : readmit_step_ == 1 ? MembershipOp::add_learner
                                  : MembershipOp::promote;
    if (readmit_step_ == 1) {
      cmd.id = id;
      cmd.raft_addr = strf("n%d:raft", wiped_ + 1);
      cmd.http_addr = strf("n%d:http", wiped_ + 1);
    } else {
      cmd.ids = {id};
    }
    readmit_handle_ = send_membership(std::move(cmd));
  }

  void readmit_answered(const MembershipReply& m) {
    bool done = m.code.empty() || (readmit_step_ == 0 && m.code == "not_a_member");
    if (!done) {
      if (m.code != readmit_refused_)
        world_.note(strf("readmit n%d: step %d refused: %s (%s)", wiped_, readmit_step_,
                         m.code.c_str(), m.error.c_str()));
      readmit_refused_ = m.code;
      readmit_at_us_ = world_.now_us() + 300'000;  // learner_behind, in_flight: again later
      return;
    }
    world_.note(strf("readmit n%d: step %d done", wiped_, readmit_step_));
    if (++readmit_step_ < 3) return;
    world_.count("readmissions");
    wiped_ = -1;
    next_readmission();
  }

  // A wiped node waits to be added back, or a disaster is not yet recovered from.
  bool recovering() const { return wiped_ >= 0 || survivor_ >= 0 || !readmit_queue_.empty(); }

  // The disaster came and a lost node is not yet a voter again (the end checks need them all).
  bool disaster_unrecovered() const {
    return survivor_ >= 0 || !readmit_queue_.empty() || (disaster_at_us_ >= 0 && wiped_ >= 0);
  }

  void next_readmission() {
    if (wiped_ >= 0 || readmit_queue_.empty()) return;
    wiped_ = readmit_queue_.front();
    readmit_queue_.erase(readmit_queue_.begin());
    readmit_step_ = 0;
    readmit_at_us_ = world_.now_us();
  }

  // Every node's configuration pins `victim` to the disk it has (a wipe now is fenced by all),
  // and the voters left without it are a majority (the fault model loses one disk of three).
  bool may_wipe(int victim) {
    const Node* v = world_.node(victim);
    if (v == nullptr) return false;
    for (int n = 0; n < p_.nodes; ++n) {
      const Node* node = world_.node(n);
      if (node == nullptr || node->pinned_disk(static_cast<uint64_t>(victim) + 1) != v->disk_id())
        return false;
      if (node->voters() < 3) return false;
    }
    return true;
  }

  // A node's disk is replaced by an empty one and it restarts under its old id (an operator's
  // mistake the fence must absorb); half the time the leader crashes with it.
  void maybe_wipe() {
    const FaultParams& f = p_.faults;
    if (f.wipe_per_100k_events == 0 || recovering() || disaster_at_us_ >= 0 || graceful_ >= 0 ||
        !identity_rng_.per_100k(f.wipe_per_100k_events))
      return;
    int victim = static_cast<int>(identity_rng_.range(0, p_.nodes - 1));
    bool leader_too = identity_rng_.per_mille(500);
    if (!may_wipe(victim)) return;
    int leader = writable_leader();
    world_.crash_node(victim, "injected: its disk is wiped", true);
    world_.disk(victim).wipe();
    world_.count("disk_wipes");
    if (leader_too && leader >= 0 && leader != victim)
      world_.crash_node(leader, "injected with a wipe", true);
    wiped_ = victim;
    readmit_step_ = 0;
    readmit_at_us_ = world_.now_us() + f.readmit_delay_ms * 1000;
  }

  // ---- the loss of every disk but one, recovered from with QUEEN_RAFT_FORCE_RECOVER

  // The node whose durable log is the most up to date: it holds every committed entry when
  // every node is up (a majority's logs are among those compared). -1 while one is down.
  int most_up_to_date() {
    int best = -1;
    Node::RaftView bv;
    for (int n = 0; n < p_.nodes; ++n) {
      const Node* node = world_.node(n);
      if (node == nullptr) return -1;
      Node::RaftView v = node->raft_view();
      if (best >= 0 && std::pair(v.durable_term, v.durable_index) <=
                           std::pair(bv.durable_term, bv.durable_index))
        continue;
      best = n;
      bv = v;
    }
    return best;
  }

  // Once, at disaster_after_ms (while no other operator's work is under way): every disk but
  // the survivor's is lost. Those nodes come back empty with QUEEN_RAFT_JOIN and wait to be
  // added; the survivor restarts with QUEEN_RAFT_FORCE_RECOVER naming itself.
  void disaster() {
    const FaultParams& f = p_.faults;
    if (f.disaster_after_ms == 0 || disaster_at_us_ >= 0 || recovering() || graceful_ >= 0 ||
        membership_waiting() || world_.elapsed_us() < f.disaster_after_ms * 1000)
      return;
    int s = most_up_to_date();
    if (s < 0) return;
    recovered_from_ = world_.node(s)->raft_view().durable_index;
    for (int n = 0; n < p_.nodes; ++n) {
      if (n == s) continue;
      world_.next_config(n).join = true;
      world_.crash_node(n, "disaster: its disk is lost", true);
      world_.disk(n).wipe();
      readmit_queue_.push_back(n);
    }
    world_.next_config(s).force_recover = static_cast<uint64_t>(s) + 1;
    world_.crash_node(s, "disaster: restarts with QUEEN_RAFT_FORCE_RECOVER", true);
    // The lost nodes' terms die with their disks: the survivor may lead a term one of them led
    // (its own vote for it was not yet durable), which no log that is left holds an entry of.
    std::erase_if(leaders_, [&](const auto& kv) { return kv.second != s; });
    survivor_ = s;
    disaster_survivor_ = s;
    disaster_at_us_ = world_.now_us();
    world_.count("force_recoveries");
    world_.note(strf("disaster: n%d survives with its log durable to %llu", s,
                     static_cast<unsigned long long>(recovered_from_)));
  }

  // The operator unsets QUEEN_RAFT_FORCE_RECOVER once the survivor's one-voter configuration
  // is in its log and committed, then adds the lost nodes back one at a time.
  void recover_progress() {
    if (survivor_ < 0) return;
    const Node* s = world_.node(survivor_);
    if (s == nullptr) return;
    Node::RaftView v = s->raft_view();
    if (!v.membership_committed || v.membership_index <= recovered_from_ || s->voters() != 1)
      return;
    world_.next_config(survivor_).force_recover = 0;
    world_.note(strf("n%d leads alone from entry %llu: QUEEN_RAFT_FORCE_RECOVER unset", survivor_,
                     static_cast<unsigned long long>(v.membership_index)));
    survivor_ = -1;
    next_readmission();
  }

  // The older build's node runs the new one from its next start on.
  void upgrade(int n) {
    if (p_.faults.older_build != static_cast<uint64_t>(n) + 1 || upgraded_) return;
    world_.next_config(n).format_max = kFormatMax;
    upgraded_ = true;
    world_.count("upgrades");
    world_.note(strf("n%d upgraded: reads cluster format %u from its next start", n, kFormatMax));
  }

  void on_reply_sent(ReplyHandle, const Reply&, bool lost) override {
    if (lost) membership_waiting_ = false;
  }

  void on_reply(ReplyHandle h, const Reply& reply) override {
    membership_waiting_ = false;
    const auto* m = std::get_if<MembershipReply>(&reply.body);
    if (readmit_handle_ == h) {
      readmit_handle_.reset();
      if (m != nullptr) readmit_answered(*m);
    }
    if (m == nullptr || !m->code.empty()) return;
    world_.count("membership_changes");
    size_t voters = 0;
    for (const MemberView& v : m->members) voters += v.voter ? 1 : 0;
    world_.note(strf("membership: %zu voters of %zu members at entry %llu", voters,
                     m->members.size(), static_cast<unsigned long long>(m->index)));
    if (voters == static_cast<size_t>(p_.nodes)) membership_restored_ = true;
  }

  // Raft's safety, observed after every event: at most one leader per term (election
  // safety), and nodes that applied the same number of entries applied the same entries
  // (state machine safety, which needs log matching and leader completeness).
  void check_raft() {
    if (!cluster()) return;
    for (int n = 0; n < p_.nodes; ++n) {
      const Node* node = world_.node(n);
      if (node == nullptr) continue;
      Node::RaftView v = node->raft_view();
      if (std::string_view(v.role) == "leader") {
        auto [it, fresh] = leaders_.emplace(v.term, n);
        if (!fresh && it->second != n) {
          world_.violation("2 election safety", strf("n%d and n%d both lead term %llu", it->second,
                                                     n, static_cast<unsigned long long>(v.term)));
          return;
        }
        if (v.membership_committed && !v.voter) {
          world_.violation("2 a removed leader leads",
                           strf("n%d leads term %llu, no voter of its committed configuration", n,
                                static_cast<unsigned long long>(v.term)));
          return;
        }
        if (int old = voter_below_format(*node, v); old >= 0) {
          world_.violation("2 a voter cannot read the cluster format",
                           strf("n%d leads at cluster format %u with n%d a voter, which reads %u",
                                n, v.cluster_version, old, world_.next_config(old).format_max));
          return;
        }
        if (v.writable && (v.term != writable_term_)) {
          writable_term_ = v.term;
          checker_.leader_changed();
        }
      }
      if (node->stats().entries_unreadable > 0) {
        world_.violation("2 an entry a node cannot read",
                         strf("n%d (cluster format %u) was sent an entry of a later format", n,
                              world_.next_config(n).format_max));
        return;
      }
      auto [it, fresh] = chains_.emplace(v.applied, std::make_pair(v.applied_chain, n));
      if (!fresh && it->second.first != v.applied_chain) {
        world_.violation("2 state machine safety",
                         strf("n%d and n%d applied different entries up to %llu", it->second.second,
                              n, static_cast<unsigned long long>(v.applied)));
        return;
      }
    }
  }

  // A voter of the leader's configuration in use that reads below its cluster format (the
  // version gate, core/node identity_tick, and the promotion check forbid it), or -1.
  int voter_below_format(const Node& leader, const Node::RaftView& v) {
    for (int k = 0; k < p_.nodes; ++k)
      if (leader.is_voter(static_cast<uint64_t>(k) + 1) &&
          world_.next_config(k).format_max < v.cluster_version)
        return k;
    return -1;
  }

  // The node that leads and serves, if any.
  int writable_leader() {
    for (int n = 0; n < p_.nodes; ++n) {
      const Node* node = world_.node(n);
      if (node != nullptr && node->raft_view().writable) return n;
    }
    return -1;
  }

  // Crashes and pauses chosen per dispatched event, so that they land at any point of the
  // node's work, plus a crash right after a push was answered (the window in which an answer
  // given before its fsync would be lost).
  void inject_faults() {
    const FaultParams& f = p_.faults;
    bool pushed = workload_.take_push_answered();
    if (cluster()) inject_net_faults();
    if (cluster()) graceful_stop();
    if (cluster()) change_membership();
    if (cluster()) maybe_wipe();
    if (cluster()) disaster();
    if (cluster()) recover_progress();
    if (cluster()) readmit();
    // In a cluster the victim is any node; a crash after a push answer hits the one answering.
    int victim = cluster() ? static_cast<int>(faults_rng_.range(0, p_.nodes - 1)) : kNode;
    if (pushed) victim = workload_.target();
    if (!world_.up(victim)) return;
    const char* why = nullptr;
    if (faults_rng_.per_100k(f.crash_per_100k_events)) why = "injected";
    if (pushed && faults_rng_.per_mille(f.crash_after_push_reply_per_mille)) {
      why = "injected after a push answer";
    }
    if (f.crash_mid_sync_per_mille > 0 && world_.disk(victim).volatile_files() >= 2 &&
        faults_rng_.per_mille(f.crash_mid_sync_per_mille)) {
      why = "injected with several files unsynced";
    }
    if (why != nullptr) {
      int64_t down_us = -1;  // the world's usual restart delay
      if (cluster() && outage_rng_.per_mille(f.long_outage_per_mille))
        down_us = outage_rng_.range(f.long_outage_ms_min, f.long_outage_ms_max) * 1000;
      if (world_.elapsed_us() >= f.upgrade_after_ms * 1000) upgrade(victim);
      world_.crash_node(victim, why, true, down_us);
      return;
    }
    if (f.pause_per_100k_events > 0 && !world_.paused(victim) &&
        faults_rng_.per_100k(f.pause_per_100k_events)) {
      world_.pause_node(victim, faults_rng_.range(f.pause_ms_min, f.pause_ms_max) * 1000);
    }
  }

  // Partitions: now and then one node is cut off (both ways, or only its sends), and healed
  // again a few seconds later.
  void inject_net_faults() {
    if (p_.partition_per_100k_events == 0) return;
    if (partitioned_until_us_ != 0 && world_.now_us() >= partitioned_until_us_) {
      world_.network().heal();
      world_.note("net: healed");
      partitioned_until_us_ = 0;
      ++partitions_;
    }
    if (partitioned_until_us_ == 0 && faults_rng_.per_100k(p_.partition_per_100k_events)) {
      ++partitions_;
      int n = static_cast<int>(faults_rng_.range(0, p_.nodes - 1));
      bool one_way = faults_rng_.per_mille(300);
      if (one_way) {
        for (int o = 0; o < p_.nodes; ++o)
          if (o != n) world_.network().cut(n, o);
      } else {
        world_.network().isolate(n, p_.nodes);
      }
      partitioned_until_us_ = world_.now_us() + faults_rng_.range(500, 6000) * 1000;
      world_.note(strf("net: n%d cut off%s", n, one_way ? " (its sends only)" : ""));
    }
  }

  void heal() {
    world_.note("heal: faults off");
    restore_membership();
    if (p_.faults.older_build != 0 && !upgraded_) {  // the rolling upgrade's last restart
      int n = static_cast<int>(p_.faults.older_build) - 1;
      upgrade(n);
      if (world_.up(n)) world_.crash_node(n, "upgrade: restarts on the new build", true);
    }
    if (graceful_ >= 0) {  // a stop under way ends now: its process exits and restarts
      if (world_.up(graceful_)) world_.crash_node(graceful_, "graceful stop: exits", true);
      workload_.graceful_stop_ended();
      graceful_ = -1;
      graceful_checkpoint_until_us_ = -1;
    }
    world_.set_client_faults(
        ClientNetFaults{0, p_.faults.client_delay_us_min, p_.faults.client_delay_us_max});
    DiskFaultRates d = p_.faults.disk;
    d.sync_fail_per_mille = 0;
    d.read_corrupt_per_mille = 0;
    // A slow disk's writer blocks its node for as long as it likes: a fault, healed too (what
    // it queued still drains first).
    d.writer_bytes_per_ms = 0;
    for (int n = 0; n < p_.nodes; ++n) world_.set_disk_rates(n, d);
    world_.network().heal();
    world_.network().set_rates(NetFaultRates{});
    partitioned_until_us_ = 0;
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
        if (cluster()) {
          int leader = writable_leader();
          if (leader < 0) {
            why = "no leader serving";
          } else {
            checker_.set_reference(leader);
          }
        }
        bool recovered = !disaster_unrecovered();
        if (workload_.producers_done() && recovered && checker_.drained(&why)) break;
        if (!workload_.producers_done())
          why = "producers unfinished:" + workload_.pending_summary();
        if (!recovered) why = "the lost nodes are not all added back";
      }
      bool stepped = world_.step();
      check_raft();
      if (world_.now_us() > bound_us || !stepped) {
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
    if (cluster()) return final_cluster();
    world_.crash_node(kNode, "final restart", false);
    world_.start_node(kNode);
    if (ok()) checker_.final_check();
  }

  // Every node restarts; once a leader serves and every node has applied all it committed,
  // the end checks read the leader, and every node must have applied the same entries.
  void final_cluster() {
    for (int n = 0; n < p_.nodes; ++n) world_.crash_node(n, "final restart", false);
    for (int n = 0; n < p_.nodes; ++n) world_.start_node(n);
    int64_t end_us = world_.now_us() + kSettleMaxUs;
    int leader = -1;
    while (ok() && world_.now_us() < end_us && world_.step()) {
      check_raft();
      leader = writable_leader();
      if (leader >= 0 && all_applied(leader)) break;
      leader = -1;
    }
    if (!ok()) return;
    if (leader < 0) {
      world_.violation("8 liveness",
                       "after the final restart no leader served with every node "
                       "caught up within 60 s");
      return;
    }
    checker_.set_reference(leader);
    checker_.final_check();
  }

  bool all_applied(int leader) {
    Node::RaftView lv = world_.node(leader)->raft_view();
    if (lv.applied < lv.last_index) return false;
    for (int n = 0; n < p_.nodes; ++n) {
      const Node* node = world_.node(n);
      if (node == nullptr) return false;
      Node::RaftView v = node->raft_view();
      if (v.applied != lv.applied || v.applied_chain != lv.applied_chain) return false;
    }
    return true;
  }

  RunOutcome outcome() {
    RunOutcome out;
    out.seed = p_.seed;
    out.trace_hash = world_.trace().hash();
    out.trace_lines = world_.trace().lines();
    out.sim_us = world_.elapsed_us();
    out.violations = world_.violations();
    out.counters = world_.counters();
    NodeStats s;
    for (int n = 0; n < p_.nodes; ++n) {
      NodeStats t = world_.total_stats(n);
      s.lease_expiries += t.lease_expiries;
      s.redeliveries += t.redeliveries;
      s.dlq_moves += t.dlq_moves;
      s.checkpoints += t.checkpoints;
      s.entries_committed += t.entries_committed;
      s.recovered_entries += t.recovered_entries;
      s.recovery_files_skipped += t.recovery_files_skipped;
      s.torn_tails_cut += t.torn_tails_cut;
      s.entries_read_back += t.entries_read_back;
      s.store_checkpoints += t.store_checkpoints;
      s.log_files_reclaimed += t.log_files_reclaimed;
      s.snapshots_sent += t.snapshots_sent;
      s.snapshots_installed += t.snapshots_installed;
      s.forwarded += t.forwarded;
      s.forward_retries += t.forward_retries;
      s.forward_unknown += t.forward_unknown;
      s.transfers += t.transfers;
      s.row_hash_reads += t.row_hash_reads;
      s.rings_loaded += t.rings_loaded;
      s.rings_evicted += t.rings_evicted;
      s.list_slices += t.list_slices;
    }
    if (cluster()) out.counters["raft_entries_read_back"] = s.entries_read_back;
    out.counters["raft_terms"] = leaders_.size();
    out.counters["lease_expiries"] = s.lease_expiries;
    out.counters["redeliveries"] = s.redeliveries;
    out.counters["dlq_moves"] = s.dlq_moves;
    out.counters["checkpoints"] = s.checkpoints;
    out.counters["entries_committed"] = s.entries_committed;
    out.counters["recovered_entries"] = s.recovered_entries;
    if (!cluster()) out.counters["recovery_files_skipped"] = s.recovery_files_skipped;
    out.counters["torn_tails_cut"] = s.torn_tails_cut;
    out.counters["store_checkpoints"] = s.store_checkpoints;
    out.counters["log_files_reclaimed"] = s.log_files_reclaimed;
    out.counters["row_hash_reads"] = s.row_hash_reads;
    out.counters["rings_loaded"] = s.rings_loaded;
    out.counters["rings_evicted"] = s.rings_evicted;
    out.counters["list_slices"] = s.list_slices;
    if (cluster()) {
      out.counters["snapshots_sent"] = s.snapshots_sent;
      out.counters["snapshots_installed"] = s.snapshots_installed;
      out.counters["forwarded"] = s.forwarded;
      out.counters["forward_retries"] = s.forward_retries;
      out.counters["outcome_unknown"] = s.forward_unknown;
      out.counters["transfers"] = s.transfers;
    }
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
  Rng outage_rng_;
  Rng membership_rng_;               // the operator's membership changes: a stream of their own
  bool membership_waiting_ = false;  // a change was sent and not answered yet
  bool membership_restored_ = false;
  int64_t membership_sent_us_ = 0;
  Rng identity_rng_;      // wipes: a stream of their own
  int wiped_ = -1;        // the node wiped and not yet added back (-1: none)
  int readmit_step_ = 0;  // 0: remove it, 1: add it as a learner, 2: promote it
  int64_t readmit_at_us_ = 0;
  std::optional<ReplyHandle> readmit_handle_;
  std::string readmit_refused_;     // the last refusal's code, noted when it changes
  std::vector<int> readmit_queue_;  // lost in the disaster: added back after wiped_
  int survivor_ = -1;               // its QUEEN_RAFT_FORCE_RECOVER still set
  uint64_t recovered_from_ = 0;     // the survivor's durable log at the disaster
  int64_t disaster_at_us_ = -1;
  int disaster_survivor_ = -1;
  bool upgraded_ = false;
  static constexpr int64_t kMembershipTimeoutMs =
      5000;  // long outages: a stream of its own, so other faults keep their draws
  int64_t heal_us_ = 0;
  int64_t partitioned_until_us_ = 0;
  uint64_t partitions_ = 0;                              // cuts and heals so far
  int graceful_ = -1;                                    // the node stopping gracefully
  int64_t graceful_checkpoint_until_us_ = -1;            // its checkpoint's deadline, once set
  // How long a graceful stop waits for its checkpoint and rings to be durable.
  static constexpr int64_t kStopCheckpointWaitUs = 5'000'000;
  int64_t graceful_until_us_ = 0;                        // and when its process exits at the latest
  std::map<uint64_t, int> leaders_;                      // term → the node that led it
  std::map<uint64_t, std::pair<uint64_t, int>> chains_;  // applied → (chain, first node)
  uint64_t writable_term_ = 0;
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
