// Store checkpoints: when to write one, chains of deltas, and the log files they free.
#include "core/node/node_impl.h"
#include "core/planner/ring_file.h"

namespace queen {

// -------------------------------------------------------------- store checkpoints
// Loads the newest valid checkpoint into the store (before the log is replayed after it).
Status NodeImpl::load_store_checkpoint(const std::vector<FileInfo>& files) {
  auto loaded = load_checkpoint(env, files);
  if (!loaded.ok()) return loaded.error();
  LoadedCheckpoint& l = loaded.value();
  // A damaged checkpoint newer than the one loaded was torn before it became durable (then
  // nothing was reclaimed past the loaded one) or damaged later (then the log must prove it
  // still holds the next entry): recovery refuses to start without it.
  LogIndex loaded_at = l.newest ? l.newest->store.applied() : LogIndex(0);
  for (const std::string& f : l.stale) {
    LogIndex at;
    if (parse_checkpoint_file(f, &at) && loaded_at < at) require_next_entry = true;
  }
  for (const std::string& f : l.stale)
    if (auto st = env.remove(f); !st.ok()) return st;
  if (!l.newest) return ok_status();
  store = std::move(l.newest->store);
  applied_term = l.newest->term;
  applied_chain = l.newest->applied_chain;
  for (const ChainFile& f : l.chain)
    checkpoints.push_back(CheckpointFile{f.at, f.base, f.file, f.size_bytes, {}});
  checkpoints.back().refs = file_refs_now();
  env.log(LogLevel::info,
          "store checkpoint loaded at entry " + std::to_string(store.applied().value));
  return ok_status();
}

std::vector<LogFileKey> NodeImpl::file_refs_now() const {
  std::vector<LogFileKey> refs;
  for (const auto& [file, n] : store.file_refs()) refs.push_back(file);
  return refs;
}

void NodeImpl::arm_store_checkpoints() {
  out.set_timer(kStoreCheckpointTimer, config.durable_every_ms);
}

bool NodeImpl::checkpoint_behind() const {
  if (checkpoint_token != 0 || stopped || restart_requested) return false;
  LogIndex at = store.applied();
  return at.value != 0 && (checkpoints.empty() || checkpoints.back().at < at);
}

void NodeImpl::maybe_write_checkpoint() {
  if (!checkpoint_behind()) return;
  // The log must have grown by the last full checkpoint's size (a delta is cheap to write,
  // but each checkpoint copies the process), or a long while have passed.
  bool grown = log_bytes_since_checkpoint >=
               std::min(config.durable_every_bytes, last_full_checkpoint_bytes);
  if (!grown && env.now_ms() < last_checkpoint_ms + config.durable_every_ms * kCheckpointIdleFactor)
    return;
  write_store_checkpoint(/*full=*/false);
  maybe_write_rings(checkpoint_writing.at);
}

void NodeImpl::write_store_checkpoint(bool full) {
  QUEEN_ASSERT(checkpoint_behind(), "a checkpoint is written once the store is past the last");
  LogIndex at = store.applied();
  last_checkpoint_ms = env.now_ms();
  LogIndex base = full ? LogIndex(0) : delta_base();
  checkpoint_writing =
      CheckpointFile{at, base, checkpoint_file(at), 0, file_refs_now(), log_bytes_since_checkpoint};
  log_bytes_since_checkpoint = 0;
  checkpoint_token = next_token++;
  // The store is encoded from its state now, possibly in a copy of the process (io/env.h),
  // which also sorts the appends a delta writes.
  out.write_whole_file(
      checkpoint_writing.file,
      [this, term = applied_term, chain = applied_chain, base,
       appended = std::move(appended_since_checkpoint)](ByteSink& sink) {
        if (base.value == 0) return write_checkpoint(store, term, chain, sink);
        AppendsSince since = appends_since(appended);
        DeltaOf delta{base, &since};
        write_checkpoint(store, term, chain, sink, &delta);
      },
      checkpoint_token, expected_checkpoint_bytes(checkpoint_writing));
  appended_since_checkpoint.clear();
  appends_noted = true;
}

// A guess at the work of checkpoint `c` in bytes, so that io may write a small one in place
// rather than in a copy of the process: a delta weighs as much as the newest delta did per
// byte of log (at least as much), a full one as the chain before it (its rows are there)
// and such a delta; each table row counts kTableRowEncodeBytes more and each request
// outcome kOutcomeEncodeBytes (rows made since the newest delta are in neither).
// UINT64_MAX when there is nothing to go by (no delta since the start).
uint64_t NodeImpl::expected_checkpoint_bytes(const CheckpointFile& c) const {
  if (last_delta_bytes == 0 || last_delta_log_bytes == 0) return UINT64_MAX;
  uint64_t since = last_delta_bytes;
  if (c.log_bytes > last_delta_log_bytes) {
    double per_log_byte = static_cast<double>(last_delta_bytes) / last_delta_log_bytes;
    since = static_cast<uint64_t>(std::min(per_log_byte * c.log_bytes, 1e18));
  }
  since += store.table_rows() * kTableRowEncodeBytes +
           store.request_outcomes().size() * kOutcomeEncodeBytes;
  if (c.base.value != 0) return since;
  if (checkpoints.empty()) return UINT64_MAX;
  size_t root = chain_start(checkpoints.size() - 1);
  return checkpoints[root].size_bytes + deltas_bytes(root) + since;
}

// The size of the deltas after the full checkpoint at `root`, up to the newest.
uint64_t NodeImpl::deltas_bytes(size_t root) const {
  uint64_t bytes = 0;
  for (size_t i = root + 1; i < checkpoints.size(); ++i) bytes += checkpoints[i].size_bytes;
  return bytes;
}

// The checkpoint the next one builds on, or 0 for a full one: a chain ends once its deltas
// weigh half as much as its full checkpoint and more than kChainDeltasLightBytes (a restart
// reads at most 1.5 times a full one, or 1 MiB more), or number config.checkpoint_deltas_max.
LogIndex NodeImpl::delta_base() const {
  if (!appends_noted || checkpoints.empty() || config.checkpoint_deltas_max == 0)
    return LogIndex(0);
  size_t root = chain_start(checkpoints.size() - 1);
  uint64_t deltas = checkpoints.size() - 1 - root, delta_bytes = deltas_bytes(root);
  uint64_t deltas_max = std::min<uint64_t>(config.checkpoint_deltas_max, kCheckpointChainMax);
  uint64_t full_bytes = checkpoints[root].size_bytes;
  bool heavy = delta_bytes > kChainDeltasLightBytes && delta_bytes * 2 >= full_bytes;
  bool ends = deltas >= deltas_max || heavy;
  return ends ? LogIndex(0) : checkpoints.back().at;
}

void NodeImpl::on_checkpoint_synced(bool ok) {
  checkpoint_token = 0;
  if (!ok) return halt("fsync of store checkpoint " + checkpoint_writing.file + " failed");
  if (auto size = env.file_size(checkpoint_writing.file); size.ok())
    checkpoint_writing.size_bytes = size.value();
  if (checkpoint_writing.base.value == 0) {
    last_full_checkpoint_bytes = checkpoint_writing.size_bytes;
  } else {
    last_delta_bytes = checkpoint_writing.size_bytes;
    last_delta_log_bytes = checkpoint_writing.log_bytes;
  }
  checkpoints.push_back(std::move(checkpoint_writing));
  ++stats.store_checkpoints;
  // A snapshot being sent reads its checkpoints and log files: keep them until it is done.
  if (cluster && !snapshot_sends.empty()) return;
  if (checkpoints.size() < 2) return;
  // Keep the chains of the two newest: a restart falls back to the older if the newest is
  // damaged.
  LogIndex root = checkpoints[chain_start(checkpoints.size() - 2)].at;
  while (checkpoints.front().at < root) {
    out.remove(checkpoints.front().file);
    checkpoints.pop_front();
  }
  reclaim_log_files(checkpoints[checkpoints.size() - 2].at);
}

// Where in `checkpoints` the chain of the one at `i` starts: its full checkpoint.
size_t NodeImpl::chain_start(size_t i) const {
  while (i > 0 && checkpoints[i].base.value != 0) --i;
  return i;
}

// Log files that hold nothing past `upto` and no payload the store (or the newest
// checkpoint, which a snapshot ships) points at. A leader keeps what a follower it heard
// from within QUEEN_RAFT_PURGE_HOLD_S still needs; one away longer gets a snapshot.
void NodeImpl::reclaim_log_files(LogIndex upto) {
  std::map<LogFileKey, uint64_t> refs = store.file_refs();
  for (const LogFileKey& f : checkpoints.back().refs) ++refs[f];
  if (cluster) upto = std::min(upto, cluster->raft->slowest_held_match());
  auto files = writer.reclaimable(upto.value, refs, config.reclaim_files_per_pass_max);
  for (const LogFileKey& f : files) {
    writer.reclaim(f);
    ++stats.log_files_reclaimed;
  }
  if (cluster && !files.empty()) cluster->raft->compact(upto);
}

void NodeImpl::halt(const std::string& why) {
  stopped = true;
  out.fatal(why);
}

// -------------------------------------------------------------- dedup rings
void NodeImpl::write_stop_rings(bool checkpoint_started) {
  // A rings file still being written at a checkpoint ends first (one write at a time).
  if (stop_rings != StopRings::undecided || rings_token != 0) return;
  LogIndex at = store.applied();
  bool same_index = checkpoint_started ? checkpoint_writing.at == at
                                       : !checkpoints.empty() && checkpoints.back().at == at;
  if (!same_index || planner.dedup().rings() == 0 || rings_file_at == at) {
    stop_rings = StopRings::settled;
    return;
  }
  stop_rings = StopRings::writing;
  write_rings_file(at);
}

void NodeImpl::maybe_write_rings(LogIndex at) {
  const DedupIndex& dedup = planner.dedup();
  if (rings_token != 0 || dedup.rings() == 0) return;
  const uint64_t ring_bytes = dedup.ring_bytes();  // a walk of the rings
  if (ring_bytes < config.rings_file_bytes_min) return;
  if (log_bytes_since_rings < kRingsLogRatio * ring_bytes) return;
  write_rings_file(at);
}

void NodeImpl::write_rings_file(LogIndex at) {
  log_bytes_since_rings = 0;
  rings_token = next_token++;
  rings_writing_at = at;
  // Size unknown: the rings are encoded in a forked copy even when small, so that their
  // pieces never pass through (and stay in) the node process's allocator.
  out.write_whole_file(
      rings_file(at), [this, at](ByteSink& sink) { write_rings(planner.dedup(), at, sink); },
      rings_token, UINT64_MAX);
}

void NodeImpl::on_rings_synced(bool ok) {
  rings_token = 0;
  if (stop_rings == StopRings::writing) stop_rings = StopRings::settled;
  if (!ok) {
    out.remove(rings_file(rings_writing_at));
    env.log(LogLevel::warn, "the dedup rings were not written: they warm again after a restart");
    return;
  }
  if (rings_file_at.value != 0 && rings_file_at != rings_writing_at)
    out.remove(rings_file(rings_file_at));
  rings_file_at = rings_writing_at;
  ++stats.rings_files_written;
}

Status NodeImpl::load_rings(const std::vector<FileInfo>& files) {
  LogIndex at = store.applied();
  const FileInfo* newest = nullptr;
  LogIndex newest_at;
  for (const FileInfo& f : files) {
    LogIndex named;
    if (!parse_rings_file(f.name, &named) || named.value == 0 || at < named) continue;
    if (!newest || newest_at < named) newest = &f, newest_at = named;
  }
  for (const FileInfo& f : files) {
    LogIndex named;
    if (!parse_rings_file(f.name, &named)) continue;
    if (&f == newest) {
      // Derived state: whatever keeps it from being read, the rings warm from the rows.
      auto read = read_rings(env, f, named, &planner.dedup());
      if (read.ok() && read.value()) {
        stats.rings_loaded += planner.dedup().rings();
      } else {
        planner.dedup().drop_rings();
        env.log(LogLevel::warn, f.name + " cannot be read (" +
                                    (read.ok() ? "damaged" : read.error().message) +
                                    "): the dedup rings warm again");
      }
    }
    if (auto st = env.remove(f.name); !st.ok()) return st;
  }
  planner.dedup().keep_stale_rings(true);  // until the replay ends (Node::start)
  return ok_status();
}

}  // namespace queen
