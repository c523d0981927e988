// The simulated clients of one run: an admin that configures the queues, producers that push
// batches (some spanning two queues in one request), and consumers in two groups (one named,
// one in queue mode) that pop (some long polls), work (sometimes past their lease), and ack
// (completed mostly, failed sometimes, with or without the leaseId, sometimes twice, sometimes
// not at all, sometimes naming a message that was never pushed), and workers (group "wk" on qa)
// that commit one transaction per input: ack it, push its output to wout, put a KV marker and
// sometimes schedule a timer that fires into wtimer. They do the edge's work
// themselves: request ids, deadlines, message ids (UUIDv7 from sim time and a seeded stream),
// xxh3-128 transactionId hashes.
//
// Retries: a client that gets no answer by its deadline (plus a grace), a 503, or a refused
// connection tries again, as real clients do: a push with the SAME transactionIds (the node's
// dedup answers the stored ones `duplicate` with the original offset and message id), after a
// lost answer half the time as the very same request (same request id and body: the node must
// answer the recorded outcome), otherwise as a new request with fresh message ids (the edge
// mints them per request); an ack as the same ack. Every request is bounded by
// request_attempts_max.
//
// Everything the clients send and every answer the node sends goes to the Checker.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/api/replies.h"
#include "io/sim/world.h"
#include "sim/checker.h"
#include "sim/params.h"

namespace queen::sim {

class Workload final : public ClientSink {
 public:
  static constexpr int64_t kReplyGraceUs = 1'000'000;  // past the deadline before a retry
  // A follower gives a forwarded command up this close to its deadline at the latest.
  static constexpr int64_t kGiveUpMarginUs = 500'000;

  Workload(SimWorld& world, Checker& checker, const RunParams& params);

  void start();
  // Faults are over: the clients stop misbehaving (no sleeping past leases, no skipped acks),
  // and from now on an unanswered request is a liveness failure.
  void enter_liveness(int64_t strict_after_us);
  void stop() { stopped_ = true; }
  bool producers_done() const;
  // True once after a step in which the node answered a push (for targeted crashes).
  bool take_push_answered();
  std::string pending_summary() const;
  int target() const { return target_; }

  // A graceful stop of the leader `node` is under way: it must answer every ack it took with
  // its outcome, not outcome_unknown, unless another fault (crash, pause, partition: counted
  // by `disruptions`) came in between (invariant 7). Acks it took from followers count too.
  void graceful_stop_began(int node);
  void graceful_stop_ended() { graceful_node_ = -1; }
  std::function<uint64_t()> disruptions;

  void on_reply_sent(ReplyHandle handle, const Reply& reply, bool lost) override;
  void on_reply(ReplyHandle handle, const Reply& reply) override;

 private:
  enum class Kind { configure, push, pop, ack, worker_pop, txn, ops };
  struct Request {
    Kind kind = Kind::push;
    int client = 0;
    CommandEnvelope envelope;
    uint64_t push_attempt = 0;
    AckContext ack;
    int64_t submitted_us = 0;
    int64_t timeout_us = 0;
    bool abandoned = false;  // the client timed out and moved on
    uint64_t answer_seq = 0;
    bool cancelling = false;  // a long poll whose consumer closed the connection
    int node = 0;             // the node it was sent to
  };
  struct Producer {
    Rng rng;
    int pushes_done = 0;
    int attempts = 0;
    bool finished = false;
    std::vector<PushItem> items;          // the push being sent (queue, partition, payload)
    bool last_lost = false;               // the last attempt got no answer (a retry may reuse it)
    std::optional<CommandEnvelope> last;  // the last attempt as sent
    uint64_t last_attempt = 0;
  };
  struct Consumer {
    Rng rng;
    std::string group;
    PopReply batch;
    AckCmd ack;
    AckContext ack_ctx;
    int attempts = 0;
    bool repeated = false;
  };

  struct Worker {  // pops one input of qa (group "wk") and commits one transaction for it
    Rng rng;
    PopMessage input;
    LeaseId lease;
    int attempts = 0;
    bool last_lost = false;
    std::optional<CommandEnvelope> last;
    uint64_t last_attempt = 0;
  };

  // admin
  void configure(int queue);
  // producers
  void produce(int p);
  void send_push(int p);
  void push_done(int p, const Reply& reply);
  // consumers
  void consume(int c);
  void got_batch(int c, const Reply& reply);
  void close_poll(ReplyHandle h);
  void end_cancelled(ReplyHandle h);
  void plan_acks(int c);
  void send_ack(int c);
  void ack_done(int c, const Reply& reply, uint64_t answer_seq);

  // the operator (sim/workload_ops.cpp)
  void operate();
  void send_op(Command cmd);
  Command read_command(const std::string& key);
  // A message of the operator's own queue (pushed, then read, traced and deleted), a
  // subscription or a position moved inside a transaction, for its group.
  Command message_command(const std::string& key);
  Command group_command(const std::string& key);
  void replay(const DlqRecord& letter);
  void op_answered(const Request& r, const Reply& reply, bool lost);
  void op_done(const Request& r, const Reply& reply);

  // workers
  void work(int w);
  void got_input(int w, const Reply& reply);
  void send_txn(int w);
  void txn_done(int w, const Reply& reply);

  std::optional<ReplyHandle> submit(Kind kind, int client, CommandEnvelope envelope,
                                    int64_t timeout_us);
  void timed_out(ReplyHandle h);
  void check_graceful_ack(ReplyHandle h, const Request& r, const Reply& reply);
  void retry_later(Kind kind, int client);
  CommandEnvelope envelope(Command command, int64_t timeout_ms);
  Uuid mint_id();
  void next_target(uint64_t leader_hint);
  static bool unknown_outcome(const Reply& reply) {
    const auto* e = std::get_if<ErrorReply>(&reply.body);
    return e != nullptr && e->code == api::Errc::outcome_unknown;
  }
  int64_t backoff_us(Rng& rng) { return rng.range(20'000, 300'000); }
  const std::string& queue_name(int q) const { return queues_[q]; }

  SimWorld& world_;
  Checker& checker_;
  const RunParams& params_;
  Rng rng_;     // the admin's behaviour
  Rng id_rng_;  // ids minted at the edge
  Rng route_rng_;   // which node a client talks to
  Rng cancel_rng_;  // which long polls their consumer closes, and when
  Rng ops_rng_;     // the operator's behaviour
  uint64_t ops_sent_ = 0;
  PushCmd replay_push_;  // the push a DLQ replay being sent makes, for the checker
  DlqRecord replay_letter_;
  // The operator's newest message in its queue, known once its push was answered.
  std::optional<std::pair<PartitionId, std::string>> ops_message_;
  std::vector<std::string> queues_;
  std::vector<Producer> producers_;
  std::vector<Consumer> consumers_;
  std::vector<Worker> workers_;
  std::map<ReplyHandle, Request> requests_;
  int configured_ = 0;
  uint64_t next_attempt_ = 1;
  bool stopped_ = false;
  bool liveness_ = false;
  int64_t strict_after_us_ = INT64_MAX;
  bool push_answered_ = false;
  int target_ = 0;  // the node the clients send to
  int graceful_node_ = -1;
  uint64_t graceful_mark_ = 0;  // disruptions() when the graceful stop began
};

}  // namespace queen::sim
