// Refusals the edge decides before a request reaches the node: admission permits sized by a
// request's Content-Length (the seed's Push step 1), and the disk gate that refuses writes
// which grow storage while the data folder's filesystem is nearly full.
//
// Contract:
// - Admission: a request takes min(bytes, budget) bytes of the budget before its body is
//   read and gives them back once its answer is sent (or its connection dies). A budget of 0
//   turns admission off: every acquire is granted at once.
// - Fair share: every permit names its source: a client address of this node (client_source)
//   or the peer a request was forwarded from. While requests wait, room that frees up goes to
//   the waiting source holding the fewest bytes (ties: the lowest source), first come first
//   served within a source. So under contention each source converges to an equal share of
//   the budget, and a follower forwarding a flood cannot starve the leader's own clients (or
//   another follower's). A waiter that gives up (its hold elapsed) takes nothing.
// - A client address holds at most half the budget (client_share_max): one address, however
//   slowly it sends its bodies, leaves the other half to everyone else. A request of a
//   source at its cap waits without blocking other sources' requests.
// - DiskGate: full() turns on when the measured use is at or above high_pct and off again
//   only once it is below low_pct. The measurement is statvfs of the data folder plus what
//   admission let in and is not yet answered (about to be written), so the gate closes before
//   a burst carries the disk past high_pct; or, when a test names a file, the integer
//   percentage written in that file.
// - Both are safe to call from any edge thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "core/api/replies.h"
#include "server/edge_counters.h"

namespace queen::server {

// Who a permit is held for: a forwarding peer's node id, or (kClientSourceBit set) a client
// address of this node; 0 for a client whose address is unknown.
using AdmitSource = uint64_t;
constexpr AdmitSource kLocalClients = 0;
constexpr AdmitSource kClientSourceBit = 1ull << 63;

// The source of a client connecting from `address` (its text form).
AdmitSource client_source(std::string_view address);

struct AdmitPermit {
  uint64_t bytes = 0;
  AdmitSource source = kLocalClients;
};

class Admission {
 public:
  using Granted = std::function<void()>;

  // `published`, when given, is kept up to date with in_use() and waiting() (the gauges of
  // /metrics/prometheus).
  explicit Admission(uint64_t budget_bytes, EdgeCounters* published = nullptr)
      : budget_(budget_bytes), published_(published) {}

  bool enabled() const { return budget_ > 0; }
  // The permit a request of `bytes` from `source` takes: at most what the source may hold.
  AdmitPermit permit_for(uint64_t bytes, AdmitSource source = kLocalClients) const {
    uint64_t cap = cap_of(source);
    return AdmitPermit{bytes < cap ? bytes : cap, source};
  }
  // What one source may hold at once: half the budget for a client address, else all of it.
  uint64_t cap_of(AdmitSource source) const {
    return (source & kClientSourceBit) != 0 ? client_share_max() : budget_;
  }
  uint64_t client_share_max() const { return budget_ > 1 ? budget_ / 2 : budget_; }
  // Takes the permit now (nullopt) or queues the request and returns its ticket; `granted`
  // then runs, on the thread that released room, once the bytes are taken.
  std::optional<uint64_t> acquire(AdmitPermit permit, Granted granted);
  // The queued request gives up: true when it was still queued (so nothing was taken).
  bool withdraw(uint64_t ticket);
  void release(AdmitPermit permit);

  uint64_t in_use() const;
  uint64_t in_use_by(AdmitSource source) const;
  size_t waiting() const;

 private:
  struct Waiter {
    uint64_t ticket;
    uint64_t bytes;
    Granted granted;
  };
  struct Holder {
    uint64_t in_use = 0;
    std::deque<Waiter> waiters;  // arrival order
  };

  // The next waiter to grant (its bytes taken), or nullopt: the head of the waiting source
  // holding the fewest bytes among those whose head fits the source's cap, if it fits.
  std::optional<Granted> grant_next_locked();
  // Whether the source's next waiter could be granted were there room (it is under its cap).
  bool eligible_locked(AdmitSource source, const Holder& h) const {
    return !h.waiters.empty() && h.in_use + h.waiters.front().bytes <= cap_of(source);
  }
  void forget_if_idle_locked(std::map<AdmitSource, Holder>::iterator it);
  void publish_locked() const;

  const uint64_t budget_;
  EdgeCounters* const published_;
  mutable std::mutex mutex_;
  uint64_t in_use_ = 0;
  size_t waiting_ = 0;
  uint64_t next_ticket_ = 1;
  std::map<AdmitSource, Holder> holders_;  // sources holding bytes or waiting
};

struct DiskGateOptions {
  std::string data_dir;
  int high_pct = 85;          // QUEEN_RAFT_DISK_HIGH_PCT
  int low_pct = 80;           // QUEEN_RAFT_DISK_LOW_PCT
  std::string test_pct_file;  // QUEEN_TEST_DISK_PCT_FILE (tests only): read instead of statvfs
};

class DiskGate {
 public:
  explicit DiskGate(DiskGateOptions options) : options_(std::move(options)) {}

  // Measures once and updates full(); called every QUEEN_RAFT_DISK_CHECK_MS with the bytes
  // admitted and not yet answered, which count as used (they are about to be written).
  void check(uint64_t incoming_bytes = 0);
  bool full() const { return full_.load(std::memory_order_relaxed); }
  // The last measurement (percent used), -1 before the first or when it failed.
  int last_pct() const { return last_pct_.load(std::memory_order_relaxed); }

 private:
  std::optional<int> measure(uint64_t incoming_bytes) const;

  DiskGateOptions options_;
  std::atomic<bool> full_{false};
  std::atomic<int> last_pct_{-1};
};

// True for the commands the disk gate refuses: pushes, KV writes, timer schedules and
// transactions that push, write KV or schedule a timer (the writes that grow storage). Acks,
// deletes, pops and reads pass, also when sent as POST bodies (KV gets and checks, timer
// cancels, an ack-only transaction). Judged on the parsed command, never on the body again.
bool grows_storage(const Command& command);

}  // namespace queen::server
