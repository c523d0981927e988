// Raft's hard state on disk: the term, the vote, a commit index known to be committed, and the
// id of this disk (minted when the node first starts on an empty data folder: a wiped or
// swapped disk has another one, which the identity fence of core/raft/raft.h tells apart).
// Two slot files, raft/hs.0 and raft/hs.1, written alternately (truncate, append, sync), each
// holding one checksummed record with a sequence number: a crash while one slot is being
// written leaves the other, older but durable. Loading picks the valid slot with the highest
// sequence number; no slot at all is a fresh node (term 0, no vote, commit 0).
//
// The persisted commit index may lag the real one (it is written with term and vote changes
// and now and then): recovery applies entries up to it and holds the rest until Raft learns
// the commit again.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/common/types.h"
#include "io/env.h"

namespace queen {

struct PersistedState {
  uint64_t seq = 0;
  Term term;
  std::optional<NodeId> vote;
  LogIndex commit;
  uint64_t disk = 0;  // 0 in a slot written before disk ids existed: one is minted at start
};

std::string hard_state_file(uint64_t seq);
Bytes encode_hard_state(const PersistedState& state);
// The newest valid slot among `files` (read through env), or a fresh state.
Result<PersistedState> load_hard_state(Env& env, const std::vector<FileInfo>& files);

}  // namespace queen
