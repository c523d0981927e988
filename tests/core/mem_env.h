// An in-memory Env for unit tests of the node: files in a map, time moved by the test,
// syncs and timers completed only when the test runs the node. Crash() drops everything
// appended since the last completed sync, as a power cut would.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <xxhash.h>

#include "core/node/node.h"
#include "core/qlog/log.h"
#include "core/state/store.h"
#include "io/carry_out.h"

namespace queen::testing {

class MemEnv : public Env {
 public:
  int64_t now = 1'700'000'000'000'000;  // µs
  uint64_t rng = 42;
  std::map<std::string, Bytes> files;
  std::map<std::string, size_t> synced;  // durable prefix of each file
  std::vector<std::pair<std::string, uint64_t>> pending_syncs;
  std::map<TimerId, int64_t> timers;
  std::map<ReplyHandle, Reply> replies;
  std::vector<std::string> logs;
  bool hold_syncs = false;
  bool fatal_called = false;
  Node* node = nullptr;

  int64_t now_us() override { return now; }
  uint64_t random_u64() override {
    rng += 0x9e3779b97f4a7c15ull;
    uint64_t z = rng;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  void set_timer(TimerId id, int64_t delay_ms) override { timers[id] = now + delay_ms * 1000; }
  void append(const std::string& f, Bytes data) override {
    auto& b = files[f];
    b.insert(b.end(), data.begin(), data.end());
  }
  void sync(const std::string& f, uint64_t token) override { pending_syncs.push_back({f, token}); }
  std::map<std::string, uint64_t> expected_bytes;  // of each file written whole, as guessed
  void write_whole_file(const std::string& f, const FileProducer& produce, uint64_t token,
                        uint64_t expected) override {
    expected_bytes[f] = expected;
    Env::write_whole_file(f, produce, token, expected);
  }
  uint64_t log_bytes_read = 0;    // of queue log files (qlog/), by read()
  uint64_t store_bytes_read = 0;  // of store checkpoints (store/), by read()
  uint64_t read_bytes_max = 0;  // the largest one read()
  Result<Bytes> read(const std::string& f, uint64_t pos, uint64_t len) override {
    auto it = files.find(f);
    if (it == files.end() || pos + len > it->second.size())
      return make_error(Errc::io, "read past the end of " + f);
    if (f.starts_with("qlog/")) log_bytes_read += len;
    if (f.starts_with("store/")) store_bytes_read += len;
    read_bytes_max = std::max(read_bytes_max, len);
    return Bytes(it->second.begin() + pos, it->second.begin() + pos + len);
  }
  Status truncate(const std::string& f, uint64_t size) override {
    files[f].resize(size);
    synced[f] = std::min<size_t>(synced[f], size);
    return ok_status();
  }
  Status remove(const std::string& f) override {
    synced.erase(f);
    if (files.erase(f) == 0) return make_error(Errc::not_found, "no file " + f);
    return ok_status();
  }
  Result<std::vector<FileInfo>> list_files() override {
    std::vector<FileInfo> out;
    for (const auto& [name, bytes] : files) out.push_back(FileInfo{name, bytes.size()});
    return out;
  }
  Status rename(const std::string& from, const std::string& to) override {
    auto it = files.find(from);
    if (it == files.end()) return make_error(Errc::not_found, "no file " + from);
    files[to] = std::move(it->second);
    files.erase(from);
    synced[to] = synced[from];
    synced.erase(from);
    return ok_status();
  }
  void reply(ReplyHandle h, Reply r) override { replies[h] = std::move(r); }
  std::vector<std::pair<uint64_t, Bytes>> outbox;  // messages to peers, delivered by the test
  void send(uint64_t to, Bytes m) override { outbox.emplace_back(to, std::move(m)); }
  // Commands a follower forwards (output::Forward), carried by the test.
  struct Forwarded {
    uint64_t to = 0;
    uint64_t id = 0;
    std::shared_ptr<const CommandEnvelope> command;
    int64_t remaining_ms = 0;
  };
  std::vector<Forwarded> forwarded;
  void forward(uint64_t to, uint64_t id, std::shared_ptr<const CommandEnvelope> command,
               int64_t remaining_ms) override {
    forwarded.push_back(Forwarded{to, id, std::move(command), remaining_ms});
  }
  void fatal(std::string_view) override { fatal_called = true; }
  void log(LogLevel, std::string_view m) override { logs.emplace_back(m); }
  // Payload sealing (core/seal/seal.h); unset, the Env's default (no key) answers.
  std::function<Result<std::string>(std::string_view)> seal_fn, open_fn;
  Result<std::string> seal_payload(std::string_view p) override {
    return seal_fn ? seal_fn(p) : Env::seal_payload(p);
  }
  Result<std::string> open_payload(std::string_view s) override {
    return open_fn ? open_fn(s) : Env::open_payload(s);
  }

  std::vector<FileInfo> list() const {
    std::vector<FileInfo> out;
    for (const auto& [n, b] : files) out.push_back(FileInfo{n, b.size()});
    return out;
  }

  // Carries out what `node` returned from an event (io/carry_out.h).
  void perform(Outputs out) { carry_out(*this, *node, std::move(out)); }

  // Completes syncs and fires due timers until the node is idle at the current time.
  void run() {
    for (int guard = 0; guard < 100000; ++guard) {
      if (!pending_syncs.empty() && !hold_syncs) {
        auto [f, token] = pending_syncs.front();
        pending_syncs.erase(pending_syncs.begin());
        synced[f] = files[f].size();
        perform(node->on_sync_done(token, true));
        continue;
      }
      auto due = timers.end();
      for (auto it = timers.begin(); it != timers.end(); ++it)
        if (it->second <= now && (due == timers.end() || it->second < due->second)) due = it;
      if (due == timers.end()) return;
      TimerId id = due->first;
      timers.erase(due);
      perform(node->on_timer(id));
    }
  }

  // Moves time forward in 1 ms steps, running the node at each.
  void advance_ms(int64_t ms) {
    for (int64_t i = 0; i < ms; ++i) {
      now += 1000;
      run();
    }
  }

  // Loses every byte not yet synced.
  void crash() {
    for (auto& [f, b] : files) b.resize(synced[f]);
    pending_syncs.clear();
    timers.clear();
  }
};

// How many log files each log holds on `env` (names parsed by parse_log_file_name).
inline std::map<LogId, size_t> log_files(const MemEnv& env) {
  std::map<LogId, size_t> out;
  for (const FileInfo& f : env.list()) {
    LogId log;
    uint32_t file_no = 0;
    if (parse_log_file_name(f.name, &log, &file_no)) ++out[log];
  }
  return out;
}

inline Hash128 hash_of(const std::string& s) {
  XXH128_hash_t h = XXH3_128bits(s.data(), s.size());
  return Hash128{h.low64, h.high64};
}

// A node on a MemEnv with helpers that speak in commands and replies.
class Harness {
 public:
  explicit Harness(NodeConfig cfg = {}) : cfg_(cfg) { restart(); }

