// The node's log files on a real disk, under one data folder. Owns a writer thread that runs
// append() and sync() in call order (one FIFO for all files), and a bounded cache of open file
// descriptors shared with the node thread's synchronous read(), truncate() and remove().
//
// Contract (see io/env.h):
// - append() and sync() return at once; they block only while the FIFO is full (backpressure
//   on the node thread, bounded by queue_ops_max and queue_bytes_max).
// - sync(file, token) reports `sync_done(token, ok)` from the writer thread after every append
//   to `file` queued before it has been written and fdatasync'd. A new file's directory
//   entries (up to the data folder) are fsync'd with its first sync. The writer takes what
//   is queued as one batch (up to kBatchOpsMax ops, kBatchBytesMax bytes): its appends in
//   order, then one fdatasync per file for all the syncs of that file in the batch. The
//   fdatasyncs of different files run side by side (the writer and kSyncHelpers helper
//   threads), so the file system can commit them together rather than one after another.
// - A failed write makes the syncs of that file in its batch and every later one report
//   ok=false: the caller must stop.
// - truncate() and remove() first wait for the FIFO to drain, so they apply after every
//   append queued before them.
// - write_whole() of a file expected larger than whole_in_place_bytes_max forks (a fork costs
//   the node its page tables' copy and a copy-on-write fault per page it writes next, more
//   than encoding a few MiB): the copy of the process closes every inherited descriptor past
//   stderr, encodes the file from memory as it was at the call, writing each piece into the
//   page cache as it comes (the file is never in its memory whole), and exits, so the node
//   pays copy-on-write faults only while it encodes. A waiter thread then writes the file
//   back a chunk at a time (the log's fdatasync never queues behind all of it), fdatasyncs
//   it and its folders and reports sync_done. The copy runs only the producer and system
//   calls (no locks of this process: only the forking thread lives on in it).
//   Without fork (a small file, the fork failed, or fork_whole_files is off) the producer
//   runs on the caller's thread and its bytes go through the FIFO in pieces of kPieceBytes
//   as they come (the first empties the file), so the writer writes while the rest is
//   produced; the pieces' buffers are kept for the next file.
// - File names are relative, '/'-separated and never contain "." or ".." segments.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/common/bytes.h"
#include "core/common/result.h"
#include "io/env.h"

namespace queen::real {

struct DiskOptions {
  std::string root;                                 // the data folder (QUEEN_RAFT_DIR)
  size_t open_files_max = 256;                      // descriptors kept open
  size_t queue_ops_max = 1u << 16;                  // appends and syncs waiting for the writer
  uint64_t queue_bytes_max = 256ull << 20;          // bytes of appends waiting for the writer
  bool fork_whole_files = true;                     // write_whole() of a large file forks
  uint64_t whole_in_place_bytes_max = 32ull << 20;  // smaller: write_whole() in place
};

class Disk {
 public:
  // Called on the writer thread or a sync helper; must not block for long (it posts to the
  // node thread).
  using SyncDone = std::function<void(uint64_t token, bool ok)>;

  Disk(DiskOptions options, SyncDone sync_done);
  ~Disk();
  Disk(const Disk&) = delete;
  Disk& operator=(const Disk&) = delete;

  // Creates the data folder and starts the writer thread.
  Status open();
  // Every regular file under the data folder (relative names, sorted), with its size.
  Result<std::vector<FileInfo>> list_files() const;

  void append(const std::string& file, Bytes data);
  void sync(const std::string& file, uint64_t token);
  // A new file with the bytes `produce` returns, durable when sync_done(token, ok) reports;
  // `expected_bytes` (a guess) chooses between the fork and the caller's thread.
  void write_whole(const std::string& file, const Env::FileProducer& produce, uint64_t token,
                   uint64_t expected_bytes = UINT64_MAX);
  Result<uint64_t> file_size(const std::string& file) const;
  Result<Bytes> read(const std::string& file, uint64_t pos, uint64_t len);
  Status read_into(const std::string& file, uint64_t pos, uint64_t len, Bytes* out);
  // Bytes read so far from store checkpoints (the start's progress: io/real/start_arena.h).
  uint64_t checkpoint_bytes_read() const {
    return checkpoint_bytes_read_.load(std::memory_order_relaxed);
  }
  Status truncate(const std::string& file, uint64_t size_bytes);
  Status remove(const std::string& file);
  // Moves `from` to `to` (replacing it, creating its folder); durable when it returns.
  Status rename(const std::string& from, const std::string& to);

