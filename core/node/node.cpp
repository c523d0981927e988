#include "core/node/node.h"

#include <algorithm>
#include <climits>
#include <deque>
#include <map>
#include <set>

#include <xxhash.h>

#include "core/consume/engine.h"
#include "core/kv/kv.h"
#include "core/kv/locks.h"
#include "core/kv/maintenance.h"
#include "core/node/hard_state.h"
#include "core/node/outcome.h"
#include "core/node/snapshot.h"
#include "core/node/store_reads.h"
#include "core/planner/planner.h"
#include "core/planner/retention.h"
#include "core/qlog/log.h"
#include "core/raft/raft.h"
#include "core/seal/seal.h"
#include "core/state/checkpoint.h"
#include "core/state/store.h"
#include "core/timers/timers.h"

namespace queen {
namespace {

constexpr TimerId kFlushTimer = 1;
constexpr TimerId kCheckpointTimer = 2;
constexpr TimerId kWakeTimer = 3;
constexpr TimerId kTimerTick = 4;
constexpr TimerId kSweepTimer = 5;
constexpr TimerId kRaftTick = 6;
constexpr TimerId kCommitPersistTimer = 7;
constexpr TimerId kStoreCheckpointTimer = 8;
constexpr TimerId kRetentionTimer = 9;
constexpr int64_t kClaimMarginMsMax = 250;
// A store checkpoint waits for the log to grow by its own size, but at most this many
// durable_every_ms intervals: a quiet node still checkpoints (and reclaims) now and then.
constexpr int64_t kCheckpointIdleFactor = 30;
// Deltas that weigh less than this in all never end their chain by their weight.
constexpr uint64_t kChainDeltasLightBytes = 1u << 20;
// Every checkpoint writes every row of the store's tables but the append rows (partitions,
// cursors, request outcomes...), one at a time: each costs about as much to encode as this
// many bytes of append rows, which go as runs of hashes.
constexpr uint64_t kTableRowEncodeBytes = 1024;
// A request outcome (a push's answer is a few runs of results) encodes in about a quarter of
// that: 44 ns named by id in a delta, 58 ns in full, against 233 ns per KiB of append rows.
constexpr uint64_t kOutcomeEncodeBytes = 256;
// A snapshot chunk unanswered for this many Raft ticks is sent again; after this many
// resends in a row the transfer is given up (Raft asks for a new one later).
constexpr uint64_t kSnapshotResendTicks = 10;
constexpr uint32_t kSnapshotResendsMax = 30;
constexpr uint64_t kSnapshotWindow = 4;  // data chunks sent and not yet answered

struct Parked {
  ReplyHandle handle = 0;
  Reply reply;
};

struct InFlight {
  Entry entry;
  WrittenEntry written;
  uint32_t syncs_left = 0;
};

// The answer recorded for a request id, so a retry under it gets the first outcome.
struct Outcome {
  uint64_t index = 0;  // the entry that carries it
  Reply reply;
  int64_t at_ms = 0;
};

struct LongPoll {
  ReplyHandle handle = 0;
  PopCmd cmd;
  int64_t stop_at_ms = 0;  // claims stop here: a margin before the caller's deadline
};

Reply error_reply(api::Errc code, std::string message, int retry_after_s = 0, uint64_t leader = 0) {
  return Reply{ErrorReply{code, std::move(message), retry_after_s, leader}};
}

uint64_t env_random(void* env) {
  return static_cast<Env*>(env)->random_u64();
}

// A running hash over the applied entries, so nodes can be compared entry by entry.
uint64_t chain_hash(uint64_t chain, const Entry& e) {
  Bytes b = encode_entry(e);
  return XXH3_64bits_withSeed(b.data(), b.size(), chain);
}

// The encoded entries Raft replicates, by index: the tail of the log kept in memory within a
// byte budget (entries already applied are dropped first). A follower that needs an entry
// below what it holds cannot be caught up from here.
class EntryCache final : public raft::LogView {
 public:
  explicit EntryCache(uint64_t bytes_max) : bytes_max_(bytes_max) {}

  // Rebuilds an entry below what the cache holds from the log files (an applied one).
  std::function<std::optional<raft::LogEntry>(uint64_t index)> fallback;

  void put(LogIndex index, Term term, Bytes data) {
    truncate_after(LogIndex(index.value - 1));
    bytes_ += data.size();
    entries_.emplace(index.value, raft::LogEntry{index, term, std::move(data)});
  }
  void truncate_after(LogIndex index) {
    for (auto it = entries_.upper_bound(index.value); it != entries_.end();) {
      bytes_ -= it->second.data.size();
      it = entries_.erase(it);
    }
  }
  void trim(uint64_t applied) {
    while (bytes_ > bytes_max_ && !entries_.empty() && entries_.begin()->first <= applied) {
      bytes_ -= entries_.begin()->second.data.size();
      entries_.erase(entries_.begin());
    }
  }
  std::vector<raft::LogEntry> entries(LogIndex from_exclusive, LogIndex to_inclusive,
                                      uint64_t bytes_max) const override {
    std::vector<raft::LogEntry> out;
    uint64_t bytes = 0;
    uint64_t want = from_exclusive.value + 1;
    // Older than the cache: read back from the log files, one batch at a time.
    while (fallback && want <= to_inclusive.value &&
           (entries_.empty() || want < entries_.begin()->first)) {
      auto e = fallback(want);
      if (!e) return out;
      if (!out.empty() && bytes + e->data.size() > bytes_max) return out;
      bytes += e->data.size();
      out.push_back(std::move(*e));
      ++want;
    }
    if (!out.empty() && want <= to_inclusive.value && entries_.begin()->first != want) return out;
    for (auto it = entries_.find(want); it != entries_.end() && it->first <= to_inclusive.value;
         ++it, ++want) {
      if (it->first != want) break;
      if (!out.empty() && bytes + it->second.data.size() > bytes_max) break;
      bytes += it->second.data.size();
      out.push_back(it->second);
    }
    return out;
  }

 private:
  uint64_t bytes_max_;
  uint64_t bytes_ = 0;
  std::map<uint64_t, raft::LogEntry> entries_;
};

// What a node of a cluster adds to a single node: Raft, the replicated tail, its hard state.
struct Cluster {
  explicit Cluster(uint64_t cache_bytes_max) : cache(cache_bytes_max) {}
  EntryCache cache;
  std::unique_ptr<raft::Raft> raft;
  uint64_t commit = 0;   // the commit index Raft reported
  uint64_t durable = 0;  // the own log is durable up to here
  uint64_t written = 0;  // and written up to here
  PersistedState persisted;
  bool hs_file_exists[2] = {false, false};
  std::set<uint64_t> hs_tokens;    // hard-state syncs in flight: messages wait for them
  std::deque<raft::Message> held;  // messages waiting for the hard state to be durable
  uint64_t lead_term = 0;          // the term this node leads in (0: not leading)
  uint64_t lead_index = 0;         // its first entry of that term
  bool writable = false;           // leads, and has applied an entry of its term
  int64_t consume_from_ms = INT64_MAX;
  bool persist_armed = false;
  bool persist_again = false;  // a hard-state write waits for the one in flight
};

}  // namespace

struct NodeImpl {
  NodeImpl(Env& e, NodeConfig c)
      : env(e),
        config(c),
        writer(e, c.segment_bytes, c.qlog_shards),
        planner(e, store),
        engine(e, store, config),
        kv(store),
        locks(kv),
        timers(store),
        reads(env, store) {}

  Env& env;
  NodeConfig config;
  Store store;
  LogWriter writer;
  Planner planner;
  Engine engine;
  KvPlanner kv;
  LockPlanner locks;
  TimerPlanner timers;
  StoreReads reads;
  NodeStats stats;
  TrafficCounters traffic;  // answers by kind, for /metrics/prometheus
  bool serving = false;
  bool stopped = false;

  OpenEntry open;
  std::deque<Entry> sealed;  // sealed, waiting for room in the pipeline
  std::map<uint64_t, InFlight> inflight;
  std::map<uint64_t, uint64_t> sync_tokens;  // token -> entry index
  uint64_t next_token = 1;
  uint64_t last_sealed = 0;
  uint64_t last_written = 0;
  uint64_t commit = 0;
  int64_t last_entry_now_us = 0;

  std::multimap<uint64_t, Parked> answers;  // sent once the entry at the key commits
  std::vector<Parked> checkpoint_waiters;   // sent after the next checkpoint commits
  std::set<ReplyHandle> cancelled;

  std::map<RequestId, Outcome> outcomes;
  std::deque<std::pair<int64_t, RequestId>> outcome_order;
  RequestId current_request;  // of the command being handled

  std::map<uint64_t, LongPoll> polls;
  std::map<std::string, std::set<uint64_t>> polls_by_queue;
  std::map<ReplyHandle, uint64_t> poll_of_handle;
  std::set<std::pair<int64_t, uint64_t>> poll_deadlines;
  uint64_t poll_seq = 0;

  std::unique_ptr<Cluster> cluster;  // null on a single node
  // Cluster: where entry i's records lie (at [i - 1]), to read it back for a follower.
  struct EntryRecords {
    RecordLocation record;
    std::vector<RecordLocation> messages;
  };
  std::vector<EntryRecords> entry_records;
  uint64_t applied_chain = 0;
  std::set<uint64_t> dead_tokens;  // syncs of entries a truncation removed

  // Store checkpoints: the durable ones the two newest need (their chains, oldest first;
  // more while a snapshot is being sent) and the write in flight. Log files below the older
  // of the two newest are reclaimed.
  struct CheckpointFile {
    LogIndex at;
    LogIndex base;  // a delta's base; 0 for a full checkpoint
    std::string file;
    uint64_t size_bytes = 0;
    std::vector<LogFileKey> refs;  // the log files its store points at (a snapshot ships them)
    uint64_t log_bytes = 0;        // the log's growth since the checkpoint before it
  };
  std::deque<CheckpointFile> checkpoints;
  uint64_t checkpoint_token = 0;  // 0: none in flight
  CheckpointFile checkpoint_writing;
  // (partition, base offset) of each append applied since the newest checkpoint was started:
  // the rows the next delta checkpoint writes in full. Recovery replays entries without
  // noting them, so the first checkpoint after a start is a full one.
  std::vector<std::pair<PartitionId, Offset>> appended_since_checkpoint;
  bool appends_noted = config.mutants.delta_after_recovery;
  // Snapshots (core/node/snapshot.h). Leader: the transfers under way, by follower.
  struct SnapshotSend {
    SnapshotManifest manifest;
    Bytes manifest_bytes;
    uint64_t chunks = 0;    // data chunks (chunk 0, the manifest, not counted)
    uint64_t acked = 0;     // the first chunk the follower has not answered
    uint64_t sent_end = 0;  // chunks below this were sent
    uint64_t rewound = 0;   // sent_end was last moved back to `acked` at this value of it
    uint64_t sent_tick = 0;
    uint32_t resends = 0;
  };
  std::map<uint64_t, SnapshotSend> snapshot_sends;
  uint64_t raft_ticks = 0;
  // Follower: the snapshot being received, staged under snap/.
  struct SnapshotRecv {
    uint64_t from = 0;
    SnapshotManifest manifest;
    uint64_t chunks = 0;
    uint64_t next_seq = 1;
    std::set<uint64_t> tokens;  // syncs in flight: the staged files, then the manifest
    bool deciding = false;      // the manifest is being written
    bool decided = false;       // it is durable: install once no sync is in flight
  };
  std::optional<SnapshotRecv> snapshot_recv;
  bool restart_requested = false;  // installed: the Node restarts in place
  uint64_t log_bytes_since_checkpoint = 0;
  uint64_t last_full_checkpoint_bytes = 0;
  uint64_t last_delta_bytes = 0;      // the newest delta's size, 0 before the first
  uint64_t last_delta_log_bytes = 0;  // and the log's growth it covered
  int64_t last_checkpoint_ms = 0;
  Term applied_term;
  bool require_next_entry = false;  // see load_store_checkpoint

  bool flush_armed = false;
  bool checkpoint_armed = false;
  bool timer_tick_armed = false;
  bool sweep_armed = false;
  bool retention_armed = false;
  RetentionScanner retention;
  int64_t wake_at_ms = INT64_MAX;

  // -------------------------------------------------------------- entries
  void request_flush() {
    if (flush_armed) return;
    flush_armed = true;
    env.set_timer(kFlushTimer, 0);
  }

