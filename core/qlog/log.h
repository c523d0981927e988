// The queue logs: by default one folder per queue (qlog/q<id>/), or with shared logs
// (QUEEN_QLOG_SHARDS=K) queue q in qlog/s<q % K>/; plus the system log qlog/q0/ for entries
// that touch no queue. Each is a run of rolling files r<8 digits>.qlog. The queue logs ARE
// the write-ahead log: a message is written once, in its queue's log.
//
// Writing an entry: each touched log gets the message records of its appends, then either
// the full entry record (the lowest-numbered touched log) or a stub naming the entry. One
// append call per touched log per entry; a sync per file written since the log's last sync.
// An entry is durable once every touched log's sync has completed. Shared logs bound the
// files an entry touching many queues writes and syncs to K + 1.
//
// Recovery (recover()): cut each log at its first damaged record (a torn tail), gather entry
// records, stubs and message records by index, and replay the gapless run of complete
// entries (every copy present, every message record present) from index 1. The first
// missing or incomplete entry and everything after it is cut from every log: that entry's
// syncs did not all land, so it was never answered. Recovery reads whatever logs the folder
// holds, so the layout may change between restarts: new entries go to the new layout's
// logs, and the old logs' files are reclaimed as the store stops pointing at them.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/qlog/record.h"
#include "core/state/entry.h"
#include "core/state/file_window.h"
#include "core/state/store.h"
#include "io/env.h"
#include "io/outputs.h"

namespace queen {

// QUEEN_QLOG_SHARDS: at most this many shared logs.
constexpr uint32_t kSharedLogsMax = 4096;
// The log `queue` writes to: its own (LogId = queue id), or with `shared_logs` > 0 the
// shared log queue % shared_logs (a LogId with kSharedLogBit set, core/state/store.h).
LogId log_of_queue(QueueId queue, uint32_t shared_logs);

std::string log_file_name(LogId log, uint32_t file_no);
bool parse_log_file_name(const std::string& name, LogId* log, uint32_t* file_no);

// Decodes the record at `pos` of `w` into `rec`: its header says how long it is (a short or
// impossible one is left to decode_record to refuse). Fails only when a read does.
Status next_record(FileWindow& w, uint64_t pos, Result<RecordView>* rec);

// Where a log stood before an entry was written to it: truncating there removes the entry.
struct LogStart {
  LogId log;
  uint32_t file_no = 1;
  uint64_t size_bytes = 0;
};

struct WrittenEntry {
  std::vector<LogId> touched;             // ascending
  std::vector<LogStart> starts;           // one per touched log
  RecordLocation record;                  // the full entry record (in the lowest log)
  std::vector<RecordLocation> locations;  // one per EffAppend, in effect order
  uint64_t bytes = 0;
};

class LogWriter {
 public:
  // `shared_logs`: 0, one log per queue; K, queues share K logs (log_of_queue).
  // Appends, syncs, cuts and removals go into `out` (io/outputs.h) for the caller to carry
  // out, in order, before the files are read or the next event comes.
  LogWriter(Outputs& out, uint64_t segment_bytes, uint32_t shared_logs = 0);
  // The active file of `log` after recovery.
  void restore(LogId log, uint32_t file_no, uint64_t size_bytes);
  WrittenEntry write(const Entry& entry);
  // Syncs every file of `log` written since its last sync; returns how many syncs it issued.
  uint32_t sync(LogId log, const std::function<uint64_t()>& next_token);
  // Cuts `start.log` back to where it stood (an uncommitted suffix Raft overwrote): later
  // files are removed, the start's file truncated (durable once carried out).
  void truncate_to(const LogStart& start);

  // Reclaim. The highest entry index a file holds records of (recovery and write() tell).
  void note_file(LogId log, uint32_t file_no, uint64_t max_index);
  // Files that hold no record of an entry past `upto`, that no append row points at (`refs`,
  // Store::file_refs) and that wait for no sync: at most `max` of them, oldest first. A log's
  // active file counts once it holds anything; reclaiming it starts the log's next file.
  std::vector<LogFileKey> reclaimable(uint64_t upto, const std::map<LogFileKey, uint64_t>& refs,
                                      size_t max) const;
  // Removes a reclaimable file (durable once carried out).
  void reclaim(const LogFileKey& file);
  size_t files_tracked() const { return file_max_index_.size(); }
  // The highest entry index `file` may hold a record of (never lower than the truth).
  std::optional<uint64_t> max_index(const LogFileKey& file) const {
    auto it = file_max_index_.find(file);
    if (it == file_max_index_.end()) return std::nullopt;
    return it->second;
  }

 private:
  struct LogState {
    uint32_t file_no = 1;
    uint64_t size_bytes = 0;
    std::vector<uint32_t> unsynced_files;
  };
  LogState& state_of(LogId log);
  Outputs& out_;
  uint64_t segment_bytes_;
  uint32_t shared_logs_;
  std::map<LogId, LogState> logs_;
  std::map<LogFileKey, uint64_t> file_max_index_;
};

// Reads an append's message record back (payloads included) and checks that it is the one
// the row describes.
Result<EffAppend> read_append(Env& env, const AppendRow& row, PartitionId pid);

struct RecoveryOptions {
  bool replay_partial_entry = false;  // mutant: replay an entry missing from a log
  // Fail unless the entry after the store's applied index is complete on disk (the store came
  // from an older checkpoint than the newest one written).
  bool require_next_entry = false;
  uint64_t progress_every_bytes = 64u << 20;
  // Leave unread the files whose every record is of an entry the store already holds (a
  // single node: nothing below the store is needed again). Not with on_below_store.
  bool skip_below_store = false;
  // Raft: entries past the persisted commit index are complete on disk but not known to be
  // committed; they are returned (RecoveredEntry, applied=false) instead of applied.
  uint64_t apply_upto = UINT64_MAX;
  size_t keep_recent_max = 0;  // also return this many of the last applied entries
  // Before replay: each complete entry at or below the store's applied index (a checkpoint
  // holds its effects), in index order, with where its records lie.
  std::function<void(const Entry&, const RecordLocation&, const std::vector<RecordLocation>&)>
      on_below_store;
  // After each entry applied, with where its entry record and its message records lie.
  std::function<void(const Entry&, const RecordLocation&, const std::vector<RecordLocation>&)>
      on_replayed;
};

// An entry found complete on disk, with its appends' hashes and record locations (frames are
// not loaded: load_frames reads them).
struct RecoveredEntry {
  Entry entry;
  std::vector<RecordLocation> locations;
  std::vector<LogStart> starts;  // unapplied ones: where each log stood before it
  RecordLocation record;         // its entry record
  bool applied = false;
};

struct RecoveryStats {
  uint64_t bytes_scanned = 0;
  uint64_t bytes_skipped = 0;  // skip_below_store
  uint64_t files_skipped = 0;
  uint64_t entries_replayed = 0;
  uint64_t torn_tails_cut = 0;
  uint64_t entries_cut = 0;
};

Status recover(Env& env, const std::vector<FileInfo>& files, const RecoveryOptions& options,
               Store* store, LogWriter* writer, RecoveryStats* stats,
               std::vector<RecoveredEntry>* recovered = nullptr);

// Reads the frames of every append of `e` back from their message records.
Status load_frames(Env& env, RecoveredEntry* e);

// Reads an entry back from its entry record and its appends' message records (one location
// per append, in effect order): the entry as Raft replicates it (encode_replicated). Fails
// when a record is gone or damaged.
Result<Bytes> read_replicated(Env& env, const RecordLocation& record,
                              const std::vector<RecordLocation>& messages);

}  // namespace queen
