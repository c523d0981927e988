// The checker: keeps its own model of what every simulated client sent and was told, and
// asserts DESIGN.md's invariants against it, online (as answers go out) and after the run
// (through the recovered node's store and read path). A violation is reported to the world
// with the invariant's number and name; every check is stated so that it can only fire on a
// definite contradiction (an answer lost to the network or a request whose outcome is unknown
// never counts as "told").
//
// Ordering: answers are observed when the node hands them to its environment (node order),
// requests when the client submits them; `seq` is the world's event sequence, so "request
// submitted after answer sent" is a definite happens-before.
//
// Invariants covered (single node): 1 answered pushes survive recovery; 2 gapless offsets,
// next_offset = count, each request applied once; 3 a transactionId stored once per partition,
// a duplicate answered with the original offset and message id, a request id retried answered
// with the first outcome; 4 delivery order per group and partition,
// no redelivery after an answered ack, DLQ exactly once; 5 one live lease per group and
// partition, no ack accepted on a superseded lease; 6 a push request is all or nothing across
// queues, and a worker's transaction (ack + output push + KV marker + timer) is all or
// nothing; 7 answers mean what they say; 8 (liveness) via drained().
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "core/api/replies.h"
#include "io/sim/world.h"
#include "sim/params.h"

namespace queen::sim {

// The context a client attaches to an ack request: the offset of each item (the consumer
// knows it from the pop) and whether the item names a message nobody pushed.
struct AckContext {
  std::vector<Offset> offsets;
  std::vector<bool> bogus;
  bool repeat = false;  // a deliberate repeat of an answered ack
  uint64_t repeat_of_answer_seq = 0;
  std::vector<bool> first_answer_success;  // for repeats: how the first one was answered
};

class Checker {
 public:
  Checker(SimWorld& world, const RunParams& params);

  // ---- online: the clients report what they send and what the node answered ----
  void push_submitted(uint64_t attempt, const PushCmd& cmd);
  // `request_id` (when given) is the envelope's: a retry under the same request id must get the
  // first answer the node sent for it. A `lost` answer only records that first answer.
  void push_answered(uint64_t attempt, const PushCmd& cmd, const Reply& reply,
                     const RequestId* request_id = nullptr, bool lost = false);
  void pop_submitted(ReplyHandle h, const PopCmd& cmd, int64_t node_clock_us);
  // Called for every answer the node sent, `lost` or not (a lost one only closes the request).
  void pop_answered(ReplyHandle h, const PopCmd& cmd, const Reply& reply, int64_t node_clock_us,
                    bool lost);
  void ack_submitted(ReplyHandle h, const AckCmd& cmd, const AckContext& ctx);
  // Called for every answer the node sent, `lost` or not (a lost one only closes the request).
  void ack_answered(ReplyHandle h, const AckCmd& cmd, const AckContext& ctx, const Reply& reply,
                    bool lost);
  void configure_answered(const ConfigureCmd& cmd, const Reply& reply);
  // A replay of this dead letter was sent: it may be gone from the DLQ at the end (its
  // message pushed again is reported as a push).
  void dlq_replay_submitted(const DlqRecord& letter) {
    dlq_replayed_.insert({letter.group, letter.partition_id.value, letter.offset.value});
  }
  // A worker's transaction (ack its input + push one output + a KV marker). `resend`: the same
  // request (request id and body) sent again. Answers are reported lost or not: the node sent
  // a success only once the transaction committed.
  void txn_submitted(ReplyHandle h, uint64_t attempt, const TxnCmd& cmd, const PopMessage& input,
                     bool resend);
  void txn_answered(ReplyHandle h, uint64_t attempt, const TxnCmd& cmd, const Reply& reply,
                    const RequestId& request_id, bool lost);

  // ---- crashes: what the node had committed must be back after its restart ----
  void before_crash(int node, const Node& process);
  void after_start(int node, const Node& process);