  void seal() {
    if (open.empty()) return;
    take_checkpoint_into_open();
    Entry e = std::move(open.entry);
    e.term = cluster ? cluster->raft->term() : Term(1);
    e.now_us = stamp_now();
    last_sealed = e.index.value;
    sealed.push_back(std::move(e));
    open = OpenEntry{};
    open.entry.index = LogIndex(last_sealed + 1);
  }

  int64_t stamp_now() {
    int64_t now = std::max(env.now_us(), std::max(last_entry_now_us, store.last_now_us()) + 1);
    last_entry_now_us = now;
    return now;
  }

  // Writes the entry to every log it touches and syncs them; it applies once durable (and,
  // in a cluster, committed).
  void write_entry(Entry e) {
    uint64_t idx = e.index.value;
    last_entry_now_us = std::max(last_entry_now_us, e.now_us);
    InFlight f;
    f.written = writer.write(e);
    f.entry = std::move(e);
    for (LogId log : f.written.touched)
      f.syncs_left += writer.sync(log, [&] {
        sync_tokens[next_token] = idx;
        return next_token++;
      });
    last_written = idx;
    log_bytes_since_checkpoint += f.written.bytes;
    if (cluster) {
      cluster->written = idx;
      entry_records.resize(idx - 1);
      entry_records.push_back(EntryRecords{f.written.record, f.written.locations});
    }
    inflight.emplace(idx, std::move(f));
  }

  void write_sealed() {
    while (!sealed.empty() && inflight.size() < config.pipeline_max) {
      if (cluster && !propose(sealed.front())) return;
      Entry e = std::move(sealed.front());
      sealed.pop_front();
      write_entry(std::move(e));
    }
    if (config.mutants.answer_before_fsync) send_answers();
  }

  void on_flush() {
    flush_armed = false;
    if (!open.empty() && inflight.size() + sealed.size() < config.pipeline_max) seal();
    write_sealed();
  }

  void note_appends(const Entry& entry) {
    for (const Effect& e : entry.effects)
      if (const auto* a = std::get_if<EffAppend>(&e))
        appended_since_checkpoint.emplace_back(a->pid, a->base);
  }

  void commit_ready() {
    uint64_t limit = cluster ? cluster->commit : UINT64_MAX;
    while (!inflight.empty() && inflight.begin()->second.syncs_left == 0 &&
           inflight.begin()->first <= limit) {
      auto node = inflight.extract(inflight.begin());
      InFlight& f = node.mapped();
      if (auto st = store.apply(f.entry, f.written.locations); !st.ok())
        return halt(st.error().message);
      note_appends(f.entry);
      applied_term = f.entry.term;
      if (cluster && config.track_applied_chain) applied_chain = chain_hash(applied_chain, f.entry);
      planner.on_applied(f.entry);
      engine.on_applied(f.entry);
      kv.on_applied(f.entry);
      timers.on_applied(f.entry);
      commit = f.entry.index.value;
      ++stats.entries_committed;
    }
    if (cluster) cluster->cache.trim(commit);
    send_answers();
    write_sealed();
    if (!open.empty()) request_flush();
  }

  void send_answers() {
    uint64_t upto = config.mutants.answer_before_fsync ? last_written : commit;
    while (!answers.empty() && answers.begin()->first <= upto) {
      Parked p = std::move(answers.begin()->second);
      answers.erase(answers.begin());
      send(std::move(p));
    }
  }

  void send(Parked p) {
    if (cancelled.erase(p.handle)) {
      if (auto* pop = std::get_if<PopReply>(&p.reply.body)) engine.hand_back(*pop);
      return;
    }
    count_answer(p.reply);
    env.reply(p.handle, std::move(p.reply));
  }

  void park_at(uint64_t index, ReplyHandle h, Reply r) {
    answers.emplace(index, Parked{h, std::move(r)});
  }

  // Parks the answer of a planned command at the entry that carries it, or at the last
  // sealed entry when it planned nothing new (all duplicates, a no-op configure).
  void park_planned(ReplyHandle h, Reply r) {
    uint64_t index = open.empty() ? last_sealed : open.entry.index.value;
    record_outcome(index, r);
    park_at(index, h, std::move(r));
    if (open.empty()) {
      send_answers();
    } else {
      after_plan();
    }
  }

  // -------------------------------------------------------------- cluster (Raft)
  // Leader: hands a sealed entry to Raft, which appends it at the next index.
  bool propose(const Entry& e) {
    Cluster& c = *cluster;
    Bytes data = encode_replicated(e);
    c.cache.put(e.index, e.term, data);
    auto idx = c.raft->propose(std::move(data));
    if (!idx) {
      c.cache.truncate_after(LogIndex(e.index.value - 1));
      return false;
    }
    QUEEN_ASSERT(*idx == e.index, "the planner and Raft disagree on the next index");
    return true;
  }

  void process_ready() {
    Cluster& c = *cluster;
    for (;;) {
      raft::Ready rd = c.raft->take_ready();
      if (rd.empty()) break;
      if (rd.hard_state) persist_state();
      if (rd.truncate_after) truncate_log(rd.truncate_after->value);
      for (auto& e : rd.append) append_replicated(std::move(e));
      for (auto& m : rd.messages) send_message(std::move(m));
      if (rd.commit) {
        c.commit = rd.commit->value;
        commit_ready();
      }
      if (stopped) return;
      check_role();
    }
  }

  // Writes Raft's hard state and the applied index (known committed) to the next slot. One
  // write at a time: a second one waits, so a crash always leaves one durable slot.
  void persist_state() {
    Cluster& c = *cluster;
    if (!c.hs_tokens.empty()) {
      c.persist_again = true;
      return;
    }
    PersistedState& p = c.persisted;
    ++p.seq;
    p.term = c.raft->term();
    p.vote = c.raft->vote();
    p.commit = LogIndex(commit);
    std::string file = hard_state_file(p.seq);
    bool& exists = c.hs_file_exists[p.seq % 2];
    if (exists && !env.truncate(file, 0).ok()) return halt("cannot rewrite " + file);
    exists = true;
    env.append(file, encode_hard_state(p));
    c.hs_tokens.insert(next_token);
    env.sync(file, next_token++);
  }

  void on_state_synced(uint64_t token) {
    Cluster& c = *cluster;
    c.hs_tokens.erase(token);
    if (c.persist_again) {
      c.persist_again = false;
      persist_state();
      return;
    }
    while (!c.held.empty()) {
      env.send(c.held.front().to.value, raft::encode_message(c.held.front()));
      c.held.pop_front();
    }
  }

  void send_message(raft::Message m) {
    Cluster& c = *cluster;
    if (m.type == raft::MsgType::snapshot) return start_snapshot_send(m.to, m.index);
    if (!c.hs_tokens.empty() || !c.held.empty()) {
      c.held.push_back(std::move(m));
      return;
    }
    env.send(m.to.value, raft::encode_message(m));
  }

  // -------------------------------------------------------------- store checkpoints
  // Loads the newest valid checkpoint into the store (before the log is replayed after it).
  Status load_store_checkpoint(const std::vector<FileInfo>& files) {
    auto loaded = load_checkpoint(env, files);
    if (!loaded.ok()) return loaded.error();
    LoadedCheckpoint& l = loaded.value();
    // A damaged checkpoint newer than the one loaded was torn before it became durable (then
    // nothing was reclaimed past the loaded one) or damaged later (then the log must prove it
    // still holds the next entry): recovery refuses to start without it.
    LogIndex loaded_at = l.newest ? l.newest->store.applied() : LogIndex(0);
    for (const std::string& f : l.stale) {
      LogIndex at;
      if (parse_checkpoint_file(f, &at) && loaded_at < at) require_next_entry = true;
    }
    for (const std::string& f : l.stale)
      if (auto st = env.remove(f); !st.ok()) return st;
    if (!l.newest) return ok_status();
    store = std::move(l.newest->store);
    applied_term = l.newest->term;
    applied_chain = l.newest->applied_chain;
    for (const ChainFile& f : l.chain)
      checkpoints.push_back(CheckpointFile{f.at, f.base, f.file, f.size_bytes, {}});
    checkpoints.back().refs = file_refs_now();
    env.log(LogLevel::info,
            "store checkpoint loaded at entry " + std::to_string(store.applied().value));
    return ok_status();
  }

  std::vector<LogFileKey> file_refs_now() const {
    std::vector<LogFileKey> out;
    for (const auto& [file, n] : store.file_refs()) out.push_back(file);
    return out;
  }

  void arm_store_checkpoints() { env.set_timer(kStoreCheckpointTimer, config.durable_every_ms); }

  void maybe_write_checkpoint() {
    if (checkpoint_token != 0 || stopped) return;
    LogIndex at = store.applied();
    if (at.value == 0 || (!checkpoints.empty() && !(checkpoints.back().at < at))) return;
    // The log must have grown by the last full checkpoint's size (a delta is cheap to write,
    // but each checkpoint copies the process), or a long while have passed.
    bool grown = log_bytes_since_checkpoint >=
                 std::min(config.durable_every_bytes, last_full_checkpoint_bytes);
    int64_t now_ms = env.now_ms();
    if (!grown && now_ms < last_checkpoint_ms + config.durable_every_ms * kCheckpointIdleFactor)
      return;
    last_checkpoint_ms = now_ms;
    LogIndex base = delta_base();
    checkpoint_writing = CheckpointFile{
        at, base, checkpoint_file(at), 0, file_refs_now(), log_bytes_since_checkpoint};
    log_bytes_since_checkpoint = 0;
    checkpoint_token = next_token++;
    // The store is encoded from its state now, possibly in a copy of the process (io/env.h),
    // which also sorts the appends a delta writes.
    env.write_whole_file(
        checkpoint_writing.file,
        [this, term = applied_term, chain = applied_chain, base,
         appended = std::move(appended_since_checkpoint)](ByteSink& sink) {
          if (base.value == 0) return write_checkpoint(store, term, chain, sink);
          AppendsSince since = appends_since(appended);
          DeltaOf delta{base, &since};
          write_checkpoint(store, term, chain, sink, &delta);
        },
        checkpoint_token, expected_checkpoint_bytes(checkpoint_writing));
    appended_since_checkpoint.clear();
    appends_noted = true;
  }

  // A guess at the work of checkpoint `c` in bytes, so that io may write a small one in place
  // rather than in a copy of the process: a delta weighs as much as the newest delta did per
  // byte of log (at least as much), a full one as the chain before it (its rows are there)
  // and such a delta; each table row counts kTableRowEncodeBytes more and each request
  // outcome kOutcomeEncodeBytes (rows made since the newest delta are in neither).
  // UINT64_MAX when there is nothing to go by (no delta since the start).
  uint64_t expected_checkpoint_bytes(const CheckpointFile& c) const {
    if (last_delta_bytes == 0 || last_delta_log_bytes == 0) return UINT64_MAX;
    uint64_t since = last_delta_bytes;
    if (c.log_bytes > last_delta_log_bytes) {
      double per_log_byte = static_cast<double>(last_delta_bytes) / last_delta_log_bytes;
      since = static_cast<uint64_t>(std::min(per_log_byte * c.log_bytes, 1e18));
    }
    since += store.table_rows() * kTableRowEncodeBytes +
             store.request_outcomes().size() * kOutcomeEncodeBytes;
    if (c.base.value != 0) return since;
    if (checkpoints.empty()) return UINT64_MAX;
    size_t root = chain_start(checkpoints.size() - 1);
    return checkpoints[root].size_bytes + deltas_bytes(root) + since;
  }

  // The size of the deltas after the full checkpoint at `root`, up to the newest.
  uint64_t deltas_bytes(size_t root) const {
    uint64_t bytes = 0;
    for (size_t i = root + 1; i < checkpoints.size(); ++i) bytes += checkpoints[i].size_bytes;
    return bytes;
  }

  // The checkpoint the next one builds on, or 0 for a full one: a chain ends once its deltas
  // weigh half as much as its full checkpoint and more than kChainDeltasLightBytes (a restart
  // reads at most 1.5 times a full one, or 1 MiB more), or number config.checkpoint_deltas_max.
  LogIndex delta_base() const {
    if (!appends_noted || checkpoints.empty() || config.checkpoint_deltas_max == 0)
      return LogIndex(0);
    size_t root = chain_start(checkpoints.size() - 1);
    uint64_t deltas = checkpoints.size() - 1 - root, delta_bytes = deltas_bytes(root);
    uint64_t deltas_max = std::min<uint64_t>(config.checkpoint_deltas_max, kCheckpointChainMax);
    uint64_t full_bytes = checkpoints[root].size_bytes;
    bool heavy = delta_bytes > kChainDeltasLightBytes && delta_bytes * 2 >= full_bytes;
    bool ends = deltas >= deltas_max || heavy;
    return ends ? LogIndex(0) : checkpoints.back().at;
  }

