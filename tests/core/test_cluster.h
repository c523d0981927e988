// A Raft cluster of nodes on in-memory environments for the core's tests: every node's clock
// advances in 1 ms steps, messages arrive within the step they were sent, and a node can be
// crashed, wiped, isolated and started again (with its own QUEEN_QLOG_SHARDS,
// QUEEN_RAFT_FORMAT_MAX or QUEEN_RAFT_JOIN).
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "core/node/node.h"
#include "tests/core/mem_env.h"

namespace queen::testing {
inline NodeConfig cluster_config(int nodes) {
  NodeConfig c;
  c.track_applied_chain = true;
  for (int i = 1; i <= nodes; ++i) c.voters.push_back(static_cast<uint64_t>(i));
  c.raft_heartbeat_ms = 10;
  c.raft_election_ms = 100;
  c.leader_lease_ms = 80;
  c.max_clock_skew_ms = 50;
  c.checkpoint_ms = 5;
  return c;
}

class TestCluster {
 public:
  explicit TestCluster(int n, const std::function<void(NodeConfig&)>& tweak = {})
      : cfg_(cluster_config(n)) {
    if (tweak) tweak(cfg_);
    for (int i = 0; i < n; ++i) {
      envs_.push_back(std::make_unique<MemEnv>());
      envs_.back()->rng = 1000 + static_cast<uint64_t>(i);
      nodes_.emplace_back();
      start(i);
    }
  }

  void start(int i) {
    NodeConfig c = cfg_;
    c.node_id = static_cast<uint64_t>(i) + 1;
    if (auto k = qlog_shards.find(i); k != qlog_shards.end()) c.qlog_shards = k->second;
    if (auto k = format_max.find(i); k != format_max.end()) c.format_max = k->second;
    c.join = joins.contains(i);
    envs_[i]->timers.clear();
    nodes_[i] = std::make_unique<Node>(*envs_[i], c);
    envs_[i]->node = nodes_[i].get();
    auto started = nodes_[i]->start(envs_[i]->list());
    ASSERT_TRUE(started.ok());
    envs_[i]->perform(std::move(started.value()));
  }

  // Power cut: the node's unsynced bytes, timers and messages are gone.
  void crash(int i) {
    nodes_[i].reset();
    envs_[i]->node = nullptr;
    envs_[i]->crash();
    envs_[i]->outbox.clear();
  }
  bool up(int i) const { return nodes_[i] != nullptr; }
  // A node's own QUEEN_QLOG_SHARDS (the layout is node-local), read at its next start().
  std::map<int, uint32_t> qlog_shards;
  // A node's own QUEEN_RAFT_FORMAT_MAX (standing for an older build), read at its next start().
  std::map<int, uint32_t> format_max;
  std::set<int> joins;  // started with QUEEN_RAFT_JOIN (no membership until added)
  // A crashed node's disk is replaced by an empty one.
  void wipe(int i) {
    envs_[i]->files.clear();
    envs_[i]->synced.clear();
  }

  void isolate(int i) { isolated_.insert(i); }
  void heal() { isolated_.clear(); }

  // Advances every clock by `ms` in 1 ms steps; messages arrive within the step they were sent.
  void run_ms(int64_t ms) {
    for (int64_t t = 0; t < ms; ++t) {
      for (size_t i = 0; i < envs_.size(); ++i) {
        envs_[i]->now += 1000;
        if (up(static_cast<int>(i))) envs_[i]->run();
      }
      deliver();
    }
  }

  // Runs until `cond` holds, at most `ms` of simulated time.
  bool run_until(int64_t ms, const std::function<bool()>& cond) {
    for (int64_t t = 0; t < ms; ++t) {
      if (cond()) return true;
      run_ms(1);
    }
    return cond();
  }

  int leader() const {
    for (size_t i = 0; i < nodes_.size(); ++i)
      if (nodes_[i] && nodes_[i]->raft_view().writable) return static_cast<int>(i);
    return -1;
  }

  ReplyHandle send(int i, Command c, RequestId request = {}, int64_t timeout_ms = 30000) {
    ReplyHandle h = ++next_handle_;
    envs_[i]->perform(
        nodes_[i]->on_command(h, CommandEnvelope{request, envs_[i]->now / 1000 + timeout_ms, c}));
    return h;
  }

  std::optional<Reply> take(int i, ReplyHandle h) {
    auto it = envs_[i]->replies.find(h);
    if (it == envs_[i]->replies.end()) return std::nullopt;
    Reply r = std::move(it->second);
    envs_[i]->replies.erase(it);
    return r;
  }