  // ---- the end ----
  // Every group has consumed every partition of every queue (committed cursors at the end).
  bool drained(std::string* why) const;
  // After the final restart: read everything back and check invariants 1, 2, 4 (DLQ), 6, 7.
  void final_check();

  // Cluster: the node whose store the end checks read (the leader once everything settled),
  // and a leader change, which loses the leader's in-memory request-id outcomes like a restart.
  void set_reference(int node) { reference_ = node; }
  bool same_messages_everywhere();
  void leader_changed() { ++starts_; }
  // The clock leases are judged by: the node's own on one node, simulated time in a cluster.
  int64_t lease_clock_us(int node) const;
  static constexpr int64_t kDriftPpmMax = 200;

  uint64_t pushes_answered() const { return pushes_answered_; }
  uint64_t pops_answered() const { return pops_answered_; }
  uint64_t acks_answered() const { return acks_answered_; }

 private:
  struct SentItem {
    uint64_t attempt = 0;
    std::string queue, partition, txn, payload;
  };
  struct Attempt {
    std::vector<Uuid> msg_ids;
    std::set<std::string> queues;
  };
  struct Stored {  // where a transactionId was first stored (answered queued or delivered)
    Uuid msg_id;
    uint64_t pid = 0;
    uint64_t offset = 0;
  };
  struct FirstAnswer {  // the first answer the node sent under a request id
    PushReply reply;
    int64_t node_clock_us = 0;
    uint64_t starts = 0;  // node starts seen when it was sent
  };
  struct Answered {  // an item answered 201 queued (or duplicate: the original's place)
    Uuid msg_id;
    PartitionId pid;
    Offset offset;
  };
  using GpKey = std::pair<std::string, uint64_t>;
  struct Lease {
    LeaseId id;
    uint64_t pop_submit_seq = 0;
    uint64_t grant_answer_seq = 0;
    int64_t expiry_lower_us = 0;  // node clock: the lease lives at least until here
    int64_t expiry_upper_us = 0;  // node clock: and is certainly over from here on
  };
  struct AckRecord {
    uint64_t submit_seq = 0;
    uint64_t answer_seq = 0;  // 0: not answered (yet, or ever)
  };
  struct GroupPartition {       // the model of one consumer group on one partition
    std::vector<Lease> leases;  // in grant order
    std::vector<AckRecord> acks;
    std::set<uint64_t> delivered;
    int64_t max_first_delivered = -1;
    std::map<uint64_t, uint64_t> settled_answer_seq;  // offset → first answer: acked or DLQ
    std::set<uint64_t> acked;                         // completed, answered
    std::set<uint64_t> dlq;                           // moved to DLQ, answered
    std::map<std::string, std::vector<uint64_t>> ack_submits;  // txn → seqs of its ack requests
  };
  struct PopInfo {
    uint64_t submit_seq = 0;
    int64_t submit_clock_us = 0;
    std::string group;
  };
  struct GroupPops {  // when pops of one group were last sent and answered
    uint64_t last_submit_seq = 0;
    uint64_t last_answer_seq = 0;
  };
  // True when no pop of `group` was outstanding or sent since `since_seq` (none could have
  // claimed a partition of the group in between).
  bool no_pop_since(const std::string& group, uint64_t since_seq) const;
  struct AckInfo {
    uint64_t submit_seq = 0;
    int64_t submit_clock_us = 0;
    std::vector<std::pair<GpKey, size_t>> records;  // into GroupPartition::acks
  };
  struct Snapshot {                            // committed state before a crash
    std::map<uint64_t, uint64_t> next_offset;  // pid → next
    std::map<std::pair<std::string, uint64_t>, uint64_t> cursor_next;  // (group,pid) → next
    uint64_t queues = 0;
  };

