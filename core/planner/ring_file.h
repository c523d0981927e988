// The dedup rings kept across a restart: store/rings.<20-digit index>, written beside a store
// checkpoint of the same index, from the rings as they stand at it: at a graceful stop, and
// beside a checkpoint once the log has grown several times the rings' size since the last
// file and the rings are large enough to be worth a fork (core/node/node_checkpoints.cpp), so
// a start after a crash finds them too. The next start reads the newest one at or below the
// index its store is loaded at, before any entry is replayed; each ring then catches up from
// the rows above its covered offset at its next use (the rows the checkpoints and the replay
// added since). Node-local derived state: a missing, stale or damaged file only means the
// rings warm from the rows again; it is never sent to another node (a snapshot install
// removes it), and every start removes it once read.
//
// A start takes at most QUEEN_RAFT_DEDUP_FRONT_MB of rings from the file, the most recently
// used (DedupIndex::decode_rings), so lowering the bound across a restart holds at once.
//
// Layout: magic, format, index, DedupIndex::encode_rings (each ring with its partition and
// its last use), then the xxh3-64 of all before.
#pragma once

#include <string>

#include "core/common/bytes.h"
#include "core/common/result.h"
#include "core/common/types.h"
#include "core/planner/dedup.h"
#include "io/env.h"

namespace queen {

std::string rings_file(LogIndex at);
bool parse_rings_file(const std::string& name, LogIndex* at);

void write_rings(const DedupIndex& dedup, LogIndex at, ByteSink& sink);
// Reads file `f` into `dedup` when it holds the rings at `at`: whether it did. An error only
// when the disk could not be read; a damaged or foreign file is a false.
Result<bool> read_rings(Env& env, const FileInfo& f, LogIndex at, DedupIndex* dedup);

}  // namespace queen
