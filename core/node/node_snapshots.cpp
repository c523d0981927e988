// Snapshot transfer: the leader sends its checkpoints and log files; a follower stages and
// installs them.
#include "core/node/node_impl.h"

namespace queen {

// -------------------------------------------------------------- snapshots: leader
void NodeImpl::start_snapshot_send(NodeId to, LogIndex at_least) {
  snapshot_sends.erase(to.value);
  auto m = build_manifest();
  if (!m.ok() || m.value().index < at_least) {
    env.log(LogLevel::warn, "cannot send node " + std::to_string(to.value) + " a snapshot: " +
                                (m.ok() ? "no checkpoint recent enough" : m.error().message));
    cluster->raft->snapshot_failed(to);
    return;
  }
  SnapshotSend s;
  s.manifest = std::move(m.value());
  s.manifest_bytes = encode_manifest(s.manifest);
  s.chunks = chunk_count(s.manifest, config.snapshot_chunk_bytes);
  env.log(LogLevel::info, "sending node " + std::to_string(to.value) + " a snapshot at entry " +
                              std::to_string(s.manifest.index.value) + " (" +
                              std::to_string(s.manifest.total_bytes()) + " bytes)");
  ++stats.snapshots_sent;
  send_window(to.value, snapshot_sends[to.value] = std::move(s));
}

// The newest checkpoint (its chain) and the log files its store points at, cut after its entry.
Result<SnapshotManifest> NodeImpl::build_manifest() {
  if (checkpoints.empty()) return make_error(Errc::unavailable, "no store checkpoint yet");
  const CheckpointFile& ck = checkpoints.back();
  auto term = cluster->raft->term_of(ck.at);
  auto listed = env.list_files();
  if (!term || !listed.ok()) return make_error(Errc::io, "cannot list the data folder");
  std::map<std::string, uint64_t> sizes;
  for (const FileInfo& f : listed.value()) sizes[f.name] = f.size_bytes;
  SnapshotManifest m;
  m.index = ck.at;
  m.term = *term;
  for (size_t i = chain_start(checkpoints.size() - 1); i < checkpoints.size(); ++i) {
    const CheckpointFile& c = checkpoints[i];  // its chain, full checkpoint first
    if (!sizes.contains(c.file)) return make_error(Errc::not_found, c.file + " is gone");
    m.files.push_back(FileInfo{c.file, sizes[c.file]});
  }
  for (const LogFileKey& k : ck.refs) {
    std::string name = log_file_name(k.first, k.second);
    auto it = sizes.find(name);
    if (it == sizes.end()) return make_error(Errc::not_found, name + " is gone");
    uint64_t cut = it->second;
    auto max_index = writer.max_index(k);
    if (!max_index || *max_index > ck.at.value) {  // it holds later entries too: cut there
      auto c = snapshot_cut(env, name, it->second, ck.at);
      if (!c.ok()) return c.error();
      cut = c.value();
    }
    if (cut > 0 && !config.mutants.snapshot_without_log_files)
      m.files.push_back(FileInfo{name, cut});
  }
  return m;
}

// Sends the chunks of the window not sent yet: the manifest alone until it is answered,
// then up to kSnapshotWindow unanswered data chunks (go-back-N: a resend starts over from
// the first unanswered one). False when the transfer had to be given up.
bool NodeImpl::send_window(uint64_t to, SnapshotSend& s) {
  uint64_t end = s.acked == 0 ? 1 : std::min(s.acked + kSnapshotWindow, s.chunks + 1);
  for (; s.sent_end < end; ++s.sent_end)
    if (!send_chunk(to, s, s.sent_end)) return false;
  return true;
}

bool NodeImpl::send_chunk(uint64_t to, SnapshotSend& s, uint64_t seq) {
  Bytes payload;
  if (seq == 0) {
    payload = s.manifest_bytes;
  } else {
    uint64_t from = (seq - 1) * config.snapshot_chunk_bytes;
    for (const ChunkPart& p : chunk_parts(s.manifest, from, config.snapshot_chunk_bytes)) {
      auto b = env.read(s.manifest.files[p.file].name, p.pos, p.len);
      if (!b.ok() || b.value().size() != p.len) {
        abort_send(to, "cannot read it back");
        return false;
      }
      payload.insert(payload.end(), b.value().begin(), b.value().end());
    }
  }
  s.sent_tick = raft_ticks;
  send_transfer(raft::MsgType::snapshot_chunk, to, s.manifest.index, s.manifest.term,
                encode_chunk(seq, payload));
  return true;
}

void NodeImpl::abort_send(uint64_t to, const std::string& why) {
  env.log(LogLevel::warn, "snapshot to node " + std::to_string(to) + " given up: " + why);
  snapshot_sends.erase(to);
  cluster->raft->snapshot_failed(NodeId(to));
}

void NodeImpl::on_snapshot_ack(uint64_t from, const raft::Message& m) {
  auto it = snapshot_sends.find(from);
  uint64_t next = 0;
  if (it == snapshot_sends.end() || m.index != it->second.manifest.index ||
      m.term != cluster->raft->term() || !decode_ack(m.data, &next))
    return;
  SnapshotSend& s = it->second;
  cluster->raft->snapshot_progress(NodeId(from));
  if (next > s.chunks) {
    env.log(LogLevel::info, "snapshot at entry " + std::to_string(s.manifest.index.value) +
                                " delivered to node " + std::to_string(from));
    snapshot_sends.erase(it);
    return;
  }
  if (next == 0) {
    s.acked = s.sent_end = 0;  // the follower has nothing of it: from the manifest again
  } else if (next > s.acked) {
    s.acked = next;
    s.sent_end = std::max(s.sent_end, next);
  } else if (next == s.acked && s.rewound != s.acked && s.sent_end > s.acked + 1) {
    // The same chunk wanted again while later ones are out: they came out of order and the
    // follower dropped them. Send again from it, once per answered position.
    s.rewound = s.acked;
    s.sent_end = s.acked;
  } else {
    return;  // nothing new answered
  }
  s.resends = 0;
  send_window(from, s);
}

void NodeImpl::tick_snapshots() {
  ++raft_ticks;
  std::vector<uint64_t> due;
  for (auto& [to, s] : snapshot_sends)
    if (raft_ticks - s.sent_tick >= kSnapshotResendTicks) due.push_back(to);
  for (uint64_t to : due) {
    SnapshotSend& s = snapshot_sends.at(to);
    if (++s.resends > kSnapshotResendsMax) {
      abort_send(to, "no answer");
    } else {
      s.sent_end = s.acked;
      send_window(to, s);
    }
  }
}

// -------------------------------------------------------------- snapshots: follower
void NodeImpl::answer_chunk(uint64_t to, const raft::Message& m, uint64_t next_seq) {
  send_transfer(raft::MsgType::snapshot_ack, to, m.index, m.log_term, encode_ack(next_seq));
}

// A message of a snapshot transfer (a chunk or its answer) for the snapshot at `index`.
void NodeImpl::send_transfer(raft::MsgType type, uint64_t to, LogIndex index, Term term,
                             Bytes data) {
  raft::Message m;
  m.type = type;
  m.from = NodeId(config.node_id);
  m.to = NodeId(to);
  m.term = cluster->raft->term();
  m.index = index;
  m.log_term = term;
  m.data = std::move(data);
  m.disk = cluster->persisted.disk;  // as Raft stamps its own (the identity fence)
  m.kinds = config.format_max;
  send_message(std::move(m));
}

void NodeImpl::on_snapshot_chunk(uint64_t from, const raft::Message& m) {
  Cluster& c = *cluster;
  uint64_t seq = 0;
  Bytes payload;
  if (m.term != c.raft->term() || c.raft->leader() != NodeId(from) ||
      !decode_chunk(m.data, &seq, &payload))
    return;
  if (c.commit >= m.index.value) return answer_chunk(from, m, UINT64_MAX);  // has it all
  auto& r = snapshot_recv;
  bool same =
      r && r->from == from && r->manifest.index == m.index && r->manifest.term == m.log_term;
  if (!same) {
    // Bound to install the one it has once all of it arrived (committed state all the same).
    if (r && r->next_seq > r->chunks) return;
    if (seq != 0) return answer_chunk(from, m, 0);
    auto manifest = decode_manifest(payload.data(), payload.size());
    if (!manifest.ok() || manifest.value().index != m.index) return;
    discard_staged();
    r = SnapshotRecv{};
    r->from = from;
    r->manifest = std::move(manifest.value());
    r->chunks = chunk_count(r->manifest, config.snapshot_chunk_bytes);
    env.log(LogLevel::info, "receiving a snapshot at entry " + std::to_string(m.index.value) +
                                " from node " + std::to_string(from));
    return answer_chunk(from, m, 1);
  }
  if (seq != r->next_seq || seq == 0 || seq > r->chunks) return answer_chunk(from, m, r->next_seq);
  uint64_t at = (seq - 1) * config.snapshot_chunk_bytes;
  auto parts = chunk_parts(r->manifest, at, config.snapshot_chunk_bytes);
  uint64_t want = 0;
  for (const ChunkPart& p : parts) want += p.len;
  if (payload.size() != want) return;
  uint64_t done = 0;
  for (const ChunkPart& p : parts) {
    auto b = payload.begin() + static_cast<ptrdiff_t>(done);
    out.append(kSnapshotStaging + r->manifest.files[p.file].name,
               Bytes(b, b + static_cast<ptrdiff_t>(p.len)));
    done += p.len;
  }
  if (++r->next_seq > r->chunks) sync_staged();
  answer_chunk(from, m, r->next_seq);
}

void NodeImpl::sync_staged() {
  for (const FileInfo& f : snapshot_recv->manifest.files) {
    snapshot_recv->tokens.insert(next_token);
    out.sync(kSnapshotStaging + f.name, next_token++);
  }
}

// A staged snapshot that will not be installed: its files go, its syncs are ignored.
void NodeImpl::discard_staged() {
  if (!snapshot_recv) return;
  for (uint64_t t : snapshot_recv->tokens) dead_tokens.insert(t);
  for (const FileInfo& f : snapshot_recv->manifest.files)
    out.remove(kSnapshotStaging + f.name, /*absent_ok=*/true);  // none of it may have come
  snapshot_recv.reset();
}

// Staged files synced: the manifest decides the install; once it is durable, install.
void NodeImpl::on_staged_synced(uint64_t token, bool ok) {
  SnapshotRecv& r = *snapshot_recv;
  r.tokens.erase(token);
  if (!ok) return halt("fsync of a staged snapshot file failed");
  if (!r.tokens.empty()) return;
  if (r.deciding) {
    r.decided = true;
    return;
  }
  r.deciding = true;
  out.append(kSnapshotManifestFile, encode_manifest(r.manifest));
  r.tokens.insert(next_token);
  out.sync(kSnapshotManifestFile, next_token++);
}

// Once a decided snapshot waits for no sync of the old log, asks for a restart in place
// (Outputs::restart): Node::restart_in_place installs its files, start() the rest.
void NodeImpl::maybe_install() {
  if (!snapshot_recv || !snapshot_recv->decided || restart_requested) return;
  if (!sync_tokens.empty() || !dead_tokens.empty() || !cluster->hs_tokens.empty() ||
      checkpoint_token != 0)
    return;
  fail_answers_after(0, "this node is installing a snapshot");
  restart_requested = true;
  out.restart = true;
}

// Follower (or a new leader's first entry): writes what Raft appended to the own log.
void NodeImpl::append_replicated(raft::LogEntry e) {
  Cluster& c = *cluster;
  if (e.index.value <= c.written) return;  // the leader's own, written when proposed
  Entry entry;
  if (e.data.empty()) {  // a new leader's first entry of its term: no effects
    entry.index = e.index;
    entry.term = e.term;
    entry.now_us = stamp_now();
    c.cache.put(e.index, e.term, encode_replicated(entry));
  } else {
    auto d = decode_replicated(e.data.data(), e.data.size());
    if (!d.ok() || d.value().index != e.index || d.value().term != e.term)
      return halt("entry " + std::to_string(e.index.value) + " from the leader is damaged");
    entry = std::move(d.value());
    c.cache.put(e.index, e.term, std::move(e.data));
    follow_membership(entry);
  }
  write_entry(std::move(entry));
}

// Raft overwrites the uncommitted suffix after `keep`: cut it from every log and answer
// what waited on it (it never took effect).
void NodeImpl::truncate_log(uint64_t keep) {
  Cluster& c = *cluster;
  c.cache.truncate_after(LogIndex(keep));
  std::map<LogId, LogStart> cut;
  for (auto it = inflight.upper_bound(keep); it != inflight.end(); it = inflight.erase(it)) {
    for (const LogStart& st : it->second.written.starts) cut.emplace(st.log, st);
  }
  for (auto it = sync_tokens.begin(); it != sync_tokens.end();) {
    if (it->second > keep) {
      dead_tokens.insert(it->first);
      it = sync_tokens.erase(it);
    } else {
      ++it;
    }
  }
  for (const auto& [log, st] : cut) writer.truncate_to(st);
  fail_answers_after(keep, "the leader changed before this write committed; it did not land");
  c.written = std::min(c.written, keep);
  c.durable = std::min(c.durable, keep);
  last_written = std::min(last_written, keep);
}

}  // namespace queen
