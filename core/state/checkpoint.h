// Store checkpoints: the whole store written to one file, store/ckpt.<20-digit index>, where
// the index is the store's applied index. A restart loads the newest checkpoint that
// verifies and replays only the log entries after it, and log files that hold nothing past
// it (and no payload the store still points at) can be reclaimed.
//
// File (format 3): magic, format, applied index, the applied entry's term, the applied chain
// (a hash over every applied entry, kept when the node tracks it for the checker), the body
// (Store::encode), the body's length, then an xxh3-64 over everything before it; so it can
// be written as it is encoded. Format 2, with the length before the body, is still read. A
// checkpoint torn by a crash fails its checksum and is skipped; the older one it was to replace is
// removed only after the new one is durable, so one valid checkpoint (or none, on a fresh node)
// always remains.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/common/result.h"
#include "core/common/types.h"
#include "core/state/store.h"
#include "io/env.h"

namespace queen {

std::string checkpoint_file(LogIndex applied);
bool parse_checkpoint_file(const std::string& name, LogIndex* applied);

// Streams the checkpoint into `sink` a piece of about kCheckpointPieceBytes at a time.
constexpr size_t kCheckpointPieceBytes = 1u << 20;
void write_checkpoint(const Store& store, Term applied_term, uint64_t applied_chain,
                      ByteSink& sink);
// The same bytes in one buffer. `size_hint_bytes` (e.g. the previous checkpoint's size)
// reserves it up front, so a large store is not copied each time the buffer would grow.
Bytes encode_checkpoint(const Store& store, Term applied_term, uint64_t applied_chain = 0,
                        size_t size_hint_bytes = 0);

struct Checkpoint {
  Store store;
  Term term;  // of the store's applied entry
  uint64_t applied_chain = 0;
};
Result<Checkpoint> decode_checkpoint(const uint8_t* data, size_t size);

struct LoadedCheckpoint {
  std::optional<Checkpoint> newest;  // none: start from an empty store
  std::string file;                  // the newest's file
  std::vector<std::string> stale;    // older or damaged checkpoint files, to remove
};
Result<LoadedCheckpoint> load_checkpoint(Env& env, const std::vector<FileInfo>& files);

}  // namespace queen