  // Lets the writer finish what is queued, then joins it; a forked writer still running is
  // killed, and the file of one that did not finish is removed (it was never reported
  // durable). Idempotent.
  void stop();

 private:
  struct OpenFile;
  struct Forked;  // one forked writer and the thread that waits for it
  class PieceSink;
  struct Op {
    enum class Kind { append, sync } kind;
    std::string file;
    Bytes data;
    uint64_t token = 0;
    bool first_piece = false;  // of a whole file: empties the file before it is written
    bool spare = false;        // a whole file's piece: its buffer goes back to spare_pieces_
    std::chrono::steady_clock::time_point queued_at{};  // a sync's: its hand-off's start
  };

  void enqueue(Op op);
  // The writer takes at most this much of the FIFO at a time (its syncs wait for its appends).
  static constexpr size_t kBatchOpsMax = 1024;
  static constexpr uint64_t kBatchBytesMax = 8ull << 20;

  void writer_loop();
  void run_batch(std::vector<Op>& batch);
  // Syncs of distinct files, each with the tokens it reports.
  using Syncs = std::vector<std::pair<std::string, std::vector<uint64_t>>>;
  static constexpr size_t kSyncHelpers = 3;
  void run_syncs(const Syncs& syncs);
  void take_syncs();  // runs syncs of the current round until none is left to take
  void helper_loop();
  void run_append(const Op& op);
  void run_sync(const std::string& file, const std::vector<uint64_t>& tokens);
  void wait_idle();
  // nullptr with `errno_out` set when the file cannot be opened (or does not exist and
  // `create` is false).
  std::shared_ptr<OpenFile> handle(const std::string& file, bool create, int* errno_out);
  void forget(const std::string& file);
  bool sync_new_dirs(const std::string& file);
  std::string full_path(const std::string& file) const;

  DiskOptions options_;
  SyncDone sync_done_;

  std::mutex queue_mutex_;
  std::condition_variable queue_cv_;  // writer waits for work; producers wait for room / idle
  std::deque<Op> queue_;
  uint64_t queued_bytes_ = 0;
  bool busy_ = false;
  bool stopping_ = false;
  std::thread writer_;

  std::mutex sync_mutex_;
  std::condition_variable sync_cv_;  // helpers wait for a round; the writer for its end
  const Syncs* round_ = nullptr;     // the batch's syncs, while they run
  size_t round_next_ = 0;            // the first one no thread has taken
  size_t round_done_ = 0;
  bool helpers_stopping_ = false;
  std::vector<std::thread> helpers_;

  std::mutex files_mutex_;
  std::list<std::string> lru_;  // most recently used first
  std::unordered_map<std::string,
                     std::pair<std::shared_ptr<OpenFile>, std::list<std::string>::iterator>>
      open_;
  std::set<std::string> failed_;     // files with a failed write: every later sync fails
  std::set<std::string> new_files_;  // created, directory entries not yet fsync'd
  std::atomic<uint64_t> checkpoint_bytes_read_{0};

  bool fork_whole(const std::string& file, const Env::FileProducer& produce, uint64_t token);
  void reap_finished();

  // A whole file written in place goes to the FIFO in pieces of kPieceBytes as it is
  // produced. Their buffers are kept for the next file (at most kSparePiecesMax): fresh
  // memory costs a page fault per page.
  static constexpr size_t kPieceBytes = 1u << 20;
  static constexpr size_t kSparePiecesMax = 16;
  Bytes take_piece();
  void give_back(Bytes piece);
  std::mutex spare_mutex_;
  std::vector<Bytes> spare_pieces_;
  std::list<std::unique_ptr<Forked>> forked_;  // node thread only (and stop())
};

// True when `file` is a safe relative name inside the data folder.
bool valid_file_name(const std::string& file);

}  // namespace queen::real