  void on_checkpoint_synced(bool ok) {
    checkpoint_token = 0;
    if (!ok) return halt("fsync of store checkpoint " + checkpoint_writing.file + " failed");
    if (auto size = env.file_size(checkpoint_writing.file); size.ok())
      checkpoint_writing.size_bytes = size.value();
    if (checkpoint_writing.base.value == 0) {
      last_full_checkpoint_bytes = checkpoint_writing.size_bytes;
    } else {
      last_delta_bytes = checkpoint_writing.size_bytes;
      last_delta_log_bytes = checkpoint_writing.log_bytes;
    }
    checkpoints.push_back(std::move(checkpoint_writing));
    ++stats.store_checkpoints;
    // A snapshot being sent reads its checkpoints and log files: keep them until it is done.
    if (cluster && !snapshot_sends.empty()) return;
    if (checkpoints.size() < 2) return;
    // Keep the chains of the two newest: a restart falls back to the older if the newest is
    // damaged.
    LogIndex root = checkpoints[chain_start(checkpoints.size() - 2)].at;
    while (checkpoints.front().at < root) {
      if (!env.remove(checkpoints.front().file).ok())
        return halt("cannot remove store checkpoint " + checkpoints.front().file);
      checkpoints.pop_front();
    }
    reclaim_log_files(checkpoints[checkpoints.size() - 2].at);
  }

  // Where in `checkpoints` the chain of the one at `i` starts: its full checkpoint.
  size_t chain_start(size_t i) const {
    while (i > 0 && checkpoints[i].base.value != 0) --i;
    return i;
  }

  // Log files that hold nothing past `upto` and no payload the store (or the newest
  // checkpoint, which a snapshot ships) points at. A leader keeps what a follower it heard
  // from within QUEEN_RAFT_PURGE_HOLD_S still needs; one away longer gets a snapshot.
  void reclaim_log_files(LogIndex upto) {
    std::map<LogFileKey, uint64_t> refs = store.file_refs();
    for (const LogFileKey& f : checkpoints.back().refs) ++refs[f];
    if (cluster) upto = std::min(upto, cluster->raft->slowest_held_match());
    auto files = writer.reclaimable(upto.value, refs, config.reclaim_files_per_pass_max);
    for (const LogFileKey& f : files) {
      if (!writer.reclaim(f).ok())
        return halt("cannot remove log file " + log_file_name(f.first, f.second));
      ++stats.log_files_reclaimed;
    }
    if (cluster && !files.empty()) cluster->raft->compact(upto);
  }

  void halt(const std::string& why) {
    stopped = true;
    env.fatal(why);
  }

  // -------------------------------------------------------------- snapshots: leader
  void start_snapshot_send(NodeId to, LogIndex at_least) {
    snapshot_sends.erase(to.value);
    auto m = build_manifest();
    if (!m.ok() || m.value().index < at_least) {
      env.log(LogLevel::warn, "cannot send node " + std::to_string(to.value) + " a snapshot: " +
                                  (m.ok() ? "no checkpoint recent enough" : m.error().message));
      cluster->raft->snapshot_failed(to);
      return;
    }
    SnapshotSend s;
    s.manifest = std::move(m.value());
    s.manifest_bytes = encode_manifest(s.manifest);
    s.chunks = chunk_count(s.manifest, config.snapshot_chunk_bytes);
    env.log(LogLevel::info, "sending node " + std::to_string(to.value) + " a snapshot at entry " +
                                std::to_string(s.manifest.index.value) + " (" +
                                std::to_string(s.manifest.total_bytes()) + " bytes)");
    ++stats.snapshots_sent;
    send_window(to.value, snapshot_sends[to.value] = std::move(s));
  }

  // The newest checkpoint (its chain) and the log files its store points at, cut after its entry.
  Result<SnapshotManifest> build_manifest() {
    if (checkpoints.empty()) return make_error(Errc::unavailable, "no store checkpoint yet");
    const CheckpointFile& ck = checkpoints.back();
    auto term = cluster->raft->term_of(ck.at);
    auto listed = env.list_files();
    if (!term || !listed.ok()) return make_error(Errc::io, "cannot list the data folder");
    std::map<std::string, uint64_t> sizes;
    for (const FileInfo& f : listed.value()) sizes[f.name] = f.size_bytes;
    SnapshotManifest m;
    m.index = ck.at;
    m.term = *term;
    for (size_t i = chain_start(checkpoints.size() - 1); i < checkpoints.size(); ++i) {
      const CheckpointFile& c = checkpoints[i];  // its chain, full checkpoint first
      if (!sizes.contains(c.file)) return make_error(Errc::not_found, c.file + " is gone");
      m.files.push_back(FileInfo{c.file, sizes[c.file]});
    }
    for (const LogFileKey& k : ck.refs) {
      std::string name = log_file_name(k.first, k.second);
      auto it = sizes.find(name);
      if (it == sizes.end()) return make_error(Errc::not_found, name + " is gone");
      uint64_t cut = it->second;
      auto max_index = writer.max_index(k);
      if (!max_index || *max_index > ck.at.value) {  // it holds later entries too: cut there
        auto bytes = env.read(name, 0, it->second);
        if (!bytes.ok()) return bytes.error();
        cut = snapshot_cut(bytes.value(), ck.at);
      }
      if (cut > 0 && !config.mutants.snapshot_without_log_files)
        m.files.push_back(FileInfo{name, cut});
    }
    return m;
  }

  // Sends the chunks of the window not sent yet: the manifest alone until it is answered,
  // then up to kSnapshotWindow unanswered data chunks (go-back-N: a resend starts over from
  // the first unanswered one). False when the transfer had to be given up.
  bool send_window(uint64_t to, SnapshotSend& s) {
    uint64_t end = s.acked == 0 ? 1 : std::min(s.acked + kSnapshotWindow, s.chunks + 1);
    for (; s.sent_end < end; ++s.sent_end)
      if (!send_chunk(to, s, s.sent_end)) return false;
    return true;
  }

  bool send_chunk(uint64_t to, SnapshotSend& s, uint64_t seq) {
    Bytes payload;
    if (seq == 0) {
      payload = s.manifest_bytes;
    } else {
      uint64_t from = (seq - 1) * config.snapshot_chunk_bytes;
      for (const ChunkPart& p : chunk_parts(s.manifest, from, config.snapshot_chunk_bytes)) {
        auto b = env.read(s.manifest.files[p.file].name, p.pos, p.len);
        if (!b.ok() || b.value().size() != p.len) {
          abort_send(to, "cannot read it back");
          return false;
        }
        payload.insert(payload.end(), b.value().begin(), b.value().end());
      }
    }
    s.sent_tick = raft_ticks;
    send_transfer(raft::MsgType::snapshot_chunk, to, s.manifest.index, s.manifest.term,
                  encode_chunk(seq, payload));
    return true;
  }

  void abort_send(uint64_t to, const std::string& why) {
    env.log(LogLevel::warn, "snapshot to node " + std::to_string(to) + " given up: " + why);
    snapshot_sends.erase(to);
    cluster->raft->snapshot_failed(NodeId(to));
  }

  void on_snapshot_ack(uint64_t from, const raft::Message& m) {
    auto it = snapshot_sends.find(from);
    uint64_t next = 0;
    if (it == snapshot_sends.end() || m.index != it->second.manifest.index ||
        m.term != cluster->raft->term() || !decode_ack(m.data, &next))
      return;
    SnapshotSend& s = it->second;
    cluster->raft->snapshot_progress(NodeId(from));
    if (next > s.chunks) {
      env.log(LogLevel::info, "snapshot at entry " + std::to_string(s.manifest.index.value) +
                                  " delivered to node " + std::to_string(from));
      snapshot_sends.erase(it);
      return;
    }
    if (next == 0) {
      s.acked = s.sent_end = 0;  // the follower has nothing of it: from the manifest again
    } else if (next > s.acked) {
      s.acked = next;
      s.sent_end = std::max(s.sent_end, next);
    } else if (next == s.acked && s.rewound != s.acked && s.sent_end > s.acked + 1) {
      // The same chunk wanted again while later ones are out: they came out of order and the
      // follower dropped them. Send again from it, once per answered position.
      s.rewound = s.acked;
      s.sent_end = s.acked;
    } else {
      return;  // nothing new answered
    }
    s.resends = 0;
    send_window(from, s);
  }

  void tick_snapshots() {
    ++raft_ticks;
    std::vector<uint64_t> due;
    for (auto& [to, s] : snapshot_sends)
      if (raft_ticks - s.sent_tick >= kSnapshotResendTicks) due.push_back(to);
    for (uint64_t to : due) {
      SnapshotSend& s = snapshot_sends.at(to);
      if (++s.resends > kSnapshotResendsMax) {
        abort_send(to, "no answer");
      } else {
        s.sent_end = s.acked;
        send_window(to, s);
      }
    }
  }

  // -------------------------------------------------------------- snapshots: follower
  void answer_chunk(uint64_t to, const raft::Message& m, uint64_t next_seq) {
    send_transfer(raft::MsgType::snapshot_ack, to, m.index, m.log_term, encode_ack(next_seq));
  }

  // A message of a snapshot transfer (a chunk or its answer) for the snapshot at `index`.
  void send_transfer(raft::MsgType type, uint64_t to, LogIndex index, Term term, Bytes data) {
    raft::Message m;
    m.type = type;
    m.from = NodeId(config.node_id);
    m.to = NodeId(to);
    m.term = cluster->raft->term();
    m.index = index;
    m.log_term = term;
    m.data = std::move(data);
    send_message(std::move(m));
  }

  void on_snapshot_chunk(uint64_t from, const raft::Message& m) {
    Cluster& c = *cluster;
    uint64_t seq = 0;
    Bytes payload;
    if (m.term != c.raft->term() || c.raft->leader() != NodeId(from) ||
        !decode_chunk(m.data, &seq, &payload))
      return;
    if (c.commit >= m.index.value) return answer_chunk(from, m, UINT64_MAX);  // has it all
    auto& r = snapshot_recv;
    bool same =
        r && r->from == from && r->manifest.index == m.index && r->manifest.term == m.log_term;
    if (!same) {
      // Bound to install the one it has once all of it arrived (committed state all the same).
      if (r && r->next_seq > r->chunks) return;
      if (seq != 0) return answer_chunk(from, m, 0);
      auto manifest = decode_manifest(payload.data(), payload.size());
      if (!manifest.ok() || manifest.value().index != m.index) return;
      discard_staged();
      r = SnapshotRecv{};
      r->from = from;
      r->manifest = std::move(manifest.value());
      r->chunks = chunk_count(r->manifest, config.snapshot_chunk_bytes);
      env.log(LogLevel::info, "receiving a snapshot at entry " + std::to_string(m.index.value) +
                                  " from node " + std::to_string(from));
      return answer_chunk(from, m, 1);
    }
    if (seq != r->next_seq || seq == 0 || seq > r->chunks)
      return answer_chunk(from, m, r->next_seq);
    uint64_t at = (seq - 1) * config.snapshot_chunk_bytes;
    auto parts = chunk_parts(r->manifest, at, config.snapshot_chunk_bytes);
    uint64_t want = 0;
    for (const ChunkPart& p : parts) want += p.len;
    if (payload.size() != want) return;
    uint64_t done = 0;
    for (const ChunkPart& p : parts) {
      auto b = payload.begin() + static_cast<ptrdiff_t>(done);
      env.append(kSnapshotStaging + r->manifest.files[p.file].name,
                 Bytes(b, b + static_cast<ptrdiff_t>(p.len)));
      done += p.len;
    }
    if (++r->next_seq > r->chunks) sync_staged();
    answer_chunk(from, m, r->next_seq);
  }

  void sync_staged() {
    for (const FileInfo& f : snapshot_recv->manifest.files) {
      snapshot_recv->tokens.insert(next_token);
      env.sync(kSnapshotStaging + f.name, next_token++);
    }
  }

