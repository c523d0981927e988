#include "sim/workload.h"

#include <xxhash.h>

#include "io/sim/describe.h"
#include "io/sim/trace.h"
#include "sim/checker_names.h"

namespace queen::sim {
namespace {

const char* const kGroupNames[] = {"g1", "__QUEUE_MODE__"};
const char* const kWorkerGroup = "wk";
const char* const kWorkerInput = "qa";
const char* const kWorkerOutput = "wout";
const char* const kWorkerNs = "wk";
const char* const kWorkerTimers = "wtimer";

Hash128 hash_txn(const std::string& txn) {
  XXH128_hash_t h = XXH3_128bits(txn.data(), txn.size());
  return Hash128{h.low64, h.high64};
}

}  // namespace

Workload::Workload(SimWorld& world, Checker& checker, const RunParams& params)
    : world_(world),
      checker_(checker),
      params_(params),
      rng_(world.stream("clients.admin")),
      id_rng_(world.stream("clients.ids")),
      route_rng_(world.stream("clients.route")),
      cancel_rng_(world.stream("clients.cancel")),
      ops_rng_(world.stream("clients.ops")) {
  for (int q = 0; q < params.work.queues; ++q) queues_.push_back(strf("q%c", 'a' + q));
  for (int p = 0; p < params.work.producers; ++p) {
    Producer pr;
    pr.rng = world.stream(strf("clients.producer.%d", p));
    producers_.push_back(std::move(pr));
  }
  if (params.work.workers > 0) {  // configured, not produced to
    queues_.push_back(kWorkerOutput);
    queues_.push_back(kWorkerTimers);
  }
  for (int w = 0; w < params.work.workers; ++w) {
    Worker wk;
    wk.rng = world.stream(strf("clients.worker.%d", w));
    workers_.push_back(std::move(wk));
  }
  for (int g = 0; g < 2; ++g) {
    for (int i = 0; i < params.work.consumers_per_group; ++i) {
      int c = static_cast<int>(consumers_.size());
      Consumer co;
      co.rng = world.stream(strf("clients.consumer.%d", c));
      co.group = kGroupNames[g];
      consumers_.push_back(std::move(co));
    }
  }
}

void Workload::start() {
  for (int q = 0; q < static_cast<int>(queues_.size()); ++q) configure(q);
}

void Workload::enter_liveness(int64_t strict_after_us) {
  liveness_ = true;
  strict_after_us_ = strict_after_us;
}

bool Workload::producers_done() const {
  for (const Producer& p : producers_) {
    if (!p.finished) return false;
  }
  return true;
}

bool Workload::take_push_answered() {
  bool b = push_answered_;
  push_answered_ = false;
  return b;
}

std::string Workload::pending_summary() const {
  std::string s;
  for (size_t p = 0; p < producers_.size(); ++p) {
    if (!producers_[p].finished) {
      s += strf(" producer%zu(%d/%d pushes)", p, producers_[p].pushes_done,
                params_.work.pushes_per_producer);
    }
  }
  size_t open = 0;
  for (const auto& [h, r] : requests_) open += r.abandoned ? 0 : 1;
  return s + strf(" open_requests=%zu", open);
}

// ---- plumbing ----

CommandEnvelope Workload::envelope(Command command, int64_t timeout_ms) {
  CommandEnvelope env;
  env.request_id = RequestId{mint_id()};
  env.deadline_ms = world_.node_now_us(target_) / 1000 + timeout_ms;
  env.command = std::move(command);
  return env;
}

Uuid Workload::mint_id() {
  uint64_t a = id_rng_.next();
  uint64_t b = id_rng_.next();
  return make_uuid_v7(world_.node_now_us(target_) / 1000, a, b);
}

std::optional<ReplyHandle> Workload::submit(Kind kind, int client, CommandEnvelope env,
                                            int64_t timeout_us) {
  // In a cluster a client talks to any node now and then: a follower forwards its command.
  int nodes = world_.node_count();
  if (nodes > 1 && route_rng_.per_mille(params_.work.any_node_per_mille)) {
    int before = target_;
    target_ = static_cast<int>(route_rng_.below(static_cast<uint64_t>(nodes)));
    if (target_ != before) world_.count("client_target_changes");
  }
  std::optional<ReplyHandle> h = world_.submit(target_, env, this);
  if (!h) {
    world_.count("client_refused");
    next_target(0);
    return std::nullopt;
  }
  Request& r = requests_[*h];
  r.kind = kind;
  r.client = client;
  r.envelope = std::move(env);
  r.submitted_us = world_.now_us();
  r.timeout_us = timeout_us;
  r.node = target_;
  ReplyHandle handle = *h;
  world_.at(
      world_.now_us() + timeout_us + kReplyGraceUs,
      strf("client-timeout h%llu", static_cast<unsigned long long>(handle)),
      [this, handle] { timed_out(handle); }, EventTarget{},
      [this, handle] {
        auto it = requests_.find(handle);
        return it != requests_.end() && !it->second.abandoned;
      });
  return h;
}

void Workload::timed_out(ReplyHandle h) {
  Request& r = requests_.at(h);
  r.abandoned = true;
  world_.count("client_timeouts");
  if (r.kind == Kind::push) producers_[r.client].last_lost = true;
  if (r.kind == Kind::txn) workers_[r.client].last_lost = true;
  // After stop() the run restarts every node on purpose: what was pending dies with them.
  if (liveness_ && !stopped_ && r.submitted_us >= strict_after_us_) {
    world_.violation("8 liveness", strf("request h%llu (%s) submitted after healing got no "
                                        "answer by its deadline",
                                        static_cast<unsigned long long>(h),
                                        describe(r.envelope.command).c_str()));
  }
  retry_later(r.kind, r.client);
}

void Workload::retry_later(Kind kind, int client) {
  int64_t delay_us = backoff_us(rng_);
  switch (kind) {
    case Kind::configure:
      world_.after(delay_us, "admin-retry", [this, client] { configure(client); });
      break;
    case Kind::push:
      world_.after(delay_us, strf("producer%d-retry", client),
                   [this, client] { send_push(client); });
      break;
    case Kind::pop:
      world_.after(delay_us, strf("consumer%d-retry-pop", client),
                   [this, client] { consume(client); });
      break;
    case Kind::ack:
      world_.after(delay_us, strf("consumer%d-retry-ack", client),
                   [this, client] { send_ack(client); });
      break;
    case Kind::worker_pop:
      world_.after(delay_us, strf("worker%d-retry-pop", client), [this, client] { work(client); });
      break;
    case Kind::txn:
      world_.after(delay_us, strf("worker%d-retry-txn", client),
                   [this, client] { send_txn(client); });
      break;
    case Kind::ops:
      world_.after(delay_us, "ops-retry", [this] { operate(); });
      break;
  }
}

void Workload::on_reply_sent(ReplyHandle h, const Reply& reply, bool lost) {
  auto it = requests_.find(h);
  if (it == requests_.end()) return;
  Request& r = it->second;
  if (r.cancelling) {  // answered before the node heard of the close: it never arrives
    checker_.pop_answered(h, std::get<PopCmd>(r.envelope.command), reply,
                          checker_.lease_clock_us(r.node), /*lost=*/true);
    return end_cancelled(h);
  }
  r.answer_seq = world_.seq();
  switch (r.kind) {
    case Kind::configure:
      if (!lost) checker_.configure_answered(std::get<ConfigureCmd>(r.envelope.command), reply);
      break;
    case Kind::push:
      push_answered_ = true;
      checker_.push_answered(r.push_attempt, std::get<PushCmd>(r.envelope.command), reply,
                             &r.envelope.request_id, lost);
      break;
    case Kind::pop:
      checker_.pop_answered(h, std::get<PopCmd>(r.envelope.command), reply,
                            checker_.lease_clock_us(target_), lost);
      break;
    case Kind::ack:
      checker_.ack_answered(h, std::get<AckCmd>(r.envelope.command), r.ack, reply, lost);
      check_graceful_ack(h, r, reply);
      break;
    case Kind::worker_pop:
      checker_.pop_answered(h, std::get<PopCmd>(r.envelope.command), reply,
                            checker_.lease_clock_us(target_), lost);
      break;
    case Kind::txn:
      checker_.txn_answered(h, r.push_attempt, std::get<TxnCmd>(r.envelope.command), reply,
                            r.envelope.request_id, lost);
      break;
    case Kind::ops:
      op_answered(r, reply, lost);
      break;
  }
  if (r.abandoned) requests_.erase(it);  // the client has moved on; lost or not, no one waits
}

void Workload::graceful_stop_began(int node) {
  graceful_node_ = node;
  graceful_mark_ = disruptions ? disruptions() : 0;
}

// Only the stopping leader answers an ack outcome_unknown early: a follower does so for a
// command it forwarded only at the command's deadline.
void Workload::check_graceful_ack(ReplyHandle h, const Request& r, const Reply& reply) {
  if (graceful_node_ < 0 || !unknown_outcome(reply)) return;
  if (disruptions && disruptions() != graceful_mark_) return;
  if (world_.now_us() >= r.submitted_us + r.timeout_us - kGiveUpMarginUs) return;
  world_.violation(checking::kInv7,
                   strf("ack h%llu answered outcome_unknown during the graceful stop of n%d, "
                        "with no other fault: it handed over before the acks it took committed",
                        static_cast<unsigned long long>(h), graceful_node_));
}

// Clients follow the cluster's hints, as real ones do: a 503 naming the leader sends them
// there; no leader known, or a refused connection, sends them to the next node.
void Workload::next_target(uint64_t leader_hint) {
  int nodes = world_.node_count();
  if (nodes <= 1) return;
  int before = target_;
  if (leader_hint != 0 && static_cast<int>(leader_hint) <= nodes) {
    target_ = static_cast<int>(leader_hint) - 1;
  } else if (leader_hint == 0) {
    target_ = (target_ + 1) % nodes;
  }
  if (target_ != before) world_.count("client_target_changes");
}

void Workload::on_reply(ReplyHandle h, const Reply& reply) {
  if (const auto* e = std::get_if<ErrorReply>(&reply.body)) {
    if (api::is_retry(e->code)) next_target(e->leader);
  }
  auto it = requests_.find(h);
  if (it == requests_.end() || it->second.abandoned) return;
  Request r = std::move(it->second);
  requests_.erase(it);
  switch (r.kind) {
    case Kind::configure:
      if (std::holds_alternative<ConfigureReply>(reply.body)) {
        if (++configured_ == static_cast<int>(queues_.size())) {
          for (int p = 0; p < static_cast<int>(producers_.size()); ++p) produce(p);
          for (int c = 0; c < static_cast<int>(consumers_.size()); ++c) consume(c);
          for (int w = 0; w < static_cast<int>(workers_.size()); ++w) work(w);
          operate();
        }
      } else {
        retry_later(Kind::configure, r.client);
      }
      break;
    case Kind::push:
      push_done(r.client, reply);
      break;
    case Kind::pop:
      got_batch(r.client, reply);
      break;
    case Kind::ack:
      ack_done(r.client, reply, r.answer_seq);
      break;
    case Kind::worker_pop:
      got_input(r.client, reply);
      break;
    case Kind::txn:
      txn_done(r.client, reply);
      break;
    case Kind::ops:
      op_done(r, reply);
      break;
  }
}

// ---- admin ----

void Workload::configure(int q) {
  ConfigureCmd cmd;
  cmd.queue = queue_name(q);
  cmd.patch.lease_time_s = params_.work.lease_time_s;
  cmd.patch.retry_limit = params_.work.retry_limit;
  cmd.patch.retry_delay_ms = params_.work.retry_delay_ms;
  cmd.patch.dead_letter_queue = true;
  cmd.patch.dlq_after_max_retries = true;
  cmd.patch.encryption_enabled = q % 2 == 1;  // odd queues take the seal and open paths
  int64_t timeout_ms = params_.work.request_timeout_ms;
  if (!submit(Kind::configure, q, envelope(std::move(cmd), timeout_ms), timeout_ms * 1000)) {
    retry_later(Kind::configure, q);
  }
}

// ---- producers ----

void Workload::produce(int p) {
  Producer& pr = producers_[p];
  const WorkloadParams& w = params_.work;
  if (stopped_ || pr.pushes_done >= w.pushes_per_producer) {
    pr.finished = true;
    return;
  }
  Rng& rng = pr.rng;
  int n = static_cast<int>(rng.range(1, w.items_per_push_max));
  bool two_queues = w.queues >= 2 && rng.per_mille(w.two_queue_push_per_mille);
  if (two_queues && n < 2) n = 2;
  int queue = static_cast<int>(rng.below(w.queues));
  pr.items.clear();
  for (int i = 0; i < n; ++i) {
    PushItem it;
    it.queue = queue_name(two_queues ? (queue + i) % 2 : queue);
    it.partition = strf("p%d", static_cast<int>(rng.below(w.partitions_per_queue)));
    std::string pad(static_cast<size_t>(rng.range(0, w.payload_bytes_max)), 'x');
    it.payload = strf("{\"producer\":%d,\"push\":%d,\"item\":%d,\"pad\":\"%s\"}", p, pr.pushes_done,
                      i, pad.c_str());
    pr.items.push_back(std::move(it));
  }
  pr.attempts = 0;
  send_push(p);
}

void Workload::send_push(int p) {
  Producer& pr = producers_[p];
  if (++pr.attempts > params_.work.request_attempts_max) {
    world_.count("client_gave_up");
    ++pr.pushes_done;
    produce(p);
    return;
  }
  int64_t timeout_ms = params_.work.request_timeout_ms;
  bool resend = pr.attempts > 1 && pr.last_lost && pr.last && pr.rng.per_mille(500);
  pr.last_lost = false;
  CommandEnvelope env;
  uint64_t attempt = 0;
  if (resend) {
    // The same request again: same request id, same body (message ids included).
    env = *pr.last;
    env.deadline_ms = world_.node_now_us(target_) / 1000 + timeout_ms;
    attempt = pr.last_attempt;
    world_.count("client_resent_requests");
  } else {
    PushCmd cmd;
    for (size_t i = 0; i < pr.items.size(); ++i) {
      PushItem it = pr.items[i];
      it.transaction_id = strf("p%d-%d-%zu", p, pr.pushes_done, i);
      it.txn_hash = hash_txn(it.transaction_id);
      // The ids run on, as the edge mints them (a recorded answer keeps them as one run);
      // each is still drawn, so a seed's draws stay as they were.
      Uuid minted = mint_id(), next;
      bool runs_on = i > 0 && uuid_successor(cmd.items.back().message_id, &next);
      it.message_id = runs_on ? next : minted;
      cmd.items.push_back(std::move(it));
    }
    attempt = next_attempt_++;
    checker_.push_submitted(attempt, cmd);
    env = envelope(std::move(cmd), timeout_ms);
    if (pr.attempts > 1) world_.count("client_push_retries");
  }
  pr.last = env;
  pr.last_attempt = attempt;
  std::optional<ReplyHandle> h = submit(Kind::push, p, std::move(env), timeout_ms * 1000);
  if (!h) {
    retry_later(Kind::push, p);
    return;
  }
  requests_[*h].push_attempt = attempt;
}

void Workload::push_done(int p, const Reply& reply) {
  if (const auto* r = std::get_if<PushReply>(&reply.body)) {
    for (const PushResult& res : r->results) {
      if (res.status == PushStatus::duplicate) world_.count("push_duplicates");
    }
  } else {
    world_.count("push_errors");
    // Applied or not: a client that cannot tell retries as after a lost answer.
    if (unknown_outcome(reply)) producers_[p].last_lost = true;
    retry_later(Kind::push, p);
    return;
  }
  ++producers_[p].pushes_done;
  int64_t think_us = producers_[p].rng.range(0, 20'000);
  world_.after(think_us, strf("producer%d-next", p), [this, p] { produce(p); });
}

// ---- consumers ----

void Workload::consume(int c) {
  if (stopped_) return;
  Consumer& co = consumers_[c];
  Rng& rng = co.rng;
  const WorkloadParams& w = params_.work;
  PopCmd cmd;
  cmd.queue = queue_name(static_cast<int>(rng.below(w.queues)));
  cmd.group = co.group;
  cmd.batch = static_cast<uint32_t>(rng.range(1, w.pop_batch_max));
  cmd.wait = rng.per_mille(w.wait_per_mille);
  cmd.subscription_mode = SubscriptionMode::all;
  int64_t timeout_ms = cmd.wait ? rng.range(100, w.pop_wait_ms_max) : w.request_timeout_ms;
  int64_t clock_us = checker_.lease_clock_us(target_);
  std::optional<ReplyHandle> h = submit(Kind::pop, c, envelope(cmd, timeout_ms), timeout_ms * 1000);
  if (!h) {
    retry_later(Kind::pop, c);
    return;
  }
  checker_.pop_submitted(*h, cmd, clock_us);
  if (cmd.wait && !liveness_ && cancel_rng_.per_mille(params_.work.cancel_poll_per_mille)) {
    ReplyHandle handle = *h;
    world_.after(cancel_rng_.range(1'000, timeout_ms * 1000), strf("consumer%d-closes", c),
                 [this, handle] { close_poll(handle); });
  }
}

// The consumer closes the connection of its long poll. The node must not answer it once it
// has heard of the close; an answer it sent before never reaches the consumer.
void Workload::close_poll(ReplyHandle h) {
  auto it = requests_.find(h);
  if (it == requests_.end() || it->second.abandoned || it->second.cancelling) return;
  it->second.cancelling = true;
  world_.count("client_cancels");
  world_.cancel(h, [this, h] { end_cancelled(h); });
}

void Workload::end_cancelled(ReplyHandle h) {
  auto it = requests_.find(h);
  if (it == requests_.end()) return;
  Request r = std::move(it->second);
  requests_.erase(it);
  PopReply none;
  checker_.pop_answered(h, std::get<PopCmd>(r.envelope.command), Reply{none},
                        checker_.lease_clock_us(r.node), /*lost=*/true);
  if (!r.abandoned) retry_later(r.kind, r.client);
}

void Workload::got_batch(int c, const Reply& reply) {
  Consumer& co = consumers_[c];
  const auto* r = std::get_if<PopReply>(&reply.body);
  if (r == nullptr || r->messages.empty()) {
    int64_t idle_us = r == nullptr ? backoff_us(co.rng) : co.rng.range(5'000, 100'000);
    world_.after(idle_us, strf("consumer%d-next", c), [this, c] { consume(c); });
    return;
  }
  co.batch = *r;
  const WorkloadParams& w = params_.work;
  int64_t lease_us = w.lease_time_s * 1'000'000;
  int64_t work_us = co.rng.range(0, 50'000);
  if (!liveness_ && co.rng.per_mille(w.slow_work_per_mille)) {
    work_us = co.rng.range(lease_us / 4, lease_us * 4 / 5);
  }
  if (!liveness_ && co.rng.per_mille(w.sleep_past_lease_per_mille)) {
    work_us = co.rng.range(lease_us + 100'000, lease_us + 1'500'000);
    world_.count("client_slept_past_lease");
    world_.note(strf("consumer%d works past lease L%s for %lld ms", c,
                     short_id(r->lease_id).c_str(), static_cast<long long>(work_us / 1000)));
  }
  world_.after(work_us, strf("consumer%d-worked", c), [this, c] { plan_acks(c); });
}

void Workload::plan_acks(int c) {
  Consumer& co = consumers_[c];
  Rng& rng = co.rng;
  const WorkloadParams& w = params_.work;
  co.ack = AckCmd{};
  co.ack_ctx = AckContext{};
  for (const PopMessage& m : co.batch.messages) {
    if (!liveness_ && rng.per_mille(w.skip_ack_per_mille)) continue;
    AckItem it;
    it.transaction_id = m.transaction_id;
    it.txn_hash = hash_txn(m.transaction_id);
    it.partition_id = m.partition_id;
    if (!rng.per_mille(w.no_lease_per_mille)) it.lease_id = co.batch.lease_id;
    it.status = rng.per_mille(w.fail_per_mille) ? AckStatus::failed : AckStatus::completed;
    if (it.status == AckStatus::failed) it.error = "simulated failure";
    it.group = co.group;
    co.ack.items.push_back(std::move(it));
    co.ack_ctx.offsets.push_back(m.offset);
    co.ack_ctx.bogus.push_back(false);
  }
  if (!co.batch.messages.empty() && rng.per_mille(w.bogus_ack_per_mille)) {
    AckItem it;
    it.transaction_id =
        strf("never-pushed-%llu", static_cast<unsigned long long>(rng.next() % 1000000));
    it.txn_hash = hash_txn(it.transaction_id);
    it.partition_id = co.batch.messages[0].partition_id;
    it.lease_id = co.batch.lease_id;
    it.group = co.group;
    co.ack.items.push_back(std::move(it));
    co.ack_ctx.offsets.push_back(Offset(0));
    co.ack_ctx.bogus.push_back(true);
  }
  if (co.ack.items.empty()) {
    consume(c);
    return;
  }
  co.attempts = 0;
  co.repeated = false;
  send_ack(c);
}

void Workload::send_ack(int c) {
  Consumer& co = consumers_[c];
  if (++co.attempts > params_.work.request_attempts_max) {
    world_.count("client_gave_up");
    consume(c);
    return;
  }
  int64_t timeout_ms = params_.work.request_timeout_ms;
  std::optional<ReplyHandle> h =
      submit(Kind::ack, c, envelope(co.ack, timeout_ms), timeout_ms * 1000);
  if (!h) {
    retry_later(Kind::ack, c);
    return;
  }
  requests_[*h].ack = co.ack_ctx;
  checker_.ack_submitted(*h, co.ack, co.ack_ctx);
}

void Workload::ack_done(int c, const Reply& reply, uint64_t answer_seq) {
  Consumer& co = consumers_[c];
  const auto* r = std::get_if<AckReply>(&reply.body);
  if (r == nullptr) {
    world_.count("ack_errors");
    retry_later(Kind::ack, c);
    return;
  }
  if (!co.repeated && co.rng.per_mille(params_.work.repeat_ack_per_mille)) {
    co.repeated = true;
    co.attempts = 0;
    co.ack_ctx.repeat = true;
    co.ack_ctx.repeat_of_answer_seq = answer_seq;
    co.ack_ctx.first_answer_success.clear();
    for (const AckResult& res : r->results) co.ack_ctx.first_answer_success.push_back(res.success);
    world_.count("client_repeated_acks");
    send_ack(c);
    return;
  }
  consume(c);
}

// ---- workers ----

void Workload::work(int w) {
  if (stopped_) return;
  Worker& wk = workers_[w];
  PopCmd cmd;
  cmd.queue = kWorkerInput;
  cmd.group = kWorkerGroup;
  cmd.batch = 1;
  cmd.wait = wk.rng.per_mille(300);
  cmd.subscription_mode = SubscriptionMode::all;
  int64_t timeout_ms = cmd.wait ? wk.rng.range(100, 1000) : params_.work.request_timeout_ms;
  int64_t clock_us = checker_.lease_clock_us(target_);
  std::optional<ReplyHandle> h =
      submit(Kind::worker_pop, w, envelope(cmd, timeout_ms), timeout_ms * 1000);
  if (!h) {
    retry_later(Kind::worker_pop, w);
    return;
  }
  checker_.pop_submitted(*h, cmd, clock_us);
}

void Workload::got_input(int w, const Reply& reply) {
  Worker& wk = workers_[w];
  const auto* r = std::get_if<PopReply>(&reply.body);
  if (r == nullptr || r->messages.empty()) {
    int64_t idle_us = r == nullptr ? backoff_us(wk.rng) : wk.rng.range(5'000, 100'000);
    world_.after(idle_us, strf("worker%d-next", w), [this, w] { work(w); });
    return;
  }
  wk.input = r->messages[0];
  wk.lease = r->lease_id;
  wk.attempts = 0;
  wk.last.reset();
  wk.last_lost = false;
  int64_t work_us = wk.rng.range(0, 30'000);
  if (!liveness_ && wk.rng.per_mille(params_.work.worker_sleep_past_lease_per_mille)) {
    int64_t lease_us = params_.work.lease_time_s * 1'000'000;
    work_us = wk.rng.range(lease_us + 100'000, lease_us + 1'500'000);
    world_.count("worker_slept_past_lease");
  }
  world_.after(work_us, strf("worker%d-worked", w), [this, w] { send_txn(w); });
}

// One transaction per input: ack it (with the lease), push its output with a transactionId
// derived from the input's, put a KV marker named after the input. A retry after a lost answer
// is the same transaction (half the time the very same request); after a commit it must roll
// back (the ack is already applied, the output a duplicate) and change nothing.
void Workload::send_txn(int w) {
  Worker& wk = workers_[w];
  if (++wk.attempts > params_.work.request_attempts_max) {
    world_.count("client_gave_up");
    work(w);
    return;
  }
  int64_t timeout_ms = params_.work.request_timeout_ms;
  bool resend = wk.attempts > 1 && wk.last_lost && wk.last && wk.rng.per_mille(500);
  wk.last_lost = false;
  CommandEnvelope env;
  uint64_t attempt = 0;
  if (resend) {
    env = *wk.last;
    env.deadline_ms = world_.node_now_us(target_) / 1000 + timeout_ms;
    attempt = wk.last_attempt;
    world_.count("client_resent_requests");
  } else {
    const PopMessage& m = wk.input;
    std::string key = m.queue + "/" + m.partition + "/" + m.transaction_id;
    TxnCmd t;
    t.transaction_id = mint_id();
    TxnOperation ack;
    ack.is_ack = true;
    ack.ack.transaction_id = m.transaction_id;
    ack.ack.txn_hash = hash_txn(m.transaction_id);
    ack.ack.partition_id = m.partition_id;
    ack.ack.lease_id = wk.lease;
    ack.ack.status = AckStatus::completed;
    ack.ack.group = kWorkerGroup;
    t.operations.push_back(std::move(ack));
    TxnOperation push;
    PushItem out;
    out.queue = kWorkerOutput;
    out.partition = m.partition;
    out.transaction_id = "out-" + key;
    out.txn_hash = hash_txn(out.transaction_id);
    out.message_id = mint_id();
    out.payload = strf("{\"in\":\"%s\",\"try\":%d}", key.c_str(), wk.attempts);
    push.items.push_back(std::move(out));
    t.operations.push_back(std::move(push));
    KvOp put;
    put.op = KvOpKind::put;
    put.ns = kWorkerNs;
    put.key = key;
    put.value = "1";
    put.forever = true;
    t.kv.push_back(std::move(put));
    if (wk.rng.per_mille(500)) {  // a timer that fires into wtimer (dedup on its txn)
      TimerOp timer;
      timer.op = TimerOpKind::schedule;
      timer.queue = kWorkerTimers;
      timer.partition = m.partition;
      timer.timer_key = key;
      timer.delay_ms = wk.rng.range(0, 1500);
      timer.txn = "timer-" + key;
      timer.txn_hash = hash_txn(timer.txn);
      timer.message_id = mint_id();
      timer.payload = strf("{\"timer\":\"%s\",\"try\":%d}", key.c_str(), wk.attempts);
      t.timers.push_back(std::move(timer));
      world_.count("worker_timers_sent");
    }
    attempt = next_attempt_++;
    env = envelope(std::move(t), timeout_ms);
    if (wk.attempts > 1) world_.count("worker_txn_retries");
  }
  wk.last = env;
  wk.last_attempt = attempt;
  TxnCmd copy = std::get<TxnCmd>(env.command);
  std::optional<ReplyHandle> h = submit(Kind::txn, w, std::move(env), timeout_ms * 1000);
  if (!h) {
    retry_later(Kind::txn, w);
    return;
  }
  requests_[*h].push_attempt = attempt;
  checker_.txn_submitted(*h, attempt, copy, wk.input, resend);
}

void Workload::txn_done(int w, const Reply& reply) {
  const auto* r = std::get_if<TxnReply>(&reply.body);
  if (r == nullptr) {
    world_.count("txn_errors");
    if (unknown_outcome(reply)) workers_[w].last_lost = true;
    retry_later(Kind::txn, w);
    return;
  }
  if (!r->success) world_.count("worker_rollback_" + r->reason);
  int64_t think_us = workers_[w].rng.range(0, 10'000);
  world_.after(think_us, strf("worker%d-next", w), [this, w] { work(w); });
}

}  // namespace queen::sim