  GroupPartition& gp(const std::string& group, PartitionId pid) { return gps_[{group, pid.value}]; }
  void fail(const char* invariant, std::string detail);
  // The queues the clients use (the operator's own is made and deleted again).
  static uint64_t clients_queues(const Store& store);
  void check_push_result(uint64_t attempt, const PushItem& item, const PushResult& r, uint32_t i);
  void check_request_outcome(const RequestId& rid, const PushReply& r);
  void final_worker(const Node& n, const std::map<Uuid, std::pair<PartitionId, Offset>>& found);
  void final_dedup(const std::map<Uuid, std::pair<PartitionId, Offset>>& found);
  void check_pop_message(const PopCmd& cmd, const PopReply& r, const PopMessage& m,
                         const PopInfo& info);
  void check_new_lease(const std::string& group, PartitionId pid, const PopReply& r,
                       const PopInfo& info, int64_t node_clock_us);
  bool possibly_released(const GroupPartition& g, const Lease& l, uint64_t before_seq) const;
  int64_t lease_slack_us(bool late) const;
  void check_ack_item(const AckItem& item, const AckResult& res, Offset offset, bool bogus,
                      const AckInfo& info);
  void check_stale_lease_ack(const AckItem& item, const AckResult& res, const AckInfo& info);
  // Reads the recovered node back: invariants 1, 2, 6 and 7 (what the store holds); false
  // when a violation was reported.
  bool verify_recovered(const Node& n);
  void final_partitions(const Node& n, std::map<Uuid, std::pair<PartitionId, Offset>>* found);
  void final_answered(const std::map<Uuid, std::pair<PartitionId, Offset>>& found);
  void final_atomicity(const std::map<Uuid, std::pair<PartitionId, Offset>>& found);
  void final_dlq();
  void final_configured();

  SimWorld& world_;
  const RunParams& params_;
  std::map<Uuid, SentItem> sent_;
  // (queue, partition, transactionId) → where it is stored (invariant 3)
  std::map<std::tuple<std::string, std::string, std::string>, Stored> txn_stored_;
  std::map<RequestId, FirstAnswer> first_answer_;
  struct TxnAttempt {       // one worker transaction as built (resends share it)
    std::string input_key;  // queue/partition/transactionId of the input
    uint64_t input_pid = 0, input_offset = 0;
    Uuid out_msg;
    uint64_t last_submit_seq = 0;
    int submits = 0;                // a resend shares the attempt: any of them may have applied
    uint64_t rollback_seq = 0;      // answered success:false (0: never)
    bool committed = false;         // answered success:true (lost or not)
    std::optional<Uuid> timer_msg;  // the message of the timer it schedules, if any
  };
  std::map<uint64_t, TxnAttempt> txn_attempts_;
  std::map<ReplyHandle, AckInfo> txn_acks_;  // outstanding transactions' ack records
  std::map<RequestId, std::pair<TxnReply, uint64_t>>
      txn_first_answer_;  // → (answer, starts)  // push request id → the node's first answer
  std::map<uint64_t, Attempt> attempts_;
  std::vector<Answered> answered_;
  std::map<std::pair<uint64_t, uint64_t>, Uuid> offset_owner_;      // (pid, offset) → message id
  std::map<std::pair<std::string, std::string>, uint64_t> pid_of_;  // (queue, partition) → pid
  std::map<GpKey, GroupPartition> gps_;
  std::set<std::tuple<std::string, uint64_t, uint64_t>> dlq_replayed_;  // (group, pid, offset)
  std::map<ReplyHandle, PopInfo> pops_;  // outstanding
  std::map<std::string, GroupPops> group_pops_;
  std::map<ReplyHandle, AckInfo> acks_;
  std::map<std::string, ConfigureCmd> configured_;
  std::optional<Snapshot> snapshot_;
  uint64_t timers_stored_ = 0;  // fired timer messages in the last recovered store
  uint64_t starts_ = 0;         // node starts seen (the first included)
  uint64_t pushes_answered_ = 0;
  uint64_t pops_answered_ = 0;
  uint64_t acks_answered_ = 0;
  int reference_ = 0;
};

}  // namespace queen::sim
