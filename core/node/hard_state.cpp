#include "core/node/hard_state.h"

#include "core/qlog/record.h"

namespace queen {

std::string hard_state_file(uint64_t seq) {
  return "raft/hs." + std::to_string(seq % 2);
}

Bytes encode_hard_state(const PersistedState& s) {
  Bytes body;
  ByteWriter w(&body);
  w.u64(s.term.value);
  w.u8(s.vote ? 1 : 0);
  w.u64(s.vote ? s.vote->value : 0);
  w.u64(s.commit.value);
  w.u64(s.disk);
  Bytes out;
  RecordHeader h{s.seq, 0, 0, 0, 0, RecordKind::entry};
  encode_record(h, body.data(), body.size(), &out);
  return out;
}

Result<PersistedState> load_hard_state(Env& env, const std::vector<FileInfo>& files) {
  PersistedState best;
  for (const auto& f : files) {
    if (f.name != "raft/hs.0" && f.name != "raft/hs.1") continue;
    if (f.size_bytes == 0) continue;
    auto b = env.read(f.name, 0, f.size_bytes);
    if (!b.ok()) return b.error();
    auto rec = decode_record(b.value().data(), b.value().size());
    if (!rec.ok()) continue;  // a slot torn while being written: the other one holds
    ByteReader r(rec.value().body, rec.value().body_size);
    PersistedState s;
    s.seq = rec.value().header.seq;
    s.term = Term(r.u64());
    bool voted = r.u8() != 0;
    uint64_t vote = r.u64();
    s.commit = LogIndex(r.u64());
    if (r.left() >= 8) s.disk = r.u64();
    if (!r.ok()) continue;
    if (voted) s.vote = NodeId(vote);
    if (s.seq >= best.seq) best = s;
  }
  return best;
}

}  // namespace queen
