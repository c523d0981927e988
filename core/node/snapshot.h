// Snapshots: how a leader brings back a follower that needs entries its log no longer holds
// (reclaimed, or a follower whose data folder was wiped). A snapshot is the leader's newest
// store checkpoint (with the chain it builds on) plus the log files its store points at, each
// cut after the last record of an entry the checkpoint holds. Raft asks for one
// (raft::MsgType::snapshot); the node sends it as a stream of chunks over the Raft transport.
//
// Transfer: chunk 0 carries the manifest; chunk s >= 1 carries bytes [(s-1)K, sK) of the
// files laid end to end in manifest order (K = the chunk size). The follower takes chunks in
// order and answers each with the next one it wants (0: it has nothing of this snapshot,
// start over). The leader sends the manifest alone, then keeps a few data chunks unanswered,
// and goes back to the first unanswered one on a timeout or when the follower asks again for
// it while later ones are out.
//
// Installing (crash-safe): the follower stages the files under snap/ and syncs them, then
// writes snap/manifest and syncs it: from then on the install is decided. It removes its
// own log and checkpoints, moves the staged files into place, removes the manifest and
// restarts in place. A start that finds a valid snap/manifest finishes the install first;
// one that finds none removes what was staged. Until the manifest is durable the old log
// stands, so a crash never loses entries the follower acknowledged.
#pragma once

#include <string>
#include <vector>

#include "core/common/bytes.h"
#include "core/common/result.h"
#include "core/common/types.h"
#include "io/env.h"

namespace queen {

inline constexpr const char* kSnapshotStaging = "snap/";
inline constexpr const char* kSnapshotManifestFile = "snap/manifest";

struct SnapshotManifest {
  LogIndex index;               // the checkpoint's applied index
  Term term;                    // of the entry there
  std::vector<FileInfo> files;  // the checkpoints first, then log files; sizes as shipped
  uint64_t total_bytes() const;
  bool operator==(const SnapshotManifest&) const = default;
};

// snapshot_cut reads a log file this much at a time.
constexpr uint64_t kSnapshotCutWindowBytes = uint64_t{1} << 20;

Bytes encode_manifest(const SnapshotManifest& m);  // with a trailing xxh3-64
Result<SnapshotManifest> decode_manifest(const uint8_t* data, size_t size);

// The bytes of log file `name` (of `size` bytes) that hold only records of entries up to
// `index`: its records are in entry order, so the cut is the first record of a later entry
// (or the first that does not decode). Reads the file a window of `window_bytes` at a time
// (or a record, when one is larger); an error only when a read fails.
Result<uint64_t> snapshot_cut(Env& env, const std::string& name, uint64_t size, LogIndex index,
                              uint64_t window_bytes = kSnapshotCutWindowBytes);

// One piece of a chunk: `len` bytes of manifest file `file` from `pos`.
struct ChunkPart {
  size_t file = 0;
  uint64_t pos = 0;
  uint64_t len = 0;
};
// The parts of the stream range [from, from + len) (clipped to the stream's end).
std::vector<ChunkPart> chunk_parts(const SnapshotManifest& m, uint64_t from, uint64_t len);
// How many data chunks the snapshot takes (chunk 0, the manifest, not counted).
uint64_t chunk_count(const SnapshotManifest& m, uint64_t chunk_bytes);

// Finishes a decided install (idempotent, so a restart can redo it): removes every log and
// checkpoint file of `present` the manifest does not name, moves the staged files into
// place, then removes the manifest.
Status finish_install(Env& env, const SnapshotManifest& m, const std::vector<FileInfo>& present);

// At start: finishes an install a valid snap/manifest decided, or drops what was staged
// without one. Returns the data folder's files as they are afterwards.
Result<std::vector<FileInfo>> settle_snapshot(Env& env, std::vector<FileInfo> files);

// Chunk and answer payloads (raft::Message::data).
Bytes encode_chunk(uint64_t seq, const Bytes& payload);
bool decode_chunk(const Bytes& data, uint64_t* seq, Bytes* payload);
Bytes encode_ack(uint64_t next_seq);
bool decode_ack(const Bytes& data, uint64_t* next_seq);

}  // namespace queen