  // A staged snapshot that will not be installed: its files go, its syncs are ignored.
  void discard_staged() {
    if (!snapshot_recv) return;
    for (uint64_t t : snapshot_recv->tokens) dead_tokens.insert(t);
    for (const FileInfo& f : snapshot_recv->manifest.files)
      (void)env.remove(kSnapshotStaging + f.name);  // absent when nothing of it arrived
    snapshot_recv.reset();
  }

  // Staged files synced: the manifest decides the install; once it is durable, install.
  void on_staged_synced(uint64_t token, bool ok) {
    SnapshotRecv& r = *snapshot_recv;
    r.tokens.erase(token);
    if (!ok) return halt("fsync of a staged snapshot file failed");
    if (!r.tokens.empty()) return;
    if (r.deciding) {
      r.decided = true;
      return;
    }
    r.deciding = true;
    env.append(kSnapshotManifestFile, encode_manifest(r.manifest));
    r.tokens.insert(next_token);
    env.sync(kSnapshotManifestFile, next_token++);
  }

  // Installs a decided snapshot once no sync of the old log is in flight; the Node then
  // restarts in place from the files (start() finishes what this does not).
  void maybe_install() {
    if (!snapshot_recv || !snapshot_recv->decided || restart_requested) return;
    if (!sync_tokens.empty() || !dead_tokens.empty() || !cluster->hs_tokens.empty() ||
        checkpoint_token != 0)
      return;
    fail_answers_after(0, "this node is installing a snapshot");
    auto listed = env.list_files();
    if (!listed.ok()) return halt("cannot list the data folder: " + listed.error().message);
    if (auto st = finish_install(env, snapshot_recv->manifest, listed.value()); !st.ok())
      return halt("cannot install the snapshot: " + st.error().message);
    env.log(LogLevel::info,
            "installed a snapshot at entry " + std::to_string(snapshot_recv->manifest.index.value));
    ++stats.snapshots_installed;
    restart_requested = true;
  }

  // Follower (or a new leader's first entry): writes what Raft appended to the own log.
  void append_replicated(raft::LogEntry e) {
    Cluster& c = *cluster;
    if (e.index.value <= c.written) return;  // the leader's own, written when proposed
    Entry entry;
    if (e.data.empty()) {  // a new leader's first entry of its term: no effects
      entry.index = e.index;
      entry.term = e.term;
      entry.now_us = stamp_now();
      c.cache.put(e.index, e.term, encode_replicated(entry));
    } else {
      auto d = decode_replicated(e.data.data(), e.data.size());
      if (!d.ok() || d.value().index != e.index || d.value().term != e.term)
        return halt("entry " + std::to_string(e.index.value) + " from the leader is damaged");
      entry = std::move(d.value());
      c.cache.put(e.index, e.term, std::move(e.data));
    }
    write_entry(std::move(entry));
  }

  // Raft overwrites the uncommitted suffix after `keep`: cut it from every log and answer
  // what waited on it (it never took effect).
  void truncate_log(uint64_t keep) {
    Cluster& c = *cluster;
    c.cache.truncate_after(LogIndex(keep));
    std::map<LogId, LogStart> cut;
    for (auto it = inflight.upper_bound(keep); it != inflight.end(); it = inflight.erase(it)) {
      for (const LogStart& st : it->second.written.starts) cut.emplace(st.log, st);
    }
    for (auto it = sync_tokens.begin(); it != sync_tokens.end();) {
      if (it->second > keep) {
        dead_tokens.insert(it->first);
        it = sync_tokens.erase(it);
      } else {
        ++it;
      }
    }
    for (const auto& [log, st] : cut)
      if (!writer.truncate_to(st).ok())
        return halt("cannot truncate log " + std::to_string(log.value));
    fail_answers_after(keep, "the leader changed before this write committed; it did not land");
    c.written = std::min(c.written, keep);
    c.durable = std::min(c.durable, keep);
    last_written = std::min(last_written, keep);
  }

  uint64_t leader_id() const {
    auto l = cluster->raft->leader();
    return l ? l->value : 0;
  }

  Reply not_serving_reply() const {
    uint64_t leader = leader_id();
    if (leader == 0)
      return error_reply(api::Errc::no_leader, "no leader is known yet (an election is running)",
                         1);
    if (leader == config.node_id)
      return error_reply(api::Errc::not_leader, "the new leader is still settling", 1, leader);
    return error_reply(api::Errc::not_leader, "this node is not the leader", 1, leader);
  }

  // Answers not_leader (a retry) everything parked at an entry after `index`: never proposed, or
  // cut.
  void fail_answers_after(uint64_t index, const std::string& why) {
    for (auto it = answers.upper_bound(index); it != answers.end();) {
      Parked p{it->second.handle, error_reply(api::Errc::not_leader, why, 1, leader_id())};
      it = answers.erase(it);
      send(std::move(p));
    }
    std::erase_if(outcomes, [&](const auto& kv) { return kv.second.index > index; });
  }

  void check_role() {
    Cluster& c = *cluster;
    bool leading = c.raft->role() == raft::Role::leader;
    uint64_t term = c.raft->term().value;
    if (c.lead_term != 0 && (!leading || c.lead_term != term)) step_down();
    if (leading && c.lead_term == 0) {
      c.lead_term = term;
      c.lead_index = c.raft->last_index().value;
    }
    if (leading && !c.writable && commit >= c.lead_index) become_writable();
  }

  // An entry of this leader's term has applied: everything before it is applied too, so the
  // planner and the engine start from the committed store.
  void become_writable() {
    Cluster& c = *cluster;
    c.writable = true;
    planner.reset();
    kv.reset();
    timers.reset();
    engine.reset();
    engine.load(config.mutants.no_foreign_lease_grace ? 0 : config.max_clock_skew_ms * 1000);
    load_outcomes();
    open = OpenEntry{};
    last_sealed = last_written = c.raft->last_index().value;
    open.entry.index = LogIndex(last_sealed + 1);
    // Timers that fired while this node did not lead found nothing to do: arm them afresh.
    flush_armed = checkpoint_armed = timer_tick_armed = sweep_armed = retention_armed = false;
    wake_at_ms = INT64_MAX;
    c.consume_from_ms = env.now_ms() + config.checkpoint_ms + config.max_clock_skew_ms;
    env.log(LogLevel::info, "leading in term " + std::to_string(c.lead_term) + " from entry " +
                                std::to_string(c.lead_index));
  }

  void step_down() {
    Cluster& c = *cluster;
    env.log(LogLevel::info, "stopped leading in term " + std::to_string(c.lead_term));
    c.lead_term = 0;
    c.writable = false;
    c.consume_from_ms = INT64_MAX;
    snapshot_sends.clear();
    fail_answers_after(c.written, "the leader changed before this write was replicated");
    // A pop parked at a written entry may still commit under the next leader, but its lease
    // was timed by this one: answered late, it would hand out a lease already expired (and
    // perhaps already re-granted). The client pops again; a committed claim just expires.
    for (auto it = answers.begin(); it != answers.end();) {
      if (!std::holds_alternative<PopReply>(it->second.reply.body)) {
        ++it;
        continue;
      }
      send(Parked{it->second.handle, error_reply(api::Errc::not_leader, "the leader changed", 1)});
      it = answers.erase(it);
    }
    open = OpenEntry{};
    sealed.clear();
    for (auto& w : checkpoint_waiters) {
      bool pop = std::holds_alternative<PopReply>(w.reply.body);
      send(Parked{w.handle,
                  pop ? error_reply(api::Errc::not_leader, "the leader changed", 1, leader_id())
                      : error_reply(api::Errc::outcome_unknown,
                                    "the leader changed while this was being checkpointed", 1)});
    }
    checkpoint_waiters.clear();
    while (!polls.empty()) {
      ReplyHandle h = polls.begin()->second.handle;
      drop_poll(polls.begin()->first);
      send(Parked{h, error_reply(api::Errc::not_leader, "the leader changed", 1, leader_id())});
    }
    planner.reset();
    kv.reset();
    timers.reset();
    engine.reset();
  }

  bool consume_ok() {
    Cluster& c = *cluster;
    if (env.now_ms() < c.consume_from_ms) return false;
    uint64_t ticks = c.raft->ticks_since_quorum();
    return ticks != UINT64_MAX &&
           static_cast<int64_t>(ticks) * config.raft_heartbeat_ms < config.leader_lease_ms;
  }

  void persist_commit_later() {
    Cluster& c = *cluster;
    if (c.persist_armed) return;
    c.persist_armed = true;
    env.set_timer(kCommitPersistTimer, config.commit_persist_ms);
  }

  Status start_cluster(const std::vector<FileInfo>& files, RecoveryOptions opt) {
    cluster = std::make_unique<Cluster>(config.raft_cache_bytes_max);
    Cluster& c = *cluster;
    auto hs = load_hard_state(env, files);
    if (!hs.ok()) return hs.error();
    c.persisted = hs.value();
    for (const auto& f : files) {
      if (f.name == "raft/hs.0") c.hs_file_exists[0] = true;
      if (f.name == "raft/hs.1") c.hs_file_exists[1] = true;
    }
    raft::TermRuns runs;
    // A checkpoint holds only applied entries, and those were committed.
    opt.apply_upto = std::max(c.persisted.commit.value, store.applied().value);
    opt.keep_recent_max = config.raft_recovered_cached_max;
    // Entries the checkpoint holds stay in the log while a follower may need them: Raft sees
    // them from index 1 when none is missing. Otherwise (reclaimed, or the node came from a
    // snapshot) its log starts at the checkpoint, and only a snapshot reaches further back.
    LogIndex base = store.applied();
    Term base_term = applied_term;
    bool rebased = false;
    auto rebase = [&] {
      if (runs.last() >= base) return;
      runs.reset(base, base_term);
      entry_records.assign(base.value, EntryRecords{});
      rebased = true;
    };
    opt.on_below_store = [&](const Entry& e, const RecordLocation& at,
                             const std::vector<RecordLocation>& messages) {
      if (e.index != runs.last().next()) return;
      runs.append(e.index, e.term);
      entry_records.push_back(EntryRecords{at, messages});
    };
    opt.on_replayed = [&](const Entry& e, const RecordLocation& at,
                          const std::vector<RecordLocation>& messages) {
      rebase();
      runs.append(e.index, e.term);
      applied_term = e.term;
      if (config.track_applied_chain) applied_chain = chain_hash(applied_chain, e);
      entry_records.push_back(EntryRecords{at, messages});
    };
    std::vector<RecoveredEntry> recovered;
    RecoveryStats rs;
    auto st = recover(env, files, opt, &store, &writer, &rs, &recovered);
    if (!st.ok()) return st;
    rebase();
    stats.recovered_entries = rs.entries_replayed;
    stats.torn_tails_cut = rs.torn_tails_cut;
    for (auto& r : recovered) {
      auto loaded = load_frames(env, &r);
      if (!loaded.ok()) return loaded;
      if (!r.applied) {
        runs.append(r.entry.index, r.entry.term);
        entry_records.push_back(EntryRecords{r.record, r.locations});
      }
      c.cache.put(r.entry.index, r.entry.term, encode_replicated(r.entry));
      last_entry_now_us = std::max(last_entry_now_us, r.entry.now_us);
      if (r.applied) continue;
      InFlight f;
      f.written.locations = r.locations;
      f.written.starts = r.starts;
      f.entry = std::move(r.entry);
      inflight.emplace(f.entry.index.value, std::move(f));
    }
    commit = last_sealed = store.applied().value;
    c.written = c.durable = last_written = runs.last().value;
    c.commit = commit;
    raft::Config rc;
    rc.id = NodeId(config.node_id);
    for (uint64_t v : config.voters) rc.voters.push_back(NodeId(v));
    rc.election_ticks = static_cast<uint32_t>(std::max<int64_t>(
        2, config.raft_election_ms / std::max<int64_t>(1, config.raft_heartbeat_ms)));
    rc.inflight_max = config.raft_inflight_max;
    rc.log_hold_ticks = static_cast<uint64_t>(std::max<int64_t>(
        1, config.raft_purge_hold_ms / std::max<int64_t>(1, config.raft_heartbeat_ms)));
    rc.append_bytes_max = config.batch_bytes_max;
    rc.mutant_commit_without_majority = config.mutants.commit_without_majority;
    rc.mutant_vote_twice = config.mutants.vote_twice;
    c.raft =
        std::make_unique<raft::Raft>(rc, raft::HardState{c.persisted.term, c.persisted.vote},
                                     std::move(runs), c.cache, LogIndex(commit), env_random, &env);
    if (rebased) c.raft->compact(base);
    c.cache.fallback = [this](uint64_t index) -> std::optional<raft::LogEntry> {
      if (index <= cluster->raft->log_start().value || index > commit ||
          index > entry_records.size())
        return std::nullopt;
      const EntryRecords& at = entry_records[index - 1];
      auto data = read_replicated(env, at.record, at.messages);
      auto term = cluster->raft->term_of(LogIndex(index));
      if (!data.ok() || !term) return std::nullopt;
      ++stats.entries_read_back;
      return raft::LogEntry{LogIndex(index), *term, std::move(data.value())};
    };
    env.set_timer(kRaftTick, config.raft_heartbeat_ms);
    persist_commit_later();
    serving = true;
    return ok_status();
  }

