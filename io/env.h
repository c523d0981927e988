// The environment interface: the world a node lives in. io/real/ drives it over the system
// (threads, files, fdatasync, clocks) and io/sim/ over virtual time with seeded faults.
// The node itself only asks it what it reads: now_us(), random_u64(), read() of durable
// bytes, file_size(), the payload seal, log(), and at start (the start-up scan, also after
// a snapshot install) list_files(), truncate(), remove() and rename(). Everything it does
// (appends, syncs, whole files, removals, timers, messages, forwards, replies, a fatal stop)
// it returns from each event as a record (io/outputs.h) that the driver carries out through
// these same calls (io/carry_out.h). Completions come back to the node as events (see
// core/node/node.h).
//
// Contract:
// - Calls are made on the node's thread and return at once; none blocks on a device,
//   except read() of bytes that an earlier sync() made durable, and the start-up scan.
// - append() and sync() on one file take effect in call order. A sync(token) completes with
//   Node::on_sync_done(token, ok) only after every append() to that file issued before it is
//   durable; ok=false means the file's state is unknown and the node must stop.
// - Until a sync completes, appended bytes may be lost, torn or corrupted by a crash.
// - truncate(), remove() and rename() are durable when they return (recovery relies on a cut
//   staying cut: a record it removed must not come back after another crash). rename()
//   replaces `to` if it exists; only a file whose bytes are all durable may be renamed.
// - Timers are one-shot; setting a timer id again replaces its deadline.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/common/bytes.h"
#include "core/common/result.h"

namespace queen {

struct Reply;            // core/api/replies.h
struct CommandEnvelope;  // core/api/commands.h
struct Member;           // core/state/entry.h

using ReplyHandle = uint64_t;
using TimerId = uint32_t;

struct FileInfo {
  std::string name;  // relative to the node's data folder, '/'-separated
  uint64_t size_bytes = 0;
  bool operator==(const FileInfo&) const = default;
};

enum class LogLevel { debug, info, warn, error };

inline const char* log_level_name(LogLevel level) {
  switch (level) {
    case LogLevel::debug:
      return "debug";
    case LogLevel::info:
      return "info";
    case LogLevel::warn:
      return "warn";
    case LogLevel::error:
      return "error";
  }
  return "info";
}

class Env {
 public:
  virtual ~Env() = default;

  // Node-local wall clock (may be skewed and drift in the simulator).
  virtual int64_t now_us() = 0;
  int64_t now_ms() { return now_us() / 1000; }
  // A seeded random stream (the simulator's is reproducible).
  virtual uint64_t random_u64() = 0;
  // One-shot timer: Node::on_timer(id) after `delay_ms` (0 = after the events already queued).
  virtual void set_timer(TimerId id, int64_t delay_ms) = 0;

  // Disk: files named relative to the node's data folder; folders are implicit.
  virtual void append(const std::string& file, Bytes data) = 0;
  virtual void sync(const std::string& file, uint64_t token) = 0;
  virtual Result<Bytes> read(const std::string& file, uint64_t pos, uint64_t len) = 0;
  // read() into `out`, resized to `len`: a reader of many pieces (core/state/file_window.h)
  // reuses one buffer rather than taking fresh memory for each.
  virtual Status read_into(const std::string& file, uint64_t pos, uint64_t len, Bytes* out) {
    auto b = read(file, pos, len);
    if (!b.ok()) return b.error();
    *out = std::move(b.value());
    return ok_status();
  }
  virtual Status truncate(const std::string& file, uint64_t size_bytes) = 0;
  virtual Status remove(const std::string& file) = 0;
  virtual Status rename(const std::string& from, const std::string& to) = 0;
  // Every file of the data folder (the start-up scan; also used to restart in place).
  virtual Result<std::vector<FileInfo>> list_files() = 0;

  // A new file written whole: `produce` writes its bytes, from the node's state as it is at
  // this call, into the sink it is given (in pieces); then the file is made durable and
  // Node::on_sync_done(token, ok) reports it, as after append() and sync(). No append() may
  // go to the file. `produce` may run after the call returns, in a copy of the node's memory
  // taken at the call (io/real forks, so the node goes on while a large file is encoded and
  // written, and the file never sits in memory whole): it must only read, and must not
  // touch the Env. `expected_bytes` is the caller's guess of the file's size (UINT64_MAX:
  // unknown): io/real runs the producer at once for a small file, where copying the process
  // would cost more than encoding it. By default it runs at once and its bytes are appended
  // and synced.
  using FileProducer = std::function<void(ByteSink&)>;
  virtual void write_whole_file(const std::string& file, const FileProducer& produce,
                                uint64_t token, uint64_t expected_bytes) {
    (void)expected_bytes;
    Bytes bytes;
    BufferSink collect(&bytes);
    produce(collect);
    append(file, std::move(bytes));
    sync(file, token);
  }
  // A file's size; by default from list_files().
  virtual Result<uint64_t> file_size(const std::string& file) {
    auto files = list_files();
    if (!files.ok()) return files.error();
    for (const FileInfo& f : files.value()) {
      if (f.name == file) return f.size_bytes;
    }
    return make_error(Errc::not_found, "no file " + file);
  }

  // Peers: a message to another node of the cluster, delivered (or not: it may be lost,
  // duplicated, delayed or reordered) as Node::on_message there. A single node sends none.
  virtual void send(uint64_t to_node, Bytes message) {
    (void)to_node;
    (void)message;
  }

  // Forwarding (a follower, NodeConfig::forward_commands): `command` goes to node `to_node`,
  // whose environment admits it and hands it to that node as a client command, `forwarded`
  // set and its deadline `remaining_ms` after its arrival. The reply comes back as
  // Node::on_forward_reply(forward_id, reply), or with nullopt once the stream to that node
  // failed: at most once per forward id. The command is shared, not copied: it must not
  // change while forwarded.
  virtual void forward(uint64_t to_node, uint64_t forward_id,
                       std::shared_ptr<const CommandEnvelope> command, int64_t remaining_ms) {
    (void)to_node;
    (void)forward_id;
    (void)command;
    (void)remaining_ms;
  }

  // The cluster's membership in use changed (a configuration was written, cut or loaded at
  // start): from now on messages go to, and come from, these members (and where they are
  // reached). The node's own entry is among them unless it was removed.
  virtual void members_changed(const std::vector<Member>& members) { (void)members; }

  // Clients: the answer to the command that came with `handle`. Exactly one reply per handle.
  virtual void reply(ReplyHandle handle, Reply reply) = 0;

  // The node hit an unrecoverable condition (a failed fsync): it stops and recovers on restart.
  virtual void fatal(std::string_view reason) = 0;

  virtual void log(LogLevel level, std::string_view message) = 0;

  // Payloads of queues with encryptionEnabled (core/seal/seal.h). seal_payload turns a
  // payload's JSON text into a sealed envelope: JSON text that starts with
  // kSealedPayloadPrefix ({"encrypted":...}) and that only open_payload under the same key
  // turns back. open_payload fails on anything else: another shape, another key, a changed
  // byte. An environment without a key fails both, so a payload is never stored in the clear
  // by mistake (the default). The server's envelope is AES-256-GCM (io/real/payload_cipher.h).
  virtual Result<std::string> seal_payload(std::string_view plain) {
    (void)plain;
    return make_error(Errc::unavailable, "no encryption key configured (QUEEN_ENCRYPTION_KEY)");
  }
  virtual Result<std::string> open_payload(std::string_view sealed) {
    (void)sealed;
    return make_error(Errc::unavailable, "no encryption key configured (QUEEN_ENCRYPTION_KEY)");
  }
};

}  // namespace queen