  void restart() {
    node_.reset();
    env.timers.clear();
    node_ = std::make_unique<Node>(env, cfg_);
    env.node = node_.get();
    auto started = node_->start(env.list());
    QUEEN_ASSERT(started.ok(), "start failed");
    env.perform(std::move(started.value()));
    env.run();
  }

  Node& node() { return *node_; }
  NodeConfig& config() { return cfg_; }  // read again by the next restart()

  // `id`: the request id the command is logged under (nil: none, no outcome kept).
  ReplyHandle send(Command c, int64_t timeout_ms = 30000, RequestId id = {}) {
    ReplyHandle h = ++next_handle_;
    env.perform(
        node_->on_command(h, CommandEnvelope{id, env.now / 1000 + timeout_ms, std::move(c)}));
    return h;
  }

  std::optional<Reply> take(ReplyHandle h) {
    auto it = env.replies.find(h);
    if (it == env.replies.end()) return std::nullopt;
    Reply r = std::move(it->second);
    env.replies.erase(it);
    return r;
  }

  template <class T>
  T call(Command c) {
    ReplyHandle h = send(std::move(c));
    env.run();
    env.advance_ms(cfg_.checkpoint_ms + 1);
    return take_as<T>(h);
  }

  // The reply to `h`, which must have come and be a T.
  template <class T>
  T take_as(ReplyHandle h) {
    auto r = take(h);
    QUEEN_ASSERT(r.has_value(), "no reply");
    auto* t = std::get_if<T>(&r->body);
    QUEEN_ASSERT(t != nullptr, "unexpected reply type");
    return *t;
  }

  PushCmd push_cmd(const std::string& queue, const std::string& partition,
                   const std::vector<std::string>& txns) {
    PushCmd c;
    for (const auto& t : txns) {
      PushItem it;
      it.queue = queue;
      it.partition = partition;
      it.transaction_id = t;
      it.txn_hash = hash_of(t);
      it.message_id = make_uuid_v7(env.now / 1000, env.random_u64(), env.random_u64());
      it.payload = "{\"t\":\"" + t + "\"}";
      c.items.push_back(std::move(it));
    }
    return c;
  }

  PushReply push(const std::string& queue, const std::string& partition,
                 const std::vector<std::string>& txns) {
    return call<PushReply>(push_cmd(queue, partition, txns));
  }

  // A pop of `group` from the start of `queue`, with the command's default batch.
  static PopCmd pop_cmd(const std::string& queue, const std::string& group) {
    PopCmd c;
    c.queue = queue;
    c.group = group;
    c.subscription_mode = SubscriptionMode::all;
    return c;
  }

  PopReply pop(const std::string& queue, const std::string& group, uint32_t batch,
               std::optional<std::string> partition = std::nullopt) {
    PopCmd c = pop_cmd(queue, group);
    c.batch = batch;
    c.partition = partition;
    return call<PopReply>(c);
  }

  AckResult ack(const PopMessage& m, const std::string& group, AckStatus status,
                std::optional<LeaseId> lease) {
    AckCmd c;
    c.items.push_back(AckItem{m.transaction_id, hash_of(m.transaction_id), m.partition_id, lease,
                              status, "boom", group});
    return call<AckReply>(c).results.at(0);
  }

  MemEnv env;

 private:
  NodeConfig cfg_;
  std::unique_ptr<Node> node_;
  ReplyHandle next_handle_ = 0;
};

// Configures queue `q` with `patch` (merged over its options).
inline void configure(Harness& h, const std::string& q, QueueOptionsPatch patch) {
  ConfigureCmd c;
  c.queue = q;
  c.patch = patch;
  h.call<ConfigureReply>(c);
}

inline std::vector<std::string> txns_of(const std::vector<PopMessage>& messages) {
  std::vector<std::string> out;
  for (const PopMessage& m : messages) out.push_back(m.transaction_id);
  return out;
}

}  // namespace queen::testing