  // -------------------------------------------------------------- request ids
  void expire_outcomes(int64_t now_ms) {
    while (!outcome_order.empty() &&
           (outcome_order.front().first + config.request_id_window_ms <= now_ms ||
            outcome_order.size() > config.request_outcomes_max)) {
      outcomes.erase(outcome_order.front().second);
      outcome_order.pop_front();
    }
  }

  void record_outcome(uint64_t index, const Reply& r) {
    if (current_request.is_nil() || !config.keep_request_outcomes) return;
    int64_t now_ms = env.now_ms();
    outcomes[current_request] = Outcome{index, r, now_ms};
    outcome_order.emplace_back(now_ms, current_request);
    // Logged with the entry that carries the command, so it outlives this process and this
    // node's leadership (a command that planned nothing new has no entry of its own).
    if (open.empty() || index != open.entry.index.value) return;
    std::string bytes = encode_outcome(r);
    if (bytes.empty()) return;
    int64_t keep_until_us = env.now_us() + config.request_id_window_ms * 1000;
    open.entry.effects.push_back(EffRequestOutcome{current_request, keep_until_us, bytes});
  }

  // The outcomes the store holds (committed) replace what memory had: after a restart, or
  // when this node starts to lead.
  void load_outcomes() {
    outcomes.clear();
    outcome_order.clear();
    std::vector<std::pair<int64_t, RequestId>> order;
    for (const auto& [id, stored] : store.request_outcomes()) {
      auto reply = decode_outcome(stored.reply);
      if (!reply) continue;
      int64_t at_ms = stored.keep_until_us / 1000 - config.request_id_window_ms;
      outcomes[RequestId{id}] = Outcome{stored.index, std::move(*reply), at_ms};
      order.emplace_back(at_ms, RequestId{id});
    }
    std::sort(order.begin(), order.end());
    outcome_order.assign(order.begin(), order.end());
  }

  // A retry under a request id already planned gets the first outcome, once it commits.
  bool answer_known(ReplyHandle h, const RequestId& id, const Command& retried) {
    if (id.is_nil()) return false;
    expire_outcomes(env.now_ms());
    auto it = outcomes.find(id);
    if (it == outcomes.end()) return false;
    Reply reply = it->second.reply;
    if (const auto* push = std::get_if<PushCmd>(&retried)) fill_outcome_names(*push, &reply);
    park_at(it->second.index, h, std::move(reply));
    send_answers();
    return true;
  }

  void after_plan() {
    if (open.commands >= config.batch_cmds_max || open.bytes >= config.batch_bytes_max) {
      seal();
      write_sealed();
    } else {
      request_flush();
    }
  }

  // -------------------------------------------------------------- checkpoints
  // The consumption engine's changed rows go into the open entry, and the pops and acks
  // waiting for them are answered once it commits; true when there were rows.
  bool take_checkpoint_into_open() {
    auto effects = engine.take_checkpoint();
    uint64_t needs = open.empty() ? last_sealed : open.entry.index.value;
    if (!effects.empty()) {
      needs = open.entry.index.value;
      for (auto& e : effects) open.entry.effects.push_back(std::move(e));
      ++open.commands;
      ++stats.checkpoints;
    }
    for (auto& w : checkpoint_waiters) answers.emplace(needs, std::move(w));
    checkpoint_waiters.clear();
    return !effects.empty();
  }

  // The timer's checkpoint, for rows no entry sealed since took along (seal() takes them:
  // under load they ride the next entry instead of waiting for the timer).
  void on_checkpoint() {
    checkpoint_armed = false;
    if (take_checkpoint_into_open()) after_plan();
    send_answers();
  }

  void answer_after_checkpoint(ReplyHandle h, Reply r) {
    if (config.consume_fast) {
      send(Parked{h, std::move(r)});
      return;
    }
    checkpoint_waiters.push_back(Parked{h, std::move(r)});
  }

  // -------------------------------------------------------------- pops
  void handle_pop(ReplyHandle h, const CommandEnvelope& env_cmd, const PopCmd& cmd) {
    int64_t now_ms = env.now_ms();
    auto r = engine.pop(cmd, env.now_us());
    if (r.outcome == Engine::PopOutcome::error) {
      send(Parked{h, Reply{r.error}});
      return;
    }
    if (r.outcome == Engine::PopOutcome::delivered) {
      answer_after_checkpoint(h, Reply{std::move(r.reply)});
      return;
    }
    int64_t left_ms = env_cmd.deadline_ms - now_ms;
    int64_t stop_at =
        env_cmd.deadline_ms - std::min(kClaimMarginMsMax, std::max<int64_t>(0, left_ms / 4));
    stop_at = std::min(stop_at, env_cmd.deadline_ms - config.pop_reply_margin_ms);
    if (!cmd.wait || now_ms >= stop_at || polls.size() >= config.long_poll_waiters_max) {
      send(Parked{h, Reply{std::move(r.reply)}});
      return;
    }
    uint64_t seq = ++poll_seq;
    polls[seq] = LongPoll{h, cmd, stop_at};
    polls_by_queue[cmd.queue].insert(seq);
    poll_of_handle[h] = seq;
    poll_deadlines.insert({stop_at, seq});
  }

  void drop_poll(uint64_t seq) {
    auto it = polls.find(seq);
    if (it == polls.end()) return;
    auto& set = polls_by_queue[it->second.cmd.queue];
    set.erase(seq);
    if (set.empty()) polls_by_queue.erase(it->second.cmd.queue);
    poll_of_handle.erase(it->second.handle);
    poll_deadlines.erase({it->second.stop_at_ms, seq});
    polls.erase(it);
  }

  void serve_polls(const std::string& queue) {
    auto qit = polls_by_queue.find(queue);
    if (qit == polls_by_queue.end()) return;
    std::vector<uint64_t> seqs(qit->second.begin(), qit->second.end());
    for (uint64_t seq : seqs) {
      LongPoll& lp = polls.at(seq);
      auto r = engine.pop(lp.cmd, env.now_us());
      if (r.outcome == Engine::PopOutcome::empty) continue;
      ReplyHandle h = lp.handle;
      drop_poll(seq);
      if (r.outcome == Engine::PopOutcome::error) {
        send(Parked{h, Reply{r.error}});
      } else {
        answer_after_checkpoint(h, Reply{std::move(r.reply)});
      }
    }
  }

  void expire_polls(int64_t now_ms) {
    while (!poll_deadlines.empty() && poll_deadlines.begin()->first <= now_ms) {
      uint64_t seq = poll_deadlines.begin()->second;
      LongPoll lp = polls.at(seq);
      drop_poll(seq);
      PopReply empty;
      empty.queue = lp.cmd.queue;
      empty.group = lp.cmd.group;
      empty.empty_reason = "timeout";
      send(Parked{lp.handle, Reply{std::move(empty)}});
    }
  }

  // -------------------------------------------------------------- after every event
  void after_event() {
    if (stopped || !serving) return;
    if (cluster) {
      process_ready();
      maybe_install();
      if (stopped || restart_requested || !cluster->writable) return;
    }
    int64_t now_us = env.now_us();
    engine.expire(now_us);
    if (!cluster || consume_ok()) {
      for (QueueId q : engine.take_woken())
        if (const QueueState* qs = store.queue(q)) serve_polls(qs->name);
    }
    expire_polls(now_us / 1000);
    if ((engine.dirty() || !checkpoint_waiters.empty()) && !checkpoint_armed) {
      checkpoint_armed = true;
      env.set_timer(kCheckpointTimer, config.checkpoint_ms);
    }
    if (config.timer_tick_ms > 0 && !timer_tick_armed && !store.timers().empty()) {
      timer_tick_armed = true;
      env.set_timer(kTimerTick, config.timer_tick_ms);
    }
    if (!sweep_armed && !store.kv_expiries().empty()) {
      sweep_armed = true;
      env.set_timer(kSweepTimer, config.kv_sweep_ms);
    }
    if (!retention_armed && config.retention_interval_ms > 0) {
      retention_armed = true;
      env.set_timer(kRetentionTimer, config.retention_interval_ms);
    }
    int64_t wake = engine.next_expiry_us();
    wake = wake == INT64_MAX ? INT64_MAX : (wake + 999) / 1000;
    if (!poll_deadlines.empty()) wake = std::min(wake, poll_deadlines.begin()->first);
    if (wake != INT64_MAX && wake != wake_at_ms) {
      wake_at_ms = wake;
      env.set_timer(kWakeTimer, std::max<int64_t>(0, wake - now_us / 1000));
    }
  }

  // -------------------------------------------------------------- KV, locks, timers, txns
  void handle_kv(ReplyHandle h, const KvCmd& cmd) {
    KvScratch scratch;
    KvReply r = kv.run(cmd.ops, env.now_us(), &scratch);
    if (!r.ok || scratch.effects.empty()) {
      send(Parked{h, Reply{std::move(r)}});
      return;
    }
    kv.commit(std::move(scratch), &open);
    ++open.commands;
    park_planned(h, Reply{std::move(r)});
  }

  void handle_locks(ReplyHandle h, const LockCmd& cmd) {
    KvScratch scratch;
    LockReply r = locks.run(cmd, env.now_us(), &scratch);
    if (scratch.effects.empty()) {
      send(Parked{h, Reply{std::move(r)}});
      return;
    }
    kv.commit(std::move(scratch), &open);
    ++open.commands;
    park_planned(h, Reply{std::move(r)});
  }

  void handle_timers(ReplyHandle h, const TimerCmd& cmd) {
    std::vector<TimerOp> ops = cmd.ops;
    if (auto refused = planner.seal_timer_payloads(&ops)) return send(Parked{h, Reply{*refused}});
    TimerScratch scratch;
    TimerReply r = timers.run(ops, env.now_us(), &scratch);
    timers.commit(std::move(scratch), &open);
    ++open.commands;
    park_planned(h, Reply{std::move(r)});
  }

  void fire_timers() {
    timer_tick_armed = false;
    int64_t now_us = env.now_us();
    auto due = timers.take_due(now_us, open.entry.index.value);
    for (auto& [key, row] : due) {
      PushCmd push;
      push.items.push_back(PushItem{key.first, row.partition, row.txn, row.txn_hash, row.message_id,
                                    row.payload, "", looks_sealed(row.payload), ""});
      auto pushed = planner.plan_push(std::move(push.items), now_us, &open);
      if (pushed.refused) {
        fire_failed(key, std::move(row), pushed.refused->message, now_us);
        continue;
      }
      open.entry.effects.push_back(EffTimerDelete{key.first, key.second});
    }
    if (!due.empty()) after_plan();
  }

  // A fire refused (a clear payload for a queue encrypted since, and no key): the timer is
  // retried after a backoff; the last allowed failure dead-letters it under __timer__.
  void fire_failed(const TimerKey& key, TimerRow row, const std::string& error, int64_t now_us) {
    ++row.attempts;
    const QueueState* q = store.queue(key.first);
    if (row.attempts >= TimerPlanner::kFireAttemptsMax && q != nullptr) {
      open.entry.effects.push_back(EffTimerDlq{q->id, key.second, std::move(row), error});
      open.entry.effects.push_back(EffTimerDelete{key.first, key.second});
      return;
    }
    row.deliver_at_us = now_us + TimerPlanner::fire_backoff_ms(row.attempts) * 1000;
    open.entry.effects.push_back(EffTimerPut{key.first, key.second, std::move(row)});
  }

