// Store checkpoints: the store written to store/ckpt.<20-digit index>, where the index is the
// store's applied index: whole (a full checkpoint) or as a delta on an older one (its base).
// A restart loads the newest checkpoint whose chain (its full checkpoint, then each delta on
// the way) verifies and replays only the log entries after it, and log files that hold
// nothing past it (and no payload the store still points at) can be reclaimed.
//
// File (format 3): magic, format, applied index, the applied entry's term, the applied chain
// (a hash over every applied entry, kept when the node tracks it for the checker), the body
// (Store::encode), the body's length, then an xxh3-64 over everything before it; so it can
// be written as it is encoded. Format 5, a delta, also names its base's index after the chain
// and holds Store::encode_delta. Format 4 (a delta writing every request outcome) and format
// 2 (the length before the body) are still read. A checkpoint torn by a crash fails its
// checksum and is skipped; the older ones it was to replace are removed only after the new
// one is durable, so one valid chain (or none, on a fresh node) always remains.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <string_view>

#include "core/common/result.h"
#include "core/common/types.h"
#include "core/state/store.h"
#include "io/env.h"

namespace queen {

// A file named after an index: `prefix` and the index in 20 digits (store/ckpt.<index>).
std::string indexed_file(std::string_view prefix, LogIndex at);
bool parse_indexed_file(std::string_view prefix, const std::string& name, LogIndex* at);

std::string checkpoint_file(LogIndex applied);
bool parse_checkpoint_file(const std::string& name, LogIndex* applied);

// A delta writes only the append rows and request outcomes added since its base
// (Store::encode_delta), so a dedup window full of rows, or a cluster node's outcomes, is not
// written again each time. A chain holds at most this many deltas (core/node ends its chains
// well before).
constexpr size_t kCheckpointChainMax = 256;
struct DeltaOf {
  LogIndex base;              // the base checkpoint's applied index
  const AppendsSince* since;  // the partitions appended to after it
};

// Streams the checkpoint into `sink` a piece of about kCheckpointPieceBytes at a time.
constexpr size_t kCheckpointPieceBytes = 1u << 20;
void write_checkpoint(const Store& store, Term applied_term, uint64_t applied_chain, ByteSink& sink,
                      const DeltaOf* delta = nullptr);
// The same bytes in one buffer. `size_hint_bytes` (e.g. the previous checkpoint's size)
// reserves it up front, so a large store is not copied each time the buffer would grow.
Bytes encode_checkpoint(const Store& store, Term applied_term, uint64_t applied_chain = 0,
                        size_t size_hint_bytes = 0, const DeltaOf* delta = nullptr);

struct Checkpoint {
  Store store;
  Term term;  // of the store's applied entry
  uint64_t applied_chain = 0;
  LogIndex base;  // a delta's base; 0 for a full checkpoint
};
// The checkpoint's base (0: a full one) from its file's first bytes, unverified (none: not a
// checkpoint's header). decode_checkpoint verifies it with the rest.
std::optional<LogIndex> peek_checkpoint_base(const uint8_t* data, size_t size);
// A delta needs `base`, the store its base checkpoint decoded to (consumed).
Result<Checkpoint> decode_checkpoint(const uint8_t* data, size_t size, Store* base = nullptr);

struct ChainFile {
  LogIndex at;
  LogIndex base;  // 0: a full checkpoint
  std::string file;
  uint64_t size_bytes = 0;
};
struct LoadedCheckpoint {
  std::optional<Checkpoint> newest;  // none: start from an empty store
  std::vector<ChainFile> chain;      // the newest's chain: its full checkpoint first
  std::vector<std::string> stale;    // other or damaged checkpoint files, to remove
};
// Loads the newest checkpoint whose whole chain verifies.
Result<LoadedCheckpoint> load_checkpoint(Env& env, const std::vector<FileInfo>& files);

}  // namespace queen