  PushCmd push_cmd(const std::string& txn) {
    PushCmd c;
    PushItem it;
    it.queue = "q";
    it.partition = "p";
    it.transaction_id = txn;
    it.txn_hash = hash_of(txn);
    it.message_id = make_uuid_v7(envs_[0]->now / 1000, ++ids_, 7);
    it.payload = "\"" + txn + "\"";
    c.items.push_back(it);
    return c;
  }

  // Pushes through node i and runs until it answers; the reply.
  std::optional<Reply> push(int i, const std::string& txn, int64_t within_ms = 500) {
    ReplyHandle h = send(i, push_cmd(txn));
    std::optional<Reply> r;
    run_until(within_ms, [&] { return (r = take(i, h)).has_value(); });
    return r;
  }

  // Sends a membership command to node i and runs until it answers (within_ms).
  std::optional<Reply> membership(int i, MembershipCmd cmd, int64_t within_ms = 2000) {
    ReplyHandle h = send(i, std::move(cmd));
    std::optional<Reply> r;
    run_until(within_ms, [&] { return (r = take(i, h)).has_value(); });
    return r;
  }

  Node& node(int i) { return *nodes_[i]; }
  MemEnv& env(int i) { return *envs_[i]; }

  // Every live node applied the same entries as far as the most advanced one.
  bool converged() const {
    std::set<std::pair<uint64_t, uint64_t>> seen;
    for (const auto& n : nodes_)
      if (n) seen.insert({n->raft_view().applied, n->raft_view().applied_chain});
    return seen.size() == 1;
  }

  std::vector<std::string> payloads(int i) {
    std::vector<std::string> out;
    const PartitionState* p = nodes_[i]->store().partition("q", "p");
    if (!p) return out;
    auto msgs = nodes_[i]->read_messages(p->id, Offset(0), 1000);
    if (msgs.ok())
      for (const auto& m : msgs.value()) out.push_back(m.payload);
    return out;
  }

 private:
  void deliver() {
    for (int round = 0; round < 100; ++round) {
      bool any = carry_forwards();
      for (size_t from = 0; from < envs_.size(); ++from) {
        auto out = std::move(envs_[from]->outbox);
        envs_[from]->outbox.clear();
        for (auto& [to_id, bytes] : out) {
          int to = static_cast<int>(to_id) - 1;
          if (!up(static_cast<int>(from)) || !up(to)) continue;
          if (isolated_.count(static_cast<int>(from)) || isolated_.count(to)) continue;
          envs_[to]->perform(nodes_[to]->on_message(from + 1, bytes));
          any = true;
        }
      }
      if (!any) return;
    }
  }

  bool cut(int a, int b) const { return isolated_.count(a) != 0 || isolated_.count(b) != 0; }

  // Forwarded commands travel to their leader as commands of its own, and its replies back;
  // a stream that cannot carry one (a node down or cut off) fails, as a broken stream does.
  bool carry_forwards() {
    bool any = false;
    for (size_t from = 0; from < envs_.size(); ++from) {
      auto out = std::move(envs_[from]->forwarded);
      envs_[from]->forwarded.clear();
      for (auto& f : out) {
        int to = static_cast<int>(f.to) - 1;
        any = true;
        if (!up(to) || cut(static_cast<int>(from), to)) {
          if (up(static_cast<int>(from)))
            envs_[from]->perform(nodes_[from]->on_forward_reply(f.id, std::nullopt));
          continue;
        }
        ReplyHandle h = ++next_handle_;
        serving_[h] = {static_cast<int>(from), to, f.id};
        CommandEnvelope e = *f.command;
        e.forwarded = true;
        e.deadline_ms = envs_[to]->now / 1000 + f.remaining_ms;
        envs_[to]->perform(nodes_[to]->on_command(h, std::move(e)));
      }
    }
    for (auto it = serving_.begin(); it != serving_.end();) {
      auto [from, to, id] = it->second;
      std::optional<Reply> r = up(to) ? take(to, it->first) : std::nullopt;
      bool broken = !up(to) || cut(from, to);
      if (!r && !broken) {
        ++it;
        continue;
      }
      if (up(from))
        envs_[from]->perform(
            nodes_[from]->on_forward_reply(id, broken ? std::nullopt : std::move(r)));
      it = serving_.erase(it);
      any = true;
    }
    return any;
  }

  std::map<ReplyHandle, std::tuple<int, int, uint64_t>> serving_;  // (from, to, forward id)
  NodeConfig cfg_;
  std::vector<std::unique_ptr<MemEnv>> envs_;
  std::vector<std::unique_ptr<Node>> nodes_;
  std::set<int> isolated_;
  ReplyHandle next_handle_ = 0;
  uint64_t ids_ = 0;
};

template <class T>
inline const T* as(const std::optional<Reply>& r) {
  return r ? std::get_if<T>(&r->body) : nullptr;
}

}  // namespace queen::testing