  void sweep_kv() {
    sweep_armed = false;
    auto effects = kv.sweep(env.now_us(), open.entry.index.value);
    if (effects.empty()) return;
    for (auto& e : effects) open.entry.effects.push_back(std::move(e));
    ++open.commands;
    after_plan();
  }

  void run_retention() {
    retention_armed = false;
    int64_t now_us = env.now_us();
    RetentionPass pass = retention.scan(store, now_us, config.retention_visit_max,
                                        config.partition_cleanup_after_s * 1'000'000);
    size_t before = open.entry.effects.size();
    // Idle in the store; the planner and the engine know what has not landed there yet.
    std::set<PartitionId> leased;
    if (!pass.idle.empty()) leased = engine.leased_partitions(now_us);
    for (PartitionId pid : pass.idle) {
      if (planner.appending(pid) || leased.contains(pid)) continue;
      planner.plan_delete_partition(*store.partition(pid), &open);
    }
    for (auto& e : pass.effects) open.entry.effects.push_back(std::move(e));
    int64_t traces_from_us = now_us - config.trace_retention_s * 1'000'000;
    if (config.trace_retention_s > 0 && !store.traces().empty() &&
        store.traces().front().created_us < traces_from_us)
      open.entry.effects.push_back(EffTraceTrim{traces_from_us});
    if (open.entry.effects.size() == before) return;
    ++open.commands;
    after_plan();
  }

  static TxnReply rollback(TxnReply r, std::string reason, std::string error) {
    r.success = false;
    r.reason = std::move(reason);
    r.error = std::move(error) + "; the transaction rolled back";
    r.results.clear();
    return r;
  }

  // Every item the transaction pushes, in order: one operation's own list when only one
  // operation pushes, else copied into `joined`.
  static const std::vector<PushItem>& pushed_items(const TxnCmd& cmd,
                                                   std::vector<PushItem>* joined) {
    const TxnOperation* only = nullptr;
    size_t pushing = 0;
    for (const auto& op : cmd.operations) {
      if (op.is_ack) continue;
      only = &op;
      ++pushing;
    }
    if (pushing == 1) return only->items;
    for (const auto& op : cmd.operations)
      if (!op.is_ack) joined->insert(joined->end(), op.items.begin(), op.items.end());
    return *joined;
  }

  // Checks every part of the call before changing anything, so a refusal leaves no trace;
  // then plans all of it into the open entry: one entry, all or nothing on disk. Takes the
  // pushed items out of `cmd` as it plans them.
  void handle_txn(ReplyHandle h, TxnCmd& cmd) {
    int64_t now_us = env.now_us();
    TxnReply reply;
    reply.transaction_id = cmd.transaction_id;
    TxnConsumePlan consume = engine.plan_txn(cmd, now_us);
    if (!consume.ok) return send(Parked{h, Reply{rollback(reply, consume.reason, consume.error)}});
    std::vector<PushItem> joined;  // only when more than one operation pushes
    const std::vector<PushItem>& items = pushed_items(cmd, &joined);
    if (auto dup = planner.find_duplicate(items, now_us)) {
      std::string e = "QDUP transactionId " + dup->transaction_id + " is already in partition " +
                      dup->partition + " at offset " + std::to_string(dup->offset.value);
      return send(Parked{h, Reply{rollback(reply, "duplicate", e)}});
    }
    std::vector<TimerOp> timer_ops = cmd.timers;
    if (auto refused = planner.seal_refusal(items)) return send(Parked{h, Reply{*refused}});
    if (auto refused = planner.seal_timer_payloads(&timer_ops))
      return send(Parked{h, Reply{*refused}});
    KvScratch kv_scratch;
    KvReply kvr = kv.run(cmd.kv, now_us, &kv_scratch);
    if (!kvr.ok) {
      TxnReply r = rollback(reply, "kv_precondition",
                            "QKV precondition " + kvr.kv_reason + " failed at kv[" +
                                std::to_string(kvr.failed_index) + "]");
      // In the flat index space of the results: every ack and pushed item, then the kv ops.
      r.failed_index = static_cast<uint32_t>(consume.acks.size() + items.size()) + kvr.failed_index;
      r.kv_reason = kvr.kv_reason;
      r.failed_row = kvr.failed_row;
      return send(Parked{h, Reply{std::move(r)}});
    }
    TimerScratch timer_scratch;
    TimerReply tr = timers.run(timer_ops, now_us, &timer_scratch);
    reply.success = true;
    uint32_t index = 0, ack_no = 0;
    for (uint32_t i = 0; i < cmd.operations.size(); ++i) {
      TxnResult res;
      res.op_index = i;
      if (cmd.operations[i].is_ack) {
        res.index = index++;
        res.type = TxnResultType::ack;
        res.ack = consume.acks.at(ack_no++);
        reply.results.push_back(std::move(res));
        continue;
      }
      // One result per pushed item, each with its own index.
      res.type = TxnResultType::push;
      auto pushed = planner.plan_push(std::move(cmd.operations[i].items), now_us, &open).results;
      for (auto& item : pushed) {
        TxnResult one = res;
        one.index = index++;
        one.pushes.push_back(std::move(item));
        reply.results.push_back(std::move(one));
      }
    }
    for (auto& k : kvr.results) {
      TxnResult res;
      res.index = index++;
      res.type = TxnResultType::kv;
      res.op_index = k.index;
      res.kv = std::move(k);
      reply.results.push_back(std::move(res));
    }
    for (auto& t : tr.results) {
      TxnResult res;
      res.index = index++;
      res.type = TxnResultType::timer;
      res.op_index = t.index;
      res.success = t.ok;
      res.timer = std::move(t);
      reply.results.push_back(std::move(res));
    }
    for (uint32_t i = 0; i < cmd.positions.size(); ++i) {
      TxnResult res;
      res.index = index++;
      res.type = TxnResultType::position;
      res.op_index = i;
      reply.results.push_back(std::move(res));
    }
    kv.commit(std::move(kv_scratch), &open);
    timers.commit(std::move(timer_scratch), &open);
    for (auto& e : engine.commit_txn(std::move(consume)))
      open.entry.effects.push_back(std::move(e));
    ++open.commands;
    park_planned(h, Reply{std::move(reply)});
  }

  // -------------------------------------------------------------- administration
  void handle_admin(ReplyHandle h, const Command& c) {
    int64_t now_us = env.now_us();
    if (auto* x = std::get_if<LeaseExtendCmd>(&c)) {
      LeaseExtendReply r = engine.extend(*x, now_us);
      if (r.success) return answer_after_checkpoint(h, Reply{std::move(r)});
      return send(Parked{h, Reply{std::move(r)}});
    }
    if (auto* x = std::get_if<GroupListCmd>(&c)) {
      if (!x->lagging_min_s) return send(Parked{h, Reply{engine.groups("", now_us)}});
      GroupsReply r = engine.groups("", now_us, /*details=*/true);
      for (GroupView& g : r.groups)
        std::erase_if(g.partitions, [&](const GroupPartitionView& p) {
          return p.offset_lag == 0 || p.time_lag_s <= *x->lagging_min_s;
        });
      r.lagging = true;
      return send(Parked{h, Reply{std::move(r)}});
    }
    if (auto* x = std::get_if<GroupDetailsCmd>(&c))
      return send(Parked{h, Reply{engine.groups(x->group, now_us)}});
    if (auto* x = std::get_if<GroupDeleteCmd>(&c))
      return answer_after_checkpoint(h, Reply{engine.delete_group(*x)});
    if (auto* x = std::get_if<SeekCmd>(&c)) {
      if (!store.queue(x->queue))
        return send(Parked{h, error_reply(api::Errc::queue_not_found, "no queue " + x->queue)});
      return answer_after_checkpoint(h, Reply{engine.seek(*x)});
    }
    if (auto* x = std::get_if<SubscriptionCmd>(&c))
      return answer_after_checkpoint(h, Reply{engine.update_subscription(*x)});
    if (auto* x = std::get_if<DlqReplayCmd>(&c)) return replay_dlq(h, *x);
    if (auto* x = std::get_if<QueueListCmd>(&c)) return send(Parked{h, Reply{queues(*x, "")}});
    if (auto* x = std::get_if<QueueGetCmd>(&c)) {
      QueuesReply r = queues(QueueListCmd{}, x->queue);
      if (r.queues.empty())
        return send(Parked{h, error_reply(api::Errc::queue_not_found, "no queue " + x->queue)});
      return send(Parked{h, Reply{std::move(r)}});
    }
    if (auto* x = std::get_if<QueueDeleteCmd>(&c)) {
      if (!planner.plan_delete_queue(x->queue, &open))  // nothing to delete: answered as such
        return send(Parked{h, Reply{GroupChangeReply{"", x->queue, 0, false}}});
      return park_planned(h, Reply{GroupChangeReply{"", x->queue, 0, true}});
    }
    if (auto* x = std::get_if<MessageGetCmd>(&c)) return send(Parked{h, Reply{reads.message(*x)}});
    if (auto* x = std::get_if<MessageBrowseCmd>(&c))
      return send(Parked{h, Reply{reads.browse(*x)}});
    if (auto* x = std::get_if<MessageDeleteCmd>(&c)) return delete_message(h, *x);
    if (auto* x = std::get_if<TraceRecordCmd>(&c)) return record_trace(h, *x);
    if (auto* x = std::get_if<TraceQueryCmd>(&c)) return send(Parked{h, Reply{traces(*x)}});
    if (auto* x = std::get_if<MaintenanceCmd>(&c)) return handle_maintenance(h, *x);
    if (auto* x = std::get_if<FetchCmd>(&c)) return send(Parked{h, Reply{reads.fetch(*x)}});
    if (auto* x = std::get_if<FetchOffsetsCmd>(&c))
      return send(Parked{h, Reply{reads.fetch_offsets(*x)}});
    if (auto* x = std::get_if<PartitionsChangedCmd>(&c))
      return send(Parked{h, Reply{reads.partitions_changed(*x)}});
  }

  // ---- maintenance ----

  MaintenanceReply maintenance_reply(const Maintenance& m) const {
    return MaintenanceReply{m.push, m.pop, m.push ? reads.created_since(m.push_since_us) : 0};
  }

  // A read answers the switches as applied; a switch is a KV write of their row.
  void handle_maintenance(ReplyHandle h, const MaintenanceCmd& cmd) {
    Maintenance m = maintenance_of(store);
    if (!cmd.enabled) return send(Parked{h, Reply{maintenance_reply(m)}});
    bool& flag = cmd.pop ? m.pop : m.push;
    if (flag == *cmd.enabled) return send(Parked{h, Reply{maintenance_reply(m)}});
    flag = *cmd.enabled;
    if (!cmd.pop) m.push_since_us = m.push ? env.now_us() : 0;
    KvOp put;
    put.op = KvOpKind::put;
    put.ns = kSystemNamespace;
    put.key = kMaintenanceKey;
    put.value = encode_maintenance(m);
    put.forever = true;
    KvScratch scratch;
    kv.run({put}, env.now_us(), &scratch);
    kv.commit(std::move(scratch), &open);
    ++open.commands;
    park_planned(h, Reply{maintenance_reply(m)});
  }

  // ---- traces ----

  void record_trace(ReplyHandle h, const TraceRecordCmd& cmd) {
    const PartitionState* p = store.partition(cmd.partition_id);
    if (!p || !live_message(*p, cmd.txn_hash))
      return send(Parked{h, error_reply(api::Errc::not_found, "Message not found")});
    open.entry.effects.push_back(EffTrace{cmd.trace_id, cmd.partition_id, cmd.transaction_id,
                                          cmd.event_type, cmd.data, cmd.group, cmd.worker_id,
                                          cmd.names});
    ++open.commands;
    TraceReply reply;
    reply.recorded = cmd.trace_id;
    park_planned(h, Reply{std::move(reply)});
  }

  static TraceView trace_view(const TraceRow& row) {
    const EffTrace& t = row.trace;
    return TraceView{t.id,        t.pid,   t.transaction_id, t.event_type, t.data, t.group,
                     t.worker_id, t.names, row.created_us,   {},           {},     {}};
  }

