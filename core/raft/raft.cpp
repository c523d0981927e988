#include "core/raft/raft.h"

#include <algorithm>

#include "core/common/assert.h"

namespace queen::raft {
namespace {
constexpr uint64_t kStallTicks = 3;  // ticks without progress before a follower is re-probed
// Ticks a snapshot may take without an answer before it is asked for again.
constexpr uint64_t kSnapshotStallTicks = 100;
}  // namespace

// ---------------------------------------------------------------------------- term runs

void TermRuns::append(LogIndex index, Term term) {
  QUEEN_ASSERT(index == last_.next(), "the log grows one entry at a time");
  if (runs_.empty() || runs_.back().second != term) runs_.emplace_back(index, term);
  last_ = index;
}

void TermRuns::truncate_after(LogIndex index) {
  while (!runs_.empty() && runs_.back().first > index) runs_.pop_back();
  last_ = std::min(last_, index);
}

void TermRuns::reset(LogIndex index, Term term) {
  runs_ = {{index, term}};
  last_ = index;
}

std::optional<Term> TermRuns::term_at(LogIndex index) const {
  if (index.value == 0) return Term(0);
  if (index > last_) return std::nullopt;
  auto it = std::upper_bound(runs_.begin(), runs_.end(), index,
                             [](LogIndex i, const auto& run) { return i < run.first; });
  if (it == runs_.begin()) return std::nullopt;
  return std::prev(it)->second;
}

// ---------------------------------------------------------------------------- membership

uint64_t Membership::disk_of(NodeId id) const {
  auto it = disks.find(id);
  return it == disks.end() ? 0 : it->second;
}

bool Membership::is_voter(NodeId id) const {
  return std::binary_search(voters.begin(), voters.end(), id);
}

bool Membership::is_learner(NodeId id) const {
  return std::binary_search(learners.begin(), learners.end(), id);
}

const char* to_string(ChangeRefusal r) {
  switch (r) {
    case ChangeRefusal::none:
      return "none";
    case ChangeRefusal::not_leader:
      return "not_leader";
    case ChangeRefusal::not_settled:
      return "not_settled";
    case ChangeRefusal::in_flight:
      return "in_flight";
    case ChangeRefusal::two_voters:
      return "two_voters";
    case ChangeRefusal::no_voter_left:
      return "no_voter_left";
  }
  return "unknown";
}

// ---------------------------------------------------------------------------- raft

Raft::Raft(Config config, HardState persisted, TermRuns durable_log, const LogView& log,
           LogIndex commit, uint64_t (*random)(void*), void* random_ctx)
    : cfg_(std::move(config)),
      hs_(persisted),
      log_(log),
      random_(random),
      random_ctx_(random_ctx),
      commit_(commit),
      runs_(std::move(durable_log)),
      reported_commit_(commit) {
  durable_ = runs_.last();
  QUEEN_ASSERT(commit_ <= durable_, "commit beyond the durable log");
  Membership& m = cfg_.membership;
  std::sort(m.voters.begin(), m.voters.end());
  std::sort(m.learners.begin(), m.learners.end());
  confs_[cfg_.membership_index] = m;
  reset_election_timer();
}

LogIndex Raft::last_index() const {
  return runs_.last();
}

void Raft::set_hard_state(Term term, std::optional<NodeId> vote) {
  if (hs_.term == term && hs_.vote == vote) return;
  hs_.term = term;
  hs_.vote = vote;
  hs_dirty_ = true;
}

void Raft::reset_election_timer() {
  election_elapsed_ = 0;
  election_timeout_ =
      cfg_.election_ticks + static_cast<uint32_t>(random_(random_ctx_) % cfg_.election_ticks);
}

void Raft::send(Message m) {
  m.from = cfg_.id;
  m.disk = cfg_.disk;
  m.kinds = cfg_.kinds;
  if (m.term.value == 0) m.term = hs_.term;
  ready_.messages.push_back(std::move(m));
}

void Raft::become_follower(Term term, std::optional<NodeId> leader) {
  if (term > hs_.term) set_hard_state(term, std::nullopt);
  role_ = Role::follower;
  leader_ = leader;
  transfer_to_.reset();
  reset_election_timer();
}

void Raft::become_pre_candidate() {
  role_ = Role::pre_candidate;
  leader_.reset();
  votes_granted_.clear();
  if (self_voter()) votes_granted_.insert(cfg_.id);
  votes_rejected_.clear();
  reset_election_timer();
}

void Raft::become_candidate() {
  role_ = Role::candidate;
  leader_.reset();
  set_hard_state(hs_.term.next(), cfg_.id);
  votes_granted_.clear();
  if (self_voter()) votes_granted_.insert(cfg_.id);
  votes_rejected_.clear();
  ++stats_.elections;
  reset_election_timer();
}

void Raft::become_leader() {
  role_ = Role::leader;
  leader_ = cfg_.id;
  ++stats_.leaderships;
  progress_.clear();
  track_members();
  // An empty entry of the new term lets earlier entries commit (Raft §5.4.2).
  propose(Bytes{});
}

void Raft::track_members() {
  const Membership& m = membership();
  std::erase_if(progress_, [&](const auto& kv) { return !m.is_member(kv.first); });
  for (const auto* list : {&m.voters, &m.learners})
    for (NodeId v : *list) {
      if (v == cfg_.id || progress_.contains(v)) continue;
      Progress& pr = progress_[v];
      pr.next = last_index().next();
      pr.active = true;
      pr.match_tick = ticks_;
      pr.heard_tick = ticks_;
    }
}

// A voter campaigns; so does a node whose removal (or demotion) is in its log but not known to
// have committed: its log may be the one the remaining voters need (counting only their votes,
// it can win, replicate the change and then step down).
bool Raft::may_campaign() const {
  if (self_fenced()) return false;
  if (self_voter()) return true;
  return confs_.size() >= 2 && std::prev(confs_.end(), 2)->second.is_voter(cfg_.id);
}

// A member whose latest message came from a disk other than its pinned one.
bool Raft::peer_fenced(NodeId peer) const {
  uint64_t pinned = membership().disk_of(peer);
  if (pinned == 0 || cfg_.mutant_no_fence) return false;
  auto it = identities_.find(peer);
  return it != identities_.end() && it->second.disk != pinned;
}

// A pinned member that speaks from another disk than before is another server: what its
// former disk acknowledged is forgotten, so that it counts again only once its pinned disk
// answers anew.
void Raft::note_identity(const Message& m) {
  PeerIdentity& id = identities_[m.from];
  bool moved = id.disk != 0 && id.disk != m.disk && membership().disk_of(m.from) != 0;
  id = PeerIdentity{m.disk, m.kinds};
  auto it = progress_.find(m.from);
  if (!moved || it == progress_.end()) return;
  it->second.match = LogIndex(0);
  it->second.acked_tick = 0;
  it->second.next = last_index().next();
  it->second.inflight = 0;
}

bool Raft::counted(NodeId peer) const {
  if (peer_fenced(peer)) return false;
  return membership().is_voter(peer) ||
         (cfg_.mutant_learner_in_quorum && membership().is_learner(peer));
}

void Raft::campaign(bool pre) {
  if (pre) {
    become_pre_candidate();
  } else {
    become_candidate();
  }
  if (votes_granted_.size() >= quorum()) {
    if (pre) return campaign(false);
    return become_leader();
  }
  Term t = pre ? hs_.term.next() : hs_.term;
  for (NodeId v : membership().voters) {
    if (v == cfg_.id) continue;
    Message m;
    m.type = pre ? MsgType::pre_vote : MsgType::vote;
    m.to = v;
    m.term = t;
    m.index = last_index();
    m.log_term = *term_at(last_index());
    m.force = transfer_to_.has_value();
    send(std::move(m));
  }
}

uint64_t Raft::ticks_since_quorum() const {
  if (role_ != Role::leader) return UINT64_MAX;
  std::vector<uint64_t> acked;
  if (self_voter()) acked.push_back(ticks_);
  for (const auto& [peer, pr] : progress_)
    if (counted(peer)) acked.push_back(pr.acked_tick);
  if (acked.size() < quorum()) return UINT64_MAX;
  std::sort(acked.begin(), acked.end(), std::greater<>());
  uint64_t t = acked[quorum() - 1];
  return t == 0 ? UINT64_MAX : ticks_ - t;
}

void Raft::tick() {
  ++ticks_;
  if (role_ == Role::leader) {
    if (++heartbeat_elapsed_ >= cfg_.heartbeat_ticks) {
      heartbeat_elapsed_ = 0;
      for (const auto& [peer, pr] : progress_) send_append(peer, true);
    }
    reprobe_stalled();
    if (++election_elapsed_ >= cfg_.election_ticks) {
      election_elapsed_ = 0;
      uint32_t active = self_voter() ? 1 : 0;
      for (auto& [peer, pr] : progress_) {
        active += pr.active && counted(peer) ? 1 : 0;
        pr.active = false;
      }
      if (cfg_.check_quorum && active < quorum()) {
        ++stats_.step_downs_check_quorum;
        become_follower(hs_.term, std::nullopt);
      }
    }
    return;
  }
  if (++election_elapsed_ >= election_timeout_ && may_campaign()) {
    campaign(cfg_.pre_vote);
  }
}

bool Raft::log_up_to_date(LogIndex index, Term term) const {
  Term mine = *term_at(last_index());
  return term > mine || (term == mine && index >= last_index());
}

void Raft::handle_vote_request(const Message& m) {
  bool pre = m.type == MsgType::pre_vote;
  // Within the lease of a live leader, a vote is refused: a partitioned node cannot depose it.
  bool in_lease = cfg_.check_quorum && leader_.has_value() && !m.force &&
                  election_elapsed_ < cfg_.election_ticks;
  bool can_vote = hs_.vote == m.from || (!hs_.vote && !leader_.has_value()) ||
                  (pre && m.term > hs_.term) || cfg_.mutant_vote_twice;
  can_vote = can_vote && !self_fenced();
  Message r;
  r.type = pre ? MsgType::pre_vote_resp : MsgType::vote_resp;
  r.to = m.from;
  if (!in_lease && can_vote && log_up_to_date(m.index, m.log_term)) {
    r.term = m.term;
    if (!pre) {
      set_hard_state(m.term, m.from);
      reset_election_timer();
    }
  } else {
    r.term = hs_.term;
    r.reject = true;
    if (pre) ++stats_.pre_vote_rejections;
  }
  send(std::move(r));
}

void Raft::handle_vote_response(const Message& m) {
  bool pre = m.type == MsgType::pre_vote_resp;
  if ((pre && role_ != Role::pre_candidate) || (!pre && role_ != Role::candidate)) return;
  if (!membership().is_voter(m.from)) return;  // a learner's or a stranger's answer
  (m.reject ? votes_rejected_ : votes_granted_).insert(m.from);
  if (votes_granted_.size() >= quorum()) {
    if (pre) {
      campaign(false);
    } else {
      become_leader();
    }
  } else if (votes_rejected_.size() >= quorum()) {
    become_follower(hs_.term, std::nullopt);
  }
}

void Raft::respond_append(NodeId to, LogIndex match, uint64_t ctx) {
  Message r;
  r.type = MsgType::append_resp;
  r.to = to;
  r.hint = match;
  r.ctx = ctx;
  send(std::move(r));
}

void Raft::handle_append(const Message& m) {
  become_follower(m.term, m.from);
  if (m.index < commit_) {
    // Everything up to the commit index matches (it is committed); below a restored
    // snapshot the terms are not even known. Keep only what lies past it.
    Message rest = m;
    rest.index = commit_;
    rest.log_term = *term_at(commit_);
    std::erase_if(rest.entries, [&](const LogEntry& e) { return e.index <= commit_; });
    if (!rest.entries.empty() && rest.entries.front().index != commit_.next()) return;
    return handle_append(rest);
  }
  if (m.index > last_index() || term_at(m.index) != m.log_term) {
    Message r;
    r.type = MsgType::append_resp;
    r.to = m.from;
    r.reject = true;
    r.hint = std::min(last_index(), LogIndex(m.index.value > 0 ? m.index.value - 1 : 0));
    r.ctx = m.ctx;
    send(std::move(r));
    return;
  }
  LogIndex last_new = m.index;
  for (const LogEntry& e : m.entries) {
    last_new = e.index;
    if (e.index <= last_index()) {
      if (term_at(e.index) == e.term) continue;
      QUEEN_ASSERT(e.index > commit_, "a committed entry is never truncated");
      LogIndex keep(e.index.value - 1);
      runs_.truncate_after(keep);
      confs_.erase(confs_.upper_bound(keep), confs_.end());
      durable_ = std::min(durable_, keep);
      ready_.truncate_after = keep;
      ready_.append.clear();
    }
    runs_.append(e.index, e.term);
    ready_.append.push_back(e);
  }
  LogIndex commit = std::min(m.commit, last_new);
  if (commit > commit_) {
    commit_ = commit;
    after_commit();
  }
  if (last_new <= durable_) {
    respond_append(m.from, last_new, m.ctx);
  } else {
    ack_pending_ = AckPending{m.from, last_new, m.ctx};
  }
}

void Raft::compact(LogIndex upto) {
  QUEEN_ASSERT(upto <= commit_, "only committed entries are compacted");
  log_start_ = std::max(log_start_, upto);
}

LogIndex Raft::slowest_held_match() const {
  LogIndex out = commit_;
  if (role_ != Role::leader) return out;
  for (const auto& [peer, pr] : progress_)
    if (ticks_ - pr.heard_tick < cfg_.log_hold_ticks) out = std::min(out, pr.match);
  return out;
}

void Raft::snapshot_failed(NodeId to) {
  auto it = progress_.find(to);
  if (role_ != Role::leader || it == progress_.end()) return;
  it->second.snapshot = LogIndex(0);
  it->second.match_tick = ticks_;
}

void Raft::snapshot_progress(NodeId to) {
  auto it = progress_.find(to);
  if (role_ == Role::leader && it != progress_.end() && it->second.snapshot.value > 0)
    it->second.match_tick = ticks_;
}

void Raft::send_snapshot(NodeId to, Progress& pr) {
  pr.snapshot = log_start_;
  pr.match_tick = ticks_;
  pr.inflight = 0;
  Message m;
  m.type = MsgType::snapshot;
  m.to = to;
  m.index = log_start_;
  m.log_term = *term_at(log_start_);
  send(std::move(m));
}

void Raft::on_persisted(LogIndex index) {
  if (index > last_index() || index <= durable_) return;
  durable_ = index;
  if (role_ == Role::leader) maybe_commit();
  if (ack_pending_ && ack_pending_->match <= durable_) {
    respond_append(ack_pending_->to, ack_pending_->match, ack_pending_->ctx);
    ack_pending_.reset();
  }
}

void Raft::handle_append_response(const Message& m) {
  auto it = progress_.find(m.from);
  if (it == progress_.end()) return;
  Progress& pr = it->second;
  pr.active = true;
  pr.heard_tick = ticks_;
  pr.answered_tick = ticks_;
  pr.acked_tick = std::max(pr.acked_tick, m.ctx);
  if (pr.inflight > 0) --pr.inflight;
  if (m.reject) {
    if (pr.snapshot.value > 0) return;  // a heartbeat's answer while the snapshot travels
    pr.next = LogIndex(std::max<uint64_t>(1, std::min(m.hint.value + 1, pr.next.value - 1)));
    pr.inflight = 0;
    send_append(m.from, false);
    return;
  }
  if (m.hint > pr.match) {
    pr.match = m.hint;
    pr.match_tick = ticks_;
  }
  if (pr.snapshot.value > 0 && pr.match >= pr.snapshot) pr.snapshot = LogIndex(0);
  if (pr.next <= pr.match) pr.next = pr.match.next();
  maybe_commit();
  if (transfer_to_ == m.from && pr.match == last_index()) {
    Message t;
    t.type = MsgType::timeout_now;
    t.to = m.from;
    send(std::move(t));
  }
  if (pr.next <= last_index()) send_append(m.from, false);
}

void Raft::send_append(NodeId to, bool heartbeat_only) {
  Progress& pr = progress_.at(to);
  heartbeat_only = heartbeat_only || !reads_cluster_format(to);
  Message m;
  m.type = MsgType::append;
  m.to = to;
  m.commit = commit_;
  m.ctx = ticks_;
  LogIndex prev(pr.next.value - 1);
  if (pr.snapshot.value > 0 && !heartbeat_only) return;
  if (!heartbeat_only && pr.next <= log_start_) return send_snapshot(to, pr);
  if (!heartbeat_only && pr.next <= last_index() && pr.inflight < cfg_.inflight_max) {
    m.entries = log_.entries(prev, last_index(), cfg_.append_bytes_max);
  }
  if (m.entries.empty()) {
    // A heartbeat probes at the follower's match so it never truncates anything.
    prev = std::min(prev, pr.match.value > 0 ? pr.match : prev);
  }
  m.index = prev;
  m.log_term = term_at(prev).value_or(Term(0));
  m.commit = std::min(commit_, m.entries.empty() ? prev : m.entries.back().index);
  if (!m.entries.empty()) {
    pr.next = m.entries.back().index.next();
    ++pr.inflight;
  }
  send(std::move(m));
}

// Appends lost on the way (or to a follower that restarted) leave a follower behind with its
// next index already past them: when its match has not moved for a few ticks, replicate again
// from its match.
void Raft::reprobe_stalled() {
  for (auto& [peer, pr] : progress_) {
    if (pr.snapshot.value > 0) {
      if (ticks_ - pr.match_tick < kSnapshotStallTicks) continue;
      pr.snapshot = LogIndex(0);  // no answer for long: ask the caller for a snapshot again
    }
    if (pr.match >= last_index() || ticks_ - pr.match_tick < kStallTicks) continue;
    pr.next = pr.match.next();
    pr.inflight = 0;
    pr.match_tick = ticks_;
    send_append(peer, false);
  }
}

void Raft::broadcast_append() {
  for (auto& [peer, pr] : progress_) send_append(peer, false);
}

void Raft::maybe_commit() {
  std::vector<LogIndex> matches;
  if (self_voter()) matches.push_back(durable_);
  for (const auto& [peer, pr] : progress_)
    if (counted(peer)) matches.push_back(pr.match);
  if (matches.empty()) return;
  std::sort(matches.begin(), matches.end(), std::greater<>());
  size_t at = cfg_.mutant_commit_without_majority ? 0 : quorum() - 1;
  if (at >= matches.size()) return;
  LogIndex n = matches[at];
  if (n > commit_ && term_at(n) == hs_.term) {
    commit_ = n;
    after_commit();
  }
}

void Raft::after_commit() {
  auto newest = confs_.upper_bound(commit_);
  QUEEN_ASSERT(newest != confs_.begin(), "no committed configuration");
  confs_.erase(confs_.begin(), std::prev(newest));
  if (role_ != Role::leader || membership_index() > commit_ || self_voter()) return;
  if (cfg_.mutant_removed_leader_serves) return;
  become_follower(hs_.term, std::nullopt);  // removed: the others elect a leader among them
}

const Membership& Raft::committed_membership() const {
  return std::prev(confs_.upper_bound(commit_))->second;
}

LogIndex Raft::match_of(NodeId id) const {
  if (id == cfg_.id) return durable_;
  auto it = progress_.find(id);
  return it == progress_.end() ? LogIndex(0) : it->second.match;
}

bool Raft::recently_heard(NodeId id) const {
  auto it = progress_.find(id);
  return role_ == Role::leader && !peer_fenced(id) && it != progress_.end() &&
         it->second.answered_tick != 0 && ticks_ - it->second.answered_tick < cfg_.election_ticks;
}

bool Raft::fenced(const Message& m) const {
  // A leader's log is taken from any disk: the election that made it leader counted only the
  // disks its voters pin, and a follower whose configuration predates the leader's new disk
  // (it lost entries in a crash) learns that configuration from this log alone.
  if (m.type == MsgType::append || m.type == MsgType::snapshot || m.type == MsgType::snapshot_chunk)
    return false;
  uint64_t pinned = membership().disk_of(m.from);
  return pinned != 0 && m.disk != pinned && !cfg_.mutant_no_fence;
}

bool Raft::self_fenced() const {
  uint64_t pinned = membership().disk_of(cfg_.id);
  return pinned != 0 && pinned != cfg_.disk && !cfg_.mutant_no_fence;
}

std::optional<PeerIdentity> Raft::identity_of(NodeId id) const {
  auto it = identities_.find(id);
  if (it == identities_.end()) return std::nullopt;
  return it->second;
}

bool Raft::reads_cluster_format(NodeId id) const {
  if (cluster_format_ < 2) return true;
  auto who = identity_of(id);
  return who && who->kinds >= cluster_format_;
}

ChangeRefusal Raft::check_change(const Membership& next) const {
  if (role_ != Role::leader || transfer_to_) return ChangeRefusal::not_leader;
  if (term_at(commit_) != hs_.term) return ChangeRefusal::not_settled;
  if (membership_index() > commit_ && !cfg_.mutant_changes_in_flight)
    return ChangeRefusal::in_flight;
  if (next.voters.empty()) return ChangeRefusal::no_voter_left;
  const auto& now = membership().voters;
  std::vector<NodeId> diff;
  std::set_symmetric_difference(now.begin(), now.end(), next.voters.begin(), next.voters.end(),
                                std::back_inserter(diff));
  if (diff.size() > 1) return ChangeRefusal::two_voters;
  return ChangeRefusal::none;
}

std::optional<LogIndex> Raft::propose_membership(Bytes data, const Membership& next) {
  QUEEN_ASSERT(check_change(next) == ChangeRefusal::none, "a change proposed against the rule");
  LogIndex idx = last_index().next();
  runs_.append(idx, hs_.term);
  ready_.append.push_back(LogEntry{idx, hs_.term, std::move(data)});
  on_membership_entry(idx, next);
  broadcast_append();
  return idx;
}

void Raft::on_membership_entry(LogIndex index, const Membership& m) {
  QUEEN_ASSERT(index > membership_index(), "configurations come in log order");
  Membership sorted = m;
  std::sort(sorted.voters.begin(), sorted.voters.end());
  std::sort(sorted.learners.begin(), sorted.learners.end());
  confs_[index] = std::move(sorted);
  // A member removed is forgotten: added back, it is known only from what it says then (its
  // disk may have been replaced meanwhile, and must not be pinned from before).
  std::erase_if(identities_, [&](const auto& kv) { return !membership().is_member(kv.first); });
  if (role_ == Role::leader) track_members();
  if (index <= commit_) after_commit();
}

std::optional<LogIndex> Raft::propose(Bytes data) {
  if (role_ != Role::leader || transfer_to_) return std::nullopt;
  LogIndex idx = last_index().next();
  runs_.append(idx, hs_.term);
  ready_.append.push_back(LogEntry{idx, hs_.term, std::move(data)});
  broadcast_append();
  return idx;
}

std::optional<NodeId> Raft::most_caught_up() const {
  std::optional<NodeId> best;
  LogIndex best_match;
  for (const auto& [peer, pr] : progress_) {
    if (!membership().is_voter(peer) || peer_fenced(peer)) continue;
    if (!best || pr.match > best_match) {
      best = peer;
      best_match = pr.match;
    }
  }
  return best;
}

bool Raft::transfer_leadership(NodeId to) {
  if (role_ != Role::leader || !progress_.contains(to) || !membership().is_voter(to) ||
      peer_fenced(to))
    return false;
  transfer_to_ = to;
  if (progress_.at(to).match == last_index()) {
    Message t;
    t.type = MsgType::timeout_now;
    t.to = to;
    send(std::move(t));
  } else {
    send_append(to, false);
  }
  return true;
}

void Raft::step(const Message& m) {
  if (membership().is_member(m.from)) note_identity(m);
  if (fenced(m)) {
    // A fenced follower still gets the log (so that it is ready when added back), but nothing
    // it says counts: its answers move only its own replication.
    if (m.type == MsgType::append_resp && role_ == Role::leader && m.term == hs_.term)
      handle_append_response(m);
    return;
  }
  bool vote_kind = m.type == MsgType::vote || m.type == MsgType::pre_vote;
  if (m.term > hs_.term) {
    bool pre_kind = m.type == MsgType::pre_vote || (m.type == MsgType::pre_vote_resp && !m.reject);
    bool in_lease = cfg_.check_quorum && leader_.has_value() && !m.force &&
                    election_elapsed_ < cfg_.election_ticks && vote_kind;
    if (in_lease && m.type == MsgType::vote) return;  // ignore: the leader is alive
    if (!pre_kind) {
      bool from_leader = m.type == MsgType::append;
      become_follower(m.term, from_leader ? std::optional<NodeId>(m.from) : std::nullopt);
    }
  } else if (m.term < hs_.term) {
    if (m.type == MsgType::append) {
      Message r;
      r.type = MsgType::append_resp;
      r.to = m.from;
      r.reject = true;
      send(std::move(r));  // the stale leader learns the newer term and steps down
    } else if (m.type == MsgType::pre_vote) {
      Message r;
      r.type = MsgType::pre_vote_resp;
      r.to = m.from;
      r.reject = true;
      send(std::move(r));
    }
    return;
  }
  switch (m.type) {
    case MsgType::pre_vote:
    case MsgType::vote:
      handle_vote_request(m);
      break;
    case MsgType::pre_vote_resp:
    case MsgType::vote_resp:
      handle_vote_response(m);
      break;
    case MsgType::append:
      if (role_ == Role::leader && m.term == hs_.term) break;  // impossible: one per term
      handle_append(m);
      break;
    case MsgType::append_resp:
      if (role_ == Role::leader) handle_append_response(m);
      break;
    case MsgType::snapshot:
    case MsgType::snapshot_chunk:
    case MsgType::snapshot_ack:
      break;  // the caller's (core/node/snapshot.h)
    case MsgType::timeout_now:
      if (role_ != Role::leader && may_campaign()) {
        transfer_to_ = cfg_.id;  // marks the votes as forced
        campaign(false);
        transfer_to_.reset();
      }
      break;
  }
}

Ready Raft::take_ready() {
  Ready r = std::move(ready_);
  ready_ = Ready{};
  if (hs_dirty_) {
    r.hard_state = hs_;
    hs_dirty_ = false;
  }
  if (commit_ > reported_commit_) {
    r.commit = commit_;
    reported_commit_ = commit_;
  }
  return r;
}

}  // namespace queen::raft
