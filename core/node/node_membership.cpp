// The cluster's membership: the configurations the log holds (EffMembership, and from cluster
// format 2 on EffConfiguration; one voter changed at a time, core/raft/raft.h), the admin
// commands that change them, the member list handed to the environment (output::Members)
// whenever the one in use changes, and the leader's identity round: it raises the cluster
// version once every member reads a higher one, and pins each member's disk once heard from.
#include <algorithm>

#include "core/node/node_impl.h"

namespace queen {

namespace {

MembershipReply refusal(std::string code, std::string error) {
  MembershipReply r;
  r.code = std::move(code);
  r.error = std::move(error);
  return r;
}

const Member* find_member(const std::vector<Member>& list, NodeId id) {
  auto it = std::find_if(list.begin(), list.end(), [&](const Member& m) { return m.id == id; });
  return it == list.end() ? nullptr : &*it;
}

std::vector<Member> sorted(std::vector<Member> list) {
  std::sort(list.begin(), list.end(), [](const Member& a, const Member& b) { return a.id < b.id; });
  return list;
}

}  // namespace

static_assert(kFormatMax == 3, "NodeConfig::format_max defaults to kFormatMax");

raft::Membership to_raft(const EffConfiguration& c) {
  raft::Membership m;
  for (const Member& x : c.members) (x.voter ? m.voters : m.learners).push_back(x.id);
  std::sort(m.voters.begin(), m.voters.end());
  std::sort(m.learners.begin(), m.learners.end());
  for (const DiskPin& d : c.disks) m.disks[d.id] = d.disk;
  return m;
}

std::optional<EffConfiguration> configuration_effect(const Entry& e) {
  for (const Effect& x : e.effects) {
    if (const auto* m = std::get_if<EffMembership>(&x)) return EffConfiguration{m->members, {}, 1};
    if (const auto* m = std::get_if<EffConfiguration>(&x)) return *m;
  }
  return std::nullopt;
}

// The first boot's configuration: every peer of QUEEN_RAFT_PEERS a voter; none for a node that
// joins (it waits to be added).
std::vector<Member> NodeImpl::bootstrap_members() const {
  std::vector<Member> out;
  if (config.join) return out;
  for (size_t i = 0; i < config.voters.size(); ++i) {
    Member m{NodeId(config.voters[i]), true, "", ""};
    if (i < config.voter_addrs.size()) {
      m.raft_addr = config.voter_addrs[i].first;
      m.http_addr = config.voter_addrs[i].second;
    }
    out.push_back(std::move(m));
  }
  return sorted(std::move(out));
}

// The configuration a restart begins with: the store's (committed), or the first boot's.
// FORCE_RECOVER replaces it with this node alone, from the end of its own log.
void NodeImpl::start_membership(raft::Config* rc, LogIndex last) {
  Cluster& c = *cluster;
  EffConfiguration conf = store.configuration();
  LogIndex at = store.membership_index();
  if (conf.members.empty() && at.value == 0) conf.members = bootstrap_members();
  if (config.force_recover == config.node_id) {
    const Member* self = find_member(conf.members, NodeId(config.node_id));
    Member alone = self ? *self : Member{NodeId(config.node_id), true, "", ""};
    alone.voter = true;
    conf.members = {alone};
    // The survivor is pinned to the disk it has now (it may be a copy of the lost one).
    std::erase_if(conf.disks, [&](const DiskPin& d) { return d.id != alone.id; });
    if (!conf.disks.empty()) conf.disks.front().disk = cluster->persisted.disk;
    at = last;
    c.force_recovering = true;
    env.log(LogLevel::warn, "QUEEN_RAFT_FORCE_RECOVER: this node is the only voter from entry " +
                                std::to_string(last.value) + "; unset it once the node serves");
  }
  rc->membership = to_raft(conf);
  rc->membership_index = at;
  c.configs.clear();
  c.configs[at.value] = std::move(conf);
}

// Configurations in the log past the store (written, not yet committed): in use already.
void NodeImpl::recovered_membership(const Entry& e) {
  Cluster& c = *cluster;
  auto m = configuration_effect(e);
  if (!m || c.force_recovering || e.index.value <= c.configs.rbegin()->first) return;
  c.raft->on_membership_entry(e.index, to_raft(*m));
  c.configs[e.index.value] = std::move(*m);
}

// A follower wrote an entry from its leader: a configuration in it is in use from now on.
void NodeImpl::follow_membership(const Entry& e) {
  check_format(e.index, entry_format(e));
  auto m = configuration_effect(e);
  if (!m) return;
  cluster->raft->on_membership_entry(e.index, to_raft(*m));
  cluster->configs[e.index.value] = std::move(*m);
}

void NodeImpl::check_format(LogIndex index, uint32_t format) {
  if (format <= config.format_max) return;
  uint64_t n = ++stats.entries_unreadable;
  if ((n & (n - 1)) == 0)
    env.log(LogLevel::error, "entry " + std::to_string(index.value) + " is of cluster format " +
                                 std::to_string(format) + ", above QUEEN_RAFT_FORMAT_MAX " +
                                 std::to_string(config.format_max));
}

// After a truncation, a commit or a change: the lists Raft no longer keeps go, and the
// environment learns the list in use when it changed.
void NodeImpl::settle_membership() {
  Cluster& c = *cluster;
  uint64_t in_use = c.raft->membership_index().value;
  c.configs.erase(c.configs.upper_bound(in_use), c.configs.end());
  if (!c.configs.empty()) c.raft->set_cluster_format(c.configs.rbegin()->second.cluster_version);
  auto committed = c.configs.upper_bound(c.raft->commit().value);
  if (committed != c.configs.begin()) c.configs.erase(c.configs.begin(), std::prev(committed));
  // A node that joins knows no configuration until one reaches it: the environment keeps the
  // peers it was started with meanwhile.
  if (c.configs.empty() || c.configs.rbegin()->second.members.empty() ||
      c.reported_members == c.configs.rbegin()->first)
    return;
  c.reported_members = c.configs.rbegin()->first;
  out.members(c.configs.rbegin()->second.members);
}

MembershipReply NodeImpl::membership_view() const {
  const Cluster& c = *cluster;
  MembershipReply r;
  r.cluster_id = config.cluster_id;
  r.leader = leader_id();
  r.term = c.raft->term().value;
  r.commit = c.raft->commit().value;
  const EffConfiguration& conf = c.configs.rbegin()->second;
  r.index = c.configs.rbegin()->first;
  r.committed = r.index <= r.commit;
  r.cluster_version = conf.cluster_version;
  r.format_max = config.format_max;
  r.fenced = c.raft->self_fenced();
  raft::Membership m = to_raft(conf);
  for (const Member& x : conf.members) {
    MemberView v{x.id, x.voter, x.raft_addr, x.http_addr, c.raft->match_of(x.id).value};
    v.disk = m.disk_of(x.id);
    if (x.id.value == config.node_id) {
      v.heard_disk = c.persisted.disk;
      v.kinds = config.format_max;
    } else if (auto id = c.raft->identity_of(x.id)) {
      v.heard_disk = id->disk;
      v.kinds = id->kinds;
    }
    r.members.push_back(std::move(v));
  }
  return r;
}

// The configurations a command asks for, one voter changed per step; or why it is refused.
std::optional<MembershipReply> NodeImpl::plan_membership(const MembershipCmd& cmd,
                                                         std::vector<std::vector<Member>>* steps) {
  std::vector<Member> now = cluster->configs.rbegin()->second.members;
  auto step = [&](std::vector<Member> next) {
    steps->push_back(sorted(next));
    now = steps->back();
  };
  switch (cmd.op) {
    case MembershipOp::get:
      return std::nullopt;
    case MembershipOp::add_learner: {
      if (cmd.id.value == 0 || cmd.raft_addr.empty() || cmd.http_addr.empty())
        return refusal("bad_request", "id, raft and http are required");
      if (const Member* m = find_member(now, cmd.id)) {
        if (m->raft_addr != cmd.raft_addr || m->http_addr != cmd.http_addr)
          return refusal("address_mismatch",
                         "member " + std::to_string(cmd.id.value) + " is known at other addresses");
        if (m->voter)
          return refusal("already_voter",
                         "member " + std::to_string(cmd.id.value) + " is a voter already");
        return std::nullopt;  // added already: the answer is the configuration
      }
      now.push_back(Member{cmd.id, false, cmd.raft_addr, cmd.http_addr});
      step(now);
      return std::nullopt;
    }
    case MembershipOp::promote:
      return plan_promotions(cmd.ids, now, steps);
    case MembershipOp::set_voters:
      return plan_voters(cmd.ids, now, steps);
    case MembershipOp::remove: {
      NodeId id = cmd.ids.empty() ? NodeId(0) : cmd.ids.front();
      const Member* m = find_member(now, id);
      if (!m) return refusal("not_a_member", "node " + std::to_string(id.value) + " is no member");
      if (m->voter && std::count_if(now.begin(), now.end(), [](auto& x) { return x.voter; }) == 1)
        return refusal("last_voter", "the last voter cannot be removed");
      std::erase_if(now, [&](const Member& x) { return x.id == id; });
      step(now);
      return std::nullopt;
    }
  }
  return refusal("bad_request", "unknown membership operation");
}

std::optional<MembershipReply> NodeImpl::plan_promotions(const std::vector<NodeId>& ids,
                                                         std::vector<Member> now,
                                                         std::vector<std::vector<Member>>* steps) {
  if (ids.empty()) return refusal("bad_request", "ids must name at least one learner");
  for (NodeId id : ids) {
    auto it = std::find_if(now.begin(), now.end(), [&](const Member& m) { return m.id == id; });
    if (it == now.end())
      return refusal("not_a_learner", "node " + std::to_string(id.value) + " is no member");
    if (it->voter) continue;  // promoted already
    if (auto behind = learner_behind(id)) return behind;
    it->voter = true;
    steps->push_back(sorted(now));
  }
  return std::nullopt;
}

std::optional<MembershipReply> NodeImpl::plan_voters(const std::vector<NodeId>& voters,
                                                     std::vector<Member> now,
                                                     std::vector<std::vector<Member>>* steps) {
  if (voters.empty()) return refusal("last_voter", "voters must name at least one member");
  for (NodeId id : voters)
    if (!find_member(now, id))
      return refusal("not_a_member", "node " + std::to_string(id.value) + " is no member");
  // Voters added first, so the cluster never tolerates fewer failures on the way.
  for (Member& m : now) {
    bool wanted = std::find(voters.begin(), voters.end(), m.id) != voters.end();
    if (!wanted || m.voter) continue;
    if (auto behind = learner_behind(m.id)) return behind;
    m.voter = true;
    steps->push_back(sorted(now));
  }
  for (Member& m : now) {
    bool wanted = std::find(voters.begin(), voters.end(), m.id) != voters.end();
    if (wanted || !m.voter) continue;
    m.voter = false;  // stays a learner: DELETE .../members/:id removes it
    steps->push_back(sorted(now));
  }
  return std::nullopt;
}

std::optional<MembershipReply> NodeImpl::learner_behind(NodeId id) const {
  if (!cluster->raft->recently_heard(id))
    return refusal("learner_behind",
                   "learner " + std::to_string(id.value) + " has not been heard from lately");
  // An older build is sent no entries (raft::Raft::set_cluster_format): it cannot catch up.
  if (!cluster->raft->reads_cluster_format(id)) {
    auto who = cluster->raft->identity_of(id);
    return refusal("learner_behind",
                   "learner " + std::to_string(id.value) + " reads cluster format " +
                       std::to_string(who ? who->kinds : 0) + ", below the cluster's " +
                       std::to_string(cluster->configs.rbegin()->second.cluster_version) +
                       ": upgrade it first");
  }
  uint64_t last = cluster->raft->last_index().value;
  uint64_t match = cluster->raft->match_of(id).value;
  // Its durable log holds the configuration in use: a crash cannot take it back to one that
  // predates its admission (and pins a disk it no longer has), which would keep it from voting.
  uint64_t in_use = cluster->raft->membership_index().value;
  if (match < in_use)
    return refusal("learner_behind", "learner " + std::to_string(id.value) +
                                         " holds entries up to " + std::to_string(match) +
                                         ", not yet the configuration in use (entry " +
                                         std::to_string(in_use) + ")");
  if (last - std::min(last, match) <= config.promote_max_lag) return std::nullopt;
  return refusal("learner_behind", "learner " + std::to_string(id.value) + " is " +
                                       std::to_string(last - match) +
                                       " entries behind (QUEEN_RAFT_PROMOTE_MAX_LAG " +
                                       std::to_string(config.promote_max_lag) + ")");
}

// Whether a majority of `next`'s voters was heard from lately: a change that would leave the
// cluster without a reachable majority is refused rather than wedge it.
bool NodeImpl::reachable_majority(const std::vector<Member>& next) const {
  size_t voters = 0, heard = 0;
  for (const Member& m : next) {
    if (!m.voter) continue;
    ++voters;
    if (m.id.value == config.node_id || cluster->raft->recently_heard(m.id)) ++heard;
  }
  return heard >= voters / 2 + 1;
}

void NodeImpl::handle(ReplyHandle h, CommandEnvelope&, MembershipCmd& x) {
  if (!cluster) {
    return send(Parked{h, Reply{refusal("bad_request",
                                        "a single node has no membership; start it with "
                                        "QUEEN_RAFT_PEERS to form a cluster")}});
  }
  if (x.op == MembershipOp::get) return send(Parked{h, Reply{membership_view()}});
  Cluster& c = *cluster;
  if (c.job || c.raft->membership_index() > c.raft->commit())
    return send(Parked{h, Reply{refusal("in_flight", "another membership change is in flight")}});
  std::vector<std::vector<Member>> steps;
  if (auto refused = plan_membership(x, &steps)) {
    MembershipReply r = membership_view();
    r.code = refused->code;
    r.error = refused->error;
    return send(Parked{h, Reply{std::move(r)}});
  }
  for (const auto& s : steps)
    if (!reachable_majority(s))
      return send(Parked{
          h, Reply{refusal("no_quorum", "the new voters' majority has not been heard from")}});
  c.job = MembershipJob{h, std::move(steps), 0};
  membership_step();
}

// Proposes the job's next configuration once the one before committed, and answers the job
// with the configuration it made after its last one.
void NodeImpl::membership_step() {
  Cluster& c = *cluster;
  while (c.job && !stopped) {
    MembershipJob& job = *c.job;
    if (job.proposed_at != 0 && commit < job.proposed_at && !config.mutants.changes_in_flight)
      return;
    if (job.steps.empty()) {
      if (job.proposed_at != 0 && commit < job.proposed_at) return;
      ReplyHandle h = job.handle;
      c.job.reset();
      return send(Parked{h, Reply{membership_view()}});
    }
    if (!open.empty()) seal();
    open.entry.effects.push_back(configuration_for(std::move(job.steps.front())));
    job.steps.erase(job.steps.begin());
    ++open.commands;
    job.proposed_at = open.entry.index.value;
    seal();
    write_sealed();
  }
}

// A leader that stops leading answers its change: the next leader may or may not commit it.
void NodeImpl::drop_membership_job() {
  Cluster& c = *cluster;
  if (!c.job) return;
  ReplyHandle h = c.job->handle;
  c.job.reset();
  send(Parked{h, Reply{refusal("leader_changed",
                               "the leader changed during the change; read the membership "
                               "to see whether it took effect")}});
}

// FORCE_RECOVER: the node leads alone; its configuration goes into the log, so that it holds
// after the next restart without the variable.
void NodeImpl::force_recover_step() {
  Cluster& c = *cluster;
  if (!c.force_recovering || !c.writable || c.job) return;
  c.force_recovering = false;
  open.entry.effects.push_back(configuration_for(c.configs.rbegin()->second.members));
  ++open.commands;
  seal();
  write_sealed();
}

Effect NodeImpl::configuration_for(std::vector<Member> members) const {
  uint32_t version = cluster->configs.rbegin()->second.cluster_version;
  if (version < 2) return EffMembership{std::move(members)};
  return pinned_configuration(std::move(members), version);
}

EffConfiguration NodeImpl::pinned_configuration(std::vector<Member> members,
                                                uint32_t version) const {
  const Cluster& c = *cluster;
  raft::Membership pinned = to_raft(c.configs.rbegin()->second);
  EffConfiguration next{std::move(members), {}, version};
  for (const Member& m : next.members) {
    uint64_t disk = pinned.disk_of(m.id);
    if (disk == 0 && m.id.value == config.node_id) disk = c.persisted.disk;
    if (disk == 0)
      if (auto id = c.raft->identity_of(m.id)) disk = id->disk;
    if (disk != 0) next.disks.push_back(DiskPin{m.id, disk});
  }
  return next;
}

// The cluster version the members allow: the lowest format any of them reads (0 while one has
// not been heard from since this leader started).
static uint32_t readable_version(const NodeImpl& n, const EffConfiguration& conf) {
  uint32_t v = n.config.format_max;
  for (const Member& m : conf.members) {
    if (m.id.value == n.config.node_id) continue;
    auto id = n.cluster->raft->identity_of(m.id);
    v = std::min(v, id ? id->kinds : 0u);
  }
  return v;
}

void NodeImpl::identity_tick() {
  Cluster& c = *cluster;
  if (config.cluster_version_ms <= 0 || !c.writable || c.job || c.force_recovering) return;
  int64_t every = std::max<int64_t>(1, config.cluster_version_ms / config.raft_heartbeat_ms);
  if (static_cast<int64_t>(++c.identity_ticks) < every) return;
  c.identity_ticks = 0;
  if (c.raft->check_change(c.raft->membership()) != raft::ChangeRefusal::none) return;
  const EffConfiguration& now = c.configs.rbegin()->second;
  uint32_t readable = config.mutants.ungated_version ? kFormatMax : readable_version(*this, now);
  uint32_t version = std::max(now.cluster_version, std::min(readable, kFormatMax));
  if (version < 2) return;
  EffConfiguration next = pinned_configuration(now.members, version);
  if (next == now) return;
  if (!open.empty()) seal();
  open.entry.effects.push_back(std::move(next));
  ++open.commands;
  seal();
  write_sealed();
}

}  // namespace queen