  // The trace's message: its queue and partition names and payload (empty when gone).
  void locate(TraceView* v) {
    const PartitionState* p = store.partition(v->partition_id);
    if (!p) return;
    v->partition = p->name;
    if (const QueueState* q = store.queue(p->queue)) v->queue = q->name;
    XXH128_hash_t hh = XXH3_128bits(v->transaction_id.data(), v->transaction_id.size());
    auto o = live_message(*p, Hash128{hh.low64, hh.high64});
    if (!o) return;
    auto msgs = read(p->id, *o, 1);
    if (msgs.ok() && !msgs.value().empty()) v->payload = std::move(msgs.value().front().payload);
  }

  TraceReply traces(const TraceQueryCmd& cmd) {
    TraceReply reply;
    reply.kind = cmd.kind;
    reply.limit = cmd.limit;
    reply.offset = cmd.offset;
    if (cmd.kind == TraceQueryKind::names) return trace_names(cmd, std::move(reply));
    for (const TraceRow& row : store.traces()) {
      const EffTrace& t = row.trace;
      bool match = cmd.kind == TraceQueryKind::message
                       ? t.pid == cmd.partition_id && t.transaction_id == cmd.transaction_id
                       : std::find(t.names.begin(), t.names.end(), cmd.name) != t.names.end();
      if (!match) continue;
      ++reply.total;
      if (cmd.kind == TraceQueryKind::by_name &&
          (reply.total <= cmd.offset || reply.traces.size() >= cmd.limit))
        continue;
      reply.traces.push_back(trace_view(row));
      if (cmd.kind == TraceQueryKind::by_name) locate(&reply.traces.back());
    }
    return reply;
  }

  TraceReply trace_names(const TraceQueryCmd& cmd, TraceReply reply) {
    std::map<std::string, TraceNameView> by_name;
    std::map<std::string, std::set<std::pair<uint64_t, std::string>>> messages;
    for (const TraceRow& row : store.traces()) {
      for (const std::string& n : row.trace.names) {
        TraceNameView& v = by_name[n];
        v.name = n;
        ++v.traces;
        v.last_seen_us = std::max(v.last_seen_us, row.created_us);
        messages[n].emplace(row.trace.pid.value, row.trace.transaction_id);
      }
    }
    reply.total = by_name.size();
    uint64_t i = 0;
    for (auto& [name, v] : by_name) {
      if (i++ < cmd.offset || reply.names.size() >= cmd.limit) continue;
      v.messages = messages[name].size();
      reply.names.push_back(std::move(v));
    }
    return reply;
  }

  // The first message of the partition with this transactionId that is not deleted.
  std::optional<Offset> live_message(const PartitionState& p, const Hash128& txn_hash) const {
    return reads.live_message(p, txn_hash);
  }

  // Whether a delete of this message is planned but not applied yet (a second one answers
  // "not found", as it will once the first applies). Deletes are rare: a scan will do.
  bool delete_planned(PartitionId pid, Offset o) const {
    auto in = [&](const Entry& e) {
      return std::any_of(e.effects.begin(), e.effects.end(), [&](const Effect& eff) {
        const auto* d = std::get_if<EffMessageDelete>(&eff);
        return d && d->pid == pid && d->offset == o;
      });
    };
    if (in(open.entry)) return true;
    for (const Entry& e : sealed)
      if (in(e)) return true;
    for (const auto& [index, f] : inflight)
      if (in(f.entry)) return true;
    return false;
  }

  void delete_message(ReplyHandle h, const MessageDeleteCmd& cmd) {
    MessageDeleteReply reply{false, cmd.partition_id, cmd.transaction_id};
    const PartitionState* p = store.partition(cmd.partition_id);
    std::optional<Offset> o = p ? live_message(*p, cmd.txn_hash) : std::nullopt;
    if (!o || delete_planned(p->id, *o)) return send(Parked{h, Reply{std::move(reply)}});
    open.entry.effects.push_back(EffMessageDelete{p->queue, p->id, *o});
    ++open.commands;
    reply.deleted = true;
    park_planned(h, Reply{std::move(reply)});
  }

  // Counts an answer leaving the node thread, by kind (TrafficCounters).
  void count_answer(const Reply& r) {
    TrafficCounters& t = traffic;
    if (const auto* e = std::get_if<ErrorReply>(&r.body)) {
      ++t.errors[e->code];
    } else if (const auto* push = std::get_if<PushReply>(&r.body)) {
      if (push->refused) {
        ++t.errors[push->refused->code];
        return;
      }
      ++t.push_requests;
      for (const PushResult& x : push->results) {
        if (x.status == PushStatus::queued) ++t.push_queued;
        if (x.status == PushStatus::duplicate) ++t.push_duplicates;
        if (x.status == PushStatus::error) ++t.push_failed;
      }
    } else if (const auto* pop = std::get_if<PopReply>(&r.body)) {
      ++(pop->messages.empty() ? t.pop_empty : t.pop_delivered);
      t.pop_messages += pop->messages.size();
    } else if (const auto* ack = std::get_if<AckReply>(&r.body)) {
      for (const AckResult& a : ack->results) ++(a.success ? t.ack_success : t.ack_failed);
    } else if (const auto* txn = std::get_if<TxnReply>(&r.body)) {
      ++(txn->success ? t.txn_committed : t.txn_rolled_back);
    } else if (const auto* del = std::get_if<MessageDeleteReply>(&r.body)) {
      t.messages_deleted += del->deleted ? 1 : 0;
    }
  }

  // Answered on any node (like /health): a follower reports its own view and no group lag.
  MetricsReply metrics(const Node::RaftView& v, int64_t now_us) {
    MetricsReply m;
    m.node_id = config.node_id;
    m.role = v.role;
    m.leader = v.leader;
    m.term = v.term;
    m.commit_index = v.commit;
    m.applied_index = v.applied;
    m.last_index = v.last_index;
    m.writable = v.writable;
    m.inflight_entries = inflight.size() + sealed.size();
    m.entries_committed = stats.entries_committed;
    m.syncs = stats.syncs;
    m.checkpoints = stats.checkpoints;
    m.lease_expiries = engine.stats().lease_expiries;
    m.redeliveries = engine.stats().redeliveries;
    m.dlq_moves = engine.stats().dlq_moves;
    m.entries_read_back = stats.entries_read_back;
    m.store_checkpoints = stats.store_checkpoints;
    m.log_files_reclaimed = stats.log_files_reclaimed;
    m.snapshots_sent = stats.snapshots_sent;
    m.snapshots_installed = stats.snapshots_installed;
    m.raft_messages_refused = stats.raft_messages_refused;
    m.recovered_entries = stats.recovered_entries;
    m.torn_tails_cut = stats.torn_tails_cut;
    const DedupStats& dedup = planner.dedup().stats();
    m.dedup_checks = dedup.checks;
    m.dedup_duplicates = dedup.duplicates;
    m.dedup_ring_candidates = dedup.candidates;
    m.dedup_cold_scans = dedup.exact_scans;
    m.dedup_ring_bytes = planner.dedup().ring_bytes();
    m.traffic = traffic;
    for (const QueueView& q : queues(QueueListCmd{}, "").queues) {
      QueueMetrics qm;
      qm.queue = q.name;
      qm.ns = q.options.ns;
      qm.task = q.options.task;
      qm.partitions = q.partition_count;
      qm.messages = q.messages;
      qm.depth = q.pending;
      qm.dlq = q.dlq;
      if (const QueueState* qs = store.queue(q.id))
        for (const auto& named : qs->partitions)
          qm.deleted += store.partition(named.second)->deleted.size();
      m.queues.push_back(std::move(qm));
    }
    std::sort(m.queues.begin(), m.queues.end(),
              [](const QueueMetrics& a, const QueueMetrics& b) { return a.queue < b.queue; });
    m.groups_known = v.writable;
    if (m.groups_known) {
      for (const GroupView& g : engine.groups("", now_us).groups)
        m.groups.push_back(GroupLagMetrics{g.queue, g.group, g.total_lag, g.max_time_lag_s,
                                           g.partitions_with_lag});
      std::sort(m.groups.begin(), m.groups.end(), [](const auto& a, const auto& b) {
        return a.queue != b.queue ? a.queue < b.queue : a.group < b.group;
      });
    }
    return m;
  }

  void replay_dlq(ReplyHandle h, const DlqReplayCmd& named) {
    DlqReplayReply reply;
    DlqReplayCmd cmd = named;
    if (cmd.dlq_id == 0 && !cmd.listed_id.is_nil())
      cmd.dlq_id = reads.dlq_id_of(cmd.listed_id).value_or(0);
    else if (cmd.dlq_id == 0)
      cmd.dlq_id = reads.dlq_id_at(cmd.partition_id, cmd.txn_hash).value_or(0);
    QueueId qid;
    const DlqEntry* d = store.dlq_entry(cmd.dlq_id, &qid);
    if (!d) {
      reply.error = named.dlq_id != 0 ? "no dead letter " + std::to_string(named.dlq_id)
                    : !named.listed_id.is_nil()
                        ? "no dead letter with id " + uuid_to_string(named.listed_id)
                        : "the message has no dead letter";
      return send(Parked{h, Reply{std::move(reply)}});
    }
    PushItem item;
    if (d->timer) {  // a dead timer's letter carries its message
      item.queue = store.queue(qid)->name;
      item.partition = d->timer->partition;
      item.payload = d->timer->payload;
      item.payload_sealed = looks_sealed(item.payload);
    } else {
      auto msgs = read(d->pid, d->offset, 1);
      if (!msgs.ok() || msgs.value().empty()) {
        reply.error = "the dead letter's message is gone";
        return send(Parked{h, Reply{std::move(reply)}});
      }
      item.queue = msgs.value().front().queue;
      item.partition = msgs.value().front().partition;
      item.payload = std::move(msgs.value().front().payload);
    }
    item.transaction_id = "dlq:" + std::to_string(cmd.dlq_id);
    XXH128_hash_t hh = XXH3_128bits(item.transaction_id.data(), item.transaction_id.size());
    item.txn_hash = Hash128{hh.low64, hh.high64};
    item.message_id = cmd.message_id;
    std::vector<PushItem> items;
    items.push_back(std::move(item));
    PushReply pushed = planner.plan_push(std::move(items), env.now_us(), &open);
    if (pushed.refused) return send(Parked{h, Reply{*pushed.refused}});  // the letter stays
    reply.push = pushed.results.at(0);
    open.entry.effects.push_back(EffDlqRemove{qid, cmd.dlq_id});
    reply.success = true;
    park_planned(h, Reply{std::move(reply)});
  }

  QueuesReply queues(const QueueListCmd& filter, const std::string& only) {
    QueuesReply reply;
    for (const auto& [id, q] : store.queues()) {
      if (!only.empty() && q.name != only) continue;
      if (!filter.ns.empty() && q.options.ns != filter.ns) continue;
      if (!filter.task.empty() && q.options.task != filter.task) continue;
      QueueView v;
      v.name = q.name;
      v.id = q.id;
      v.options = q.options;
      v.created_us = q.created_us;
      v.partition_count = static_cast<uint32_t>(q.partitions.size());
      for (const auto& [name, pid] : q.partitions) {
        PartitionStatsView ps = reads.partition_stats(*store.partition(pid));
        v.messages += ps.total;
        v.pending += ps.pending + ps.processing;
        v.processing += ps.processing;
        if (!only.empty()) v.partitions.push_back(std::move(ps));
      }
      if (auto it = store.dlq().find(id); it != store.dlq().end()) v.dlq = it->second.size();
      reply.queues.push_back(std::move(v));
    }
    return reply;
  }

  // -------------------------------------------------------------- reads
  Result<std::vector<PopMessage>> read(PartitionId pid, Offset from, uint32_t max) {
    return reads.read(pid, from, max);
  }
};

Node::Node(Env& env, NodeConfig config) : impl_(std::make_unique<NodeImpl>(env, config)) {}
Node::~Node() = default;

void sync_done(NodeImpl& n, uint64_t token, bool ok);
void timer_fired(NodeImpl& n, TimerId id);

// A follower installed a snapshot: it starts again from its files, as after a restart, with
// its counters and its sync tokens going on (completions of old syncs are not expected: it
// installs only once none is in flight).
void Node::restart_if_installed() {
  if (!impl_->restart_requested) return;
  Env& env = impl_->env;
  NodeConfig config = impl_->config;
  NodeStats stats = impl_->stats;
  uint64_t next_token = impl_->next_token;
  auto files = env.list_files();
  impl_ = std::make_unique<NodeImpl>(env, config);
  impl_->stats = stats;
  impl_->next_token = next_token;
  Status st = files.ok() ? start(files.value()) : Status(files.error());
  if (!st.ok()) {
    impl_->stopped = true;
    env.fatal("restart after installing a snapshot failed: " + st.error().message);
  }
}

Status Node::start(const std::vector<FileInfo>& found) {
  NodeImpl& n = *impl_;
  auto settled = settle_snapshot(n.env, found);
  if (!settled.ok()) return settled.error();
  const std::vector<FileInfo>& files = settled.value();
  RecoveryOptions opt;
  opt.replay_partial_entry = n.config.mutants.replay_partial_entry;
  if (auto st = n.load_store_checkpoint(files); !st.ok()) return st;
  opt.require_next_entry = n.require_next_entry;
  n.arm_store_checkpoints();
  if (n.config.voters.size() > 1) {
    auto st = n.start_cluster(files, opt);
    if (st.ok()) n.after_event();
    return st;
  }
  RecoveryStats rs;
  auto st = recover(n.env, files, opt, &n.store, &n.writer, &rs);
  if (!st.ok()) return st;
  n.stats.recovered_entries = rs.entries_replayed;
  n.stats.torn_tails_cut = rs.torn_tails_cut;
  n.commit = n.last_sealed = n.last_written = n.store.applied().value;
  if (n.commit > 0) n.applied_term = Term(1);
  n.open.entry.index = LogIndex(n.commit + 1);
  n.engine.load();
  n.load_outcomes();
  n.serving = true;
  n.after_event();
  return ok_status();
}

void Node::on_command(ReplyHandle h, CommandEnvelope c) {
  NodeImpl& n = *impl_;
  if (n.stopped || !n.serving) {
    n.send(Parked{h, error_reply(api::Errc::not_leader, "the node is not serving yet", 1)});
    return;
  }
  const CommandTraits traits = traits_of(c.command);
  if (n.cluster && !traits.any_node) {
    if (!n.cluster->writable) {
      n.send(Parked{h, n.not_serving_reply()});
      return;
    }
    if (traits.consumes && !n.consume_ok()) {
      n.send(Parked{h, error_reply(api::Errc::not_leader,
                                   "the leader does not hold its consumption lease yet", 1,
                                   n.config.node_id)});
      return;
    }
  }
  bool logged = traits.logged;
  if (logged && n.answer_known(h, c.request_id, c.command)) {
    n.after_event();
    return;
  }
  n.current_request = logged ? c.request_id : RequestId{};
  if (auto* push = std::get_if<PushCmd>(&c.command)) {
    PushReply r = n.planner.plan_push(std::move(push->items), n.env.now_us(), &n.open);
    if (maintenance_of(n.store).push) {  // stored, and held back from consumers for now
      for (PushResult& x : r.results)
        if (x.status == PushStatus::queued) x.status = PushStatus::buffered;
    }
    n.park_planned(h, Reply{std::move(r)});
  } else if (auto* cfg = std::get_if<ConfigureCmd>(&c.command)) {
    ConfigureReply r = n.planner.plan_configure(*cfg, &n.open);
    n.park_planned(h, Reply{std::move(r)});
  } else if (auto* pop = std::get_if<PopCmd>(&c.command)) {
    n.handle_pop(h, c, *pop);
  } else if (auto* ack = std::get_if<AckCmd>(&c.command)) {
    bool changed = false;
    AckReply r = n.engine.ack(std::move(*ack), n.env.now_us(), &changed);
    bool any_success = std::any_of(r.results.begin(), r.results.end(),
                                   [](const AckResult& a) { return a.success; });
    if (changed || any_success) {
      n.answer_after_checkpoint(h, Reply{std::move(r)});
    } else {
      n.send(Parked{h, Reply{std::move(r)}});
    }
  } else if (std::holds_alternative<HealthCmd>(c.command)) {
    Node::RaftView v = raft_view();
    HealthReply r{
        v.role,
        n.config.node_id,
        v.leader,
        v.leader != 0 && (!n.cluster || n.cluster->writable || v.leader != n.config.node_id),
        v.term,
        v.commit,
        v.applied,
        n.store.queues().size(),
        n.store.partitions().size()};
    n.env.reply(h, Reply{r});
  } else if (std::holds_alternative<MetricsCmd>(c.command)) {
    n.send(Parked{h, Reply{n.metrics(raft_view(), n.env.now_us())}});
  } else if (auto* dq = std::get_if<DlqQueryCmd>(&c.command)) {
    n.env.reply(h, Reply{n.reads.dlq(*dq)});
  } else if (auto* kv = std::get_if<KvCmd>(&c.command)) {
    n.handle_kv(h, *kv);
  } else if (auto* lk = std::get_if<LockCmd>(&c.command)) {
    n.handle_locks(h, *lk);
  } else if (auto* tm = std::get_if<TimerCmd>(&c.command)) {
    n.handle_timers(h, *tm);
  } else if (auto* tq = std::get_if<TimerQueryCmd>(&c.command)) {
    TimerQueryReply r = n.timers.query(*tq);
    for (TimerView& t : r.timers) t.payload = readable_payload(n.env, t.payload);
    n.env.reply(h, Reply{std::move(r)});
  } else if (auto* tx = std::get_if<TxnCmd>(&c.command)) {
    n.handle_txn(h, *tx);
  } else {
    n.handle_admin(h, c.command);
  }
  n.after_event();
}

void Node::on_timer(TimerId id) {
  timer_fired(*impl_, id);
  restart_if_installed();
}

void timer_fired(NodeImpl& n, TimerId id) {
  if (n.stopped || !n.serving) return;
  if (id == kStoreCheckpointTimer) {
    n.maybe_write_checkpoint();
    n.arm_store_checkpoints();
  }
  if (n.cluster) {
    if (id == kRaftTick) {
      n.cluster->raft->tick();
      n.tick_snapshots();
      n.env.set_timer(kRaftTick, n.config.raft_heartbeat_ms);
    }
    if (id == kCommitPersistTimer) {
      n.cluster->persist_armed = false;
      if (n.commit > n.cluster->persisted.commit.value) n.persist_state();
      n.persist_commit_later();
    }
    if (!n.cluster->writable) {
      n.after_event();
      return;
    }
  }
  if (id == kFlushTimer) n.on_flush();
  if (id == kCheckpointTimer) n.on_checkpoint();
  if (id == kWakeTimer) n.wake_at_ms = INT64_MAX;
  if (id == kTimerTick) n.fire_timers();
  if (id == kSweepTimer) n.sweep_kv();
  if (id == kRetentionTimer) n.run_retention();
  n.after_event();
}

void Node::on_sync_done(uint64_t token, bool ok) {
  sync_done(*impl_, token, ok);
  restart_if_installed();
}

void sync_done(NodeImpl& n, uint64_t token, bool ok) {
  if (n.stopped) return;
  if (n.cluster && n.cluster->hs_tokens.contains(token)) {
    if (!ok) return n.halt("fsync of the Raft state failed: stopping to recover");
    n.on_state_synced(token);
    n.after_event();
    return;
  }
  if (n.dead_tokens.erase(token)) {
    n.after_event();
    return;
  }
  if (n.snapshot_recv && n.snapshot_recv->tokens.contains(token)) {
    n.on_staged_synced(token, ok);
    n.after_event();
    return;
  }
  if (token == n.checkpoint_token) {
    n.on_checkpoint_synced(ok);
    n.after_event();
    return;
  }
  auto it = n.sync_tokens.find(token);
  QUEEN_ASSERT(it != n.sync_tokens.end(), "completion of an unknown sync");
  uint64_t idx = it->second;
  n.sync_tokens.erase(it);
  if (!ok) {
    n.stopped = true;
    n.env.fatal("fsync failed for entry " + std::to_string(idx) + ": stopping to recover");
    return;
  }
  ++n.stats.syncs;
  auto fit = n.inflight.find(idx);
  QUEEN_ASSERT(fit != n.inflight.end() && fit->second.syncs_left > 0, "sync of no entry");
  --fit->second.syncs_left;
  if (n.cluster) {
    Cluster& c = *n.cluster;
    uint64_t before = c.durable;
    for (auto d = n.inflight.find(c.durable + 1);
         d != n.inflight.end() && d->second.syncs_left == 0; d = n.inflight.find(c.durable + 1))
      ++c.durable;
    if (c.durable > before) c.raft->on_persisted(LogIndex(c.durable));
  }
  n.commit_ready();
  n.after_event();
}

void Node::on_message(uint64_t from, const Bytes& message) {
  NodeImpl& n = *impl_;
  if (n.stopped || !n.serving || !n.cluster) return;
  raft::Message m;
  const auto& voters = n.config.voters;
  bool member =
      from != n.config.node_id && std::find(voters.begin(), voters.end(), from) != voters.end();
  bool decoded = member && raft::decode_message(message.data(), message.size(), &m);
  bool bounded = decoded && (raft::within_bounds(m) || n.config.mutants.unbounded_terms);
  if (!bounded || m.from.value != from || m.to.value != n.config.node_id) {
    // Counted and logged once per power of two, so a flood cannot fill the log.
    uint64_t refused = ++n.stats.raft_messages_refused;
    if ((refused & (refused - 1)) == 0) {
      n.env.log(LogLevel::warn, "refused a peer message from node " + std::to_string(from) +
                                    (member ? " (malformed or out of bounds)" : " (not a member)") +
                                    "; " + std::to_string(refused) + " refused so far");
    }
    return;
  }
  if (m.type == raft::MsgType::snapshot_chunk) {
    n.on_snapshot_chunk(from, m);
  } else if (m.type == raft::MsgType::snapshot_ack) {
    n.on_snapshot_ack(from, m);
  } else if (m.type == raft::MsgType::append && n.snapshot_recv && n.snapshot_recv->deciding) {
    // Bound to install a snapshot, which replaces the log: nothing more is written to the
    // old one (an entry acknowledged now would be lost with it).
  } else if (m.type != raft::MsgType::snapshot) {
    n.cluster->raft->step(m);
  }
  n.after_event();
  restart_if_installed();
}

bool Node::hand_over() {
  NodeImpl& n = *impl_;
  if (!n.cluster || n.stopped || n.cluster->raft->role() != raft::Role::leader) return false;
  auto to = n.cluster->raft->most_caught_up();
  if (!to || !n.cluster->raft->transfer_leadership(*to)) return false;
  n.env.log(LogLevel::info, "handing leadership to node " + std::to_string(to->value));
  n.after_event();
  return true;
}

Node::RaftView Node::raft_view() const {
  const NodeImpl& n = *impl_;
  RaftView v;
  v.applied = n.store.applied().value;
  v.applied_chain = n.applied_chain;
  if (!n.cluster) {
    v.term = 1;
    v.leader = n.config.node_id;
    v.commit = n.commit;
    v.last_index = n.last_written;
    v.writable = n.serving && !n.stopped;
    return v;
  }
  const raft::Raft& r = *n.cluster->raft;
  static constexpr const char* kRoles[] = {"follower", "pre_candidate", "candidate", "leader"};
  v.role = kRoles[static_cast<int>(r.role())];
  v.term = r.term().value;
  v.leader = r.leader() ? r.leader()->value : 0;
  v.commit = std::max(r.commit().value, n.commit);
  v.last_index = r.last_index().value;
  v.writable = n.cluster->writable;
  return v;
}

void Node::on_cancel(ReplyHandle h) {
  NodeImpl& n = *impl_;
  if (auto it = n.poll_of_handle.find(h); it != n.poll_of_handle.end()) {
    n.drop_poll(it->second);
    return;
  }
  for (const auto& w : n.checkpoint_waiters)
    if (w.handle == h) n.cancelled.insert(h);
  for (const auto& [idx, p] : n.answers)
    if (p.handle == h) n.cancelled.insert(h);
}

const Store& Node::store() const {
  return impl_->store;
}

const NodeStats& Node::stats() const {
  NodeImpl& n = *impl_;
  n.stats.lease_expiries = n.engine.stats().lease_expiries;
  n.stats.redeliveries = n.engine.stats().redeliveries;
  n.stats.dlq_moves = n.engine.stats().dlq_moves;
  return n.stats;
}

bool Node::serving() const {
  return impl_->serving && !impl_->stopped;
}

Result<std::vector<PopMessage>> Node::read_messages(PartitionId pid, Offset from,
                                                    uint32_t max) const {
  return impl_->read(pid, from, max);
}

}  // namespace queen
