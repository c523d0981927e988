#include "core/qlog/log.h"

#include <algorithm>
#include <cstdio>
#include <deque>
#include <iterator>
#include <optional>
#include <set>
#include <span>
#include <string>

#include "core/common/assert.h"
#include "core/qlog/record.h"
#include "core/state/file_window.h"

namespace queen {

LogId log_of_queue(QueueId queue, uint32_t shared_logs) {
  if (shared_logs == 0) return LogId(queue.value);
  return LogId(kSharedLogBit | (queue.value % shared_logs));
}

std::string log_file_name(LogId log, uint32_t file_no) {
  char buf[64];
  bool shared = (log.value & kSharedLogBit) != 0;
  std::snprintf(buf, sizeof buf, "qlog/%c%llu/r%08u.qlog", shared ? 's' : 'q',
                static_cast<unsigned long long>(log.value & ~kSharedLogBit), file_no);
  return buf;
}

bool parse_log_file_name(const std::string& name, LogId* log, uint32_t* file_no) {
  char kind = 0;
  unsigned long long q = 0;
  unsigned f = 0;
  int consumed = 0;
  if (std::sscanf(name.c_str(), "qlog/%c%llu/r%8u.qlog%n", &kind, &q, &f, &consumed) != 3)
    return false;
  if (static_cast<size_t>(consumed) != name.size() || (kind != 'q' && kind != 's')) return false;
  if (kind == 's' && q >= kSharedLogsMax) return false;
  if (kind == 'q' && (q & kSharedLogBit) != 0) return false;
  *log = LogId(kind == 's' ? kSharedLogBit | q : q);
  *file_no = f;
  return true;
}

// ---------------------------------------------------------------------------- writer

namespace {

// About the bytes LogWriter::write appends to `log` for `entry`, so its buffer is sized once:
// exact for the message records, a generous guess for the entry record.
size_t records_bytes(const Entry& entry, const std::vector<size_t>& appends, LogId log,
                     uint32_t shared_logs) {
  size_t n = 2 * kRecordHeaderBytes + 64 * (entry.effects.size() + 1);
  for (const auto& e : entry.effects)
    if (const auto* o = std::get_if<EffRequestOutcome>(&e)) n += o->reply.size();
  for (size_t i : appends) {
    const auto& a = std::get<EffAppend>(entry.effects[i]);
    if (log_of_queue(a.queue, shared_logs) == log) n += kRecordHeaderBytes + frames_bytes(a);
  }
  return n;
}

}  // namespace

LogWriter::LogWriter(Outputs& out, uint64_t segment_bytes, uint32_t shared_logs)
    : out_(out), segment_bytes_(segment_bytes), shared_logs_(shared_logs) {
  QUEEN_ASSERT(shared_logs <= kSharedLogsMax, "more shared logs than kSharedLogsMax");
}

LogWriter::LogState& LogWriter::state_of(LogId log) {
  return logs_[log];
}

void LogWriter::restore(LogId log, uint32_t file_no, uint64_t size_bytes) {
  LogState& s = state_of(log);
  s.file_no = file_no;
  s.size_bytes = size_bytes;
  s.unsynced_files.clear();
}

WrittenEntry LogWriter::write(const Entry& entry) {
  WrittenEntry out;
  std::set<LogId> touched;
  for (const auto& e : entry.effects)
    if (auto* a = std::get_if<EffAppend>(&e)) touched.insert(log_of_queue(a->queue, shared_logs_));
  if (touched.empty()) touched.insert(LogId(0));
  out.touched.assign(touched.begin(), touched.end());
  const LogId primary = out.touched.front();
  const uint32_t copies = static_cast<uint32_t>(out.touched.size());

  std::vector<size_t> append_effects;
  for (size_t i = 0; i < entry.effects.size(); ++i)
    if (std::holds_alternative<EffAppend>(entry.effects[i])) append_effects.push_back(i);
  out.locations.resize(append_effects.size());

  for (LogId log : out.touched) {
    LogState& s = state_of(log);
    out.starts.push_back(LogStart{log, s.file_no, s.size_bytes});
    if (s.size_bytes >= segment_bytes_) {
      ++s.file_no;
      s.size_bytes = 0;
    }
    Bytes buf;
    buf.reserve(records_bytes(entry, append_effects, log, shared_logs_));
    ByteWriter w(&buf);
    for (size_t k = 0; k < append_effects.size(); ++k) {
      const auto& a = std::get<EffAppend>(entry.effects[append_effects[k]]);
      if (log_of_queue(a.queue, shared_logs_) != log) continue;
      RecordHeader h{entry.index.value, a.pid.value,  a.base.value,
                     a.count,           entry.now_us, RecordKind::message};
      uint64_t pos = s.size_bytes + buf.size();
      size_t start = begin_record(h, &buf);
      encode_frames(a, w);
      size_t len = finish_record(start, &buf);
      out.locations[k] = RecordLocation{
          .log = log, .file_no = s.file_no, .len = static_cast<uint32_t>(len), .pos = pos};
    }
    if (log == primary) {
      RecordHeader h{entry.index.value, copies, 0, 0, entry.now_us, RecordKind::entry};
      uint64_t pos = s.size_bytes + buf.size();
      size_t start = begin_record(h, &buf);
      encode_entry(entry, w);
      size_t len = finish_record(start, &buf);
      out.record = RecordLocation{
          .log = log, .file_no = s.file_no, .len = static_cast<uint32_t>(len), .pos = pos};
    } else {
      RecordHeader h{entry.index.value, copies, primary.value, 0, entry.now_us, RecordKind::stub};
      encode_record(h, nullptr, 0, &buf);
    }
    s.size_bytes += buf.size();
    out.bytes += buf.size();
    uint64_t& max_index = file_max_index_[{log, s.file_no}];
    max_index = std::max(max_index, entry.index.value);
    if (s.unsynced_files.empty() || s.unsynced_files.back() != s.file_no)
      s.unsynced_files.push_back(s.file_no);
    out_.append(log_file_name(log, s.file_no), std::move(buf));
  }
  return out;
}

uint32_t LogWriter::sync(LogId log, const std::function<uint64_t()>& next_token) {
  LogState& s = state_of(log);
  uint32_t n = 0;
  for (uint32_t f : s.unsynced_files) {
    out_.sync(log_file_name(log, f), next_token());
    ++n;
  }
  s.unsynced_files.clear();
  return n;
}

void LogWriter::truncate_to(const LogStart& start) {
  LogState& s = state_of(start.log);
  for (uint32_t f = s.file_no; f > start.file_no; --f) out_.remove(log_file_name(start.log, f));
  out_.truncate(log_file_name(start.log, start.file_no), start.size_bytes);
  s.file_no = start.file_no;
  s.size_bytes = start.size_bytes;
  std::erase_if(s.unsynced_files, [&](uint32_t f) { return f > start.file_no; });
}

void LogWriter::note_file(LogId log, uint32_t file_no, uint64_t max_index) {
  uint64_t& at = file_max_index_[{log, file_no}];
  at = std::max(at, max_index);
}

std::vector<LogFileKey> LogWriter::reclaimable(uint64_t upto,
                                               const std::map<LogFileKey, uint64_t>& refs,
                                               size_t max) const {
  std::vector<LogFileKey> out;
  for (const auto& [file, max_index] : file_max_index_) {
    if (out.size() >= max) break;
    auto active = logs_.find(file.first);
    if (active == logs_.end() || file.second > active->second.file_no) continue;
    // The active file too, once written and idle (a deleted queue's, or an old layout's):
    // the log's next write then starts a new file.
    if (file.second == active->second.file_no && active->second.size_bytes == 0) continue;
    if (max_index > upto || refs.contains(file)) continue;
    if (std::find(active->second.unsynced_files.begin(), active->second.unsynced_files.end(),
                  file.second) != active->second.unsynced_files.end())
      continue;
    out.push_back(file);
  }
  return out;
}

void LogWriter::reclaim(const LogFileKey& file) {
  out_.remove(log_file_name(file.first, file.second));
  file_max_index_.erase(file);
  LogState& s = state_of(file.first);
  if (file.second == s.file_no) {
    ++s.file_no;
    s.size_bytes = 0;
  }
}

// ---------------------------------------------------------------------------- reader

Result<EffAppend> read_append(Env& env, const AppendRow& row, PartitionId pid) {
  RecordLocation where = row.where();
  if (where.len == 0) return make_error(Errc::not_found, "append has no message record");
  auto bytes = env.read(log_file_name(where.log, where.file_no), where.pos, where.len);
  if (!bytes.ok()) return bytes.error();
  const Bytes& b = bytes.value();
  auto rec = decode_record(b.data(), b.size());
  if (!rec.ok()) return make_error(Errc::corrupt, "message record: " + rec.error().message);
  const RecordHeader& h = rec.value().header;
  if (h.kind != RecordKind::message || h.pid != pid.value || h.base_offset != row.base.value ||
      h.count != row.count)
    return make_error(Errc::corrupt, "message record does not match its index row");
  EffAppend a;
  a.pid = pid;
  a.base = row.base;
  a.count = row.count;
  auto st = decode_frames(rec.value().body, rec.value().body_size, &a);
  if (!st.ok()) return st.error();
  return a;
}

// ---------------------------------------------------------------------------- recovery

Status next_record(FileWindow& w, uint64_t pos, Result<RecordView>* rec) {
  auto head = w.at(pos, kRecordHeaderBytes);
  if (!head.ok()) return head.error();
  uint64_t want = head.value().size();
  if (want >= 4) want = 4 + ByteReader(head.value().data(), 4).u32();
  auto bytes = w.at(pos, want);
  if (!bytes.ok()) return bytes.error();
  *rec = decode_record(bytes.value().data(), bytes.value().size());
  return ok_status();
}

namespace {

struct MsgRec {
  RecordLocation where;
  std::vector<Hash128> hashes;
};

struct EntryRec {
  Entry entry;
  uint32_t copies = 1;
  RecordLocation where;
};

struct RecordPos {
  uint64_t seq;
  uint32_t file_no;
  uint64_t pos;
};

struct LogScan {
  std::map<uint32_t, uint64_t> files;  // file_no -> size
  std::set<uint32_t> skipped;          // files left unread: every record below the store
  std::vector<RecordPos> records;
  bool torn = false;
  uint32_t torn_file = 0;
  uint64_t torn_pos = 0;
};

struct Scan {
  std::map<LogId, LogScan> logs;
  std::map<uint64_t, EntryRec> entries;
  std::map<uint64_t, uint32_t> stubs;
  std::map<std::pair<uint64_t, uint64_t>, MsgRec> messages;  // (index, pid)
};

// Returns false when the record is damaged in a way its checksum did not catch. A record of
// an entry at or below `keep_above` is not kept: nothing after the scan asks for it.
bool take_record(const RecordView& v, const RecordLocation& where, uint64_t keep_above,
                 Scan* scan) {
  const RecordHeader& h = v.header;
  if (h.seq <= keep_above) return true;
  switch (h.kind) {
    case RecordKind::message: {
      if (static_cast<uint64_t>(h.count) * 16 > v.body_size) return false;
      MsgRec m{where, {}};
      ByteReader r(v.body, v.body_size);
      m.hashes.resize(h.count);
      for (auto& x : m.hashes) x = r.hash();
      scan->messages[{h.seq, h.pid}] = std::move(m);
      return true;
    }
    case RecordKind::entry: {
      auto e = decode_entry(v.body, v.body_size);
      if (!e.ok() || e.value().index.value != h.seq) return false;
      scan->entries[h.seq] = EntryRec{std::move(e.value()), static_cast<uint32_t>(h.pid), where};
      return true;
    }
    case RecordKind::stub:
      ++scan->stubs[h.seq];
      return true;
  }
  return false;
}

Status scan_log(Env& env, LogId log, LogScan* ls, Scan* scan, RecoveryStats* stats,
                const RecoveryOptions& opt, uint64_t keep_above, uint64_t total_bytes) {
  for (const auto& [file_no, size] : ls->files) {
    if (ls->skipped.contains(file_no)) continue;
    FileWindow w(env, log_file_name(log, file_no), size);
    uint64_t pos = 0;
    while (pos < size) {
      Result<RecordView> rec = make_error(Errc::truncated, "no record");
      if (auto st = next_record(w, pos, &rec); !st.ok()) return st;
      RecordLocation where{.log = log, .file_no = file_no, .pos = pos};
      bool good = rec.ok();
      if (good) {
        where.len = static_cast<uint32_t>(rec.value().total_size);
        good = take_record(rec.value(), where, keep_above, scan);
      }
      if (!good) {
        ls->torn = true;
        ls->torn_file = file_no;
        ls->torn_pos = pos;
        return ok_status();
      }
      ls->records.push_back(RecordPos{rec.value().header.seq, file_no, pos});
      uint64_t before = stats->bytes_scanned / opt.progress_every_bytes;
      stats->bytes_scanned += rec.value().total_size;
      pos += rec.value().total_size;
      if (stats->bytes_scanned / opt.progress_every_bytes != before) {
        env.log(LogLevel::info, "recovery: scanned " + std::to_string(stats->bytes_scanned >> 20) +
                                    " of " + std::to_string(total_bytes >> 20) + " MiB");
      }
    }
  }
  return ok_status();
}

// The entry index of the first record of `file` (of `size` bytes), if that record is whole;
// reads only its header and then the record.
std::optional<uint64_t> first_seq(Env& env, LogId log, uint32_t file, uint64_t size) {
  FileWindow w(env, log_file_name(log, file), size, 0, kRecordHeaderBytes);
  Result<RecordView> rec = make_error(Errc::truncated, "no record");
  if (!next_record(w, 0, &rec).ok() || !rec.ok()) return std::nullopt;
  return rec.value().header.seq;
}

// Marks the files of `ls` whose every record is of an entry at or below `applied`: those
// before a file whose first record is of such an entry (a log's records are in index order,
// and one entry's records in a log share a file). Each is noted with that first index as
// its highest (never lower than the truth). Records at or below the store's applied index
// were durable before the checkpoint that holds them was written, so no torn tail hides in
// such a file; a damaged record in it is found when it is read.
void skip_below_store(Env& env, LogId log, uint64_t applied, LogScan* ls, LogWriter* writer,
                      RecoveryStats* stats) {
  for (auto it = ls->files.begin(); it != ls->files.end(); ++it) {
    auto next = std::next(it);
    if (next == ls->files.end()) break;
    auto seq = first_seq(env, log, next->first, next->second);
    if (!seq || *seq > applied) break;
    ls->skipped.insert(it->first);
    writer->note_file(log, it->first, *seq);
    stats->bytes_skipped += it->second;
    ++stats->files_skipped;
  }
}

bool entry_complete(const EntryRec& er, const Scan& scan) {
  uint64_t idx = er.entry.index.value;
  auto st = scan.stubs.find(idx);
  uint32_t stubs = st == scan.stubs.end() ? 0 : st->second;
  if (stubs + 1 != er.copies) return false;
  for (const auto& e : er.entry.effects)
    if (auto* a = std::get_if<EffAppend>(&e))
      if (!scan.messages.contains({idx, a->pid.value})) return false;
  return true;
}

// Fills the appends' hashes and collects their record locations.
std::vector<RecordLocation> attach_messages(EntryRec* er, const Scan& scan) {
  std::vector<RecordLocation> locs;
  for (auto& e : er->entry.effects) {
    auto* a = std::get_if<EffAppend>(&e);
    if (!a) continue;
    auto it = scan.messages.find({er->entry.index.value, a->pid.value});
    if (it == scan.messages.end()) {
      locs.push_back(RecordLocation{});
      continue;
    }
    a->hashes = it->second.hashes;
    locs.push_back(it->second.where);
  }
  return locs;
}

Status cut_log(Env& env, LogId log, const LogScan& ls, uint64_t cut_index, LogWriter* writer,
               RecoveryStats* stats) {
  bool cut = ls.torn;
  uint32_t cut_file = ls.torn_file;
  uint64_t cut_pos = ls.torn_pos;
  for (const auto& r : ls.records) {
    if (r.seq >= cut_index) {
      cut = true;
      cut_file = r.file_no;
      cut_pos = r.pos;
      break;
    }
  }
  uint32_t active = ls.files.empty() ? 1 : ls.files.rbegin()->first;
  uint64_t active_size = ls.files.empty() ? 0 : ls.files.rbegin()->second;
  if (cut) {
    if (ls.torn) ++stats->torn_tails_cut;
    for (const auto& [file_no, size] : ls.files) {
      if (file_no < cut_file) continue;
      if (file_no == cut_file) {
        if (size != cut_pos) {
          auto st = env.truncate(log_file_name(log, file_no), cut_pos);
          if (!st.ok()) return st;
        }
      } else {
        auto st = env.remove(log_file_name(log, file_no));
        if (!st.ok()) return st;
      }
    }
    active = cut_file;
    active_size = cut_pos;
  }
  for (const auto& [file_no, size] : ls.files)
    if (file_no <= active && !ls.skipped.contains(file_no)) writer->note_file(log, file_no, 0);
  for (const auto& r : ls.records)
    if (r.file_no <= active && (!cut || r.seq < cut_index))
      writer->note_file(log, r.file_no, r.seq);
  writer->restore(log, active, active_size);
  return ok_status();
}

}  // namespace

Status recover(Env& env, const std::vector<FileInfo>& files, const RecoveryOptions& opt,
               Store* store, LogWriter* writer, RecoveryStats* stats,
               std::vector<RecoveredEntry>* recovered) {
  Scan scan;
  uint64_t total_bytes = 0;
  for (const auto& f : files) {
    LogId log;
    uint32_t file_no = 0;
    if (!parse_log_file_name(f.name, &log, &file_no)) continue;
    scan.logs[log].files[file_no] = f.size_bytes;
    total_bytes += f.size_bytes;
  }
  QUEEN_ASSERT(!(opt.skip_below_store && opt.on_below_store),
               "on_below_store needs the entries a skip would leave unread");
  if (opt.skip_below_store) {
    for (auto& [log, ls] : scan.logs)
      skip_below_store(env, log, store->applied().value, &ls, writer, stats);
    total_bytes -= stats->bytes_skipped;
  }
  if (total_bytes + stats->bytes_skipped > 0)
    env.log(LogLevel::info, "recovery: scanning " + std::to_string(scan.logs.size()) + " logs, " +
                                std::to_string(total_bytes >> 20) + " MiB (" +
                                std::to_string(stats->bytes_skipped >> 20) +
                                " MiB of files below the checkpoint left unread)");
  // Entries the store holds are needed again only by on_below_store.
  uint64_t keep_above = opt.on_below_store ? 0 : store->applied().value;
  for (auto& [log, ls] : scan.logs) {
    auto st = scan_log(env, log, &ls, &scan, stats, opt, keep_above, total_bytes);
    if (!st.ok()) return st;
  }
  uint64_t idx = store->applied().value + 1;
  if (opt.on_below_store) {
    for (auto it = scan.entries.begin(); it != scan.entries.end() && it->first < idx; ++it) {
      if (!entry_complete(it->second, scan)) continue;
      auto locs = attach_messages(&it->second, scan);
      opt.on_below_store(it->second.entry, it->second.where, locs);
    }
  }
  if (opt.require_next_entry &&
      (!scan.entries.contains(idx) || !entry_complete(scan.entries.at(idx), scan)))
    return make_error(Errc::corrupt,
                      "the newest store checkpoint is damaged and the log lacks "
                      "entry " +
                          std::to_string(idx) + " after the older one");
  std::deque<RecoveredEntry> kept;  // applied ones first, at most keep_recent_max of them
  for (auto it = scan.entries.find(idx); it != scan.entries.end(); it = scan.entries.find(++idx)) {
    if (!opt.replay_partial_entry && !entry_complete(it->second, scan)) break;
    auto locs = attach_messages(&it->second, scan);
    bool apply = idx <= opt.apply_upto;
    if (apply) {
      if (auto st = store->apply(it->second.entry, locs); !st.ok()) return st;
      ++stats->entries_replayed;
      if (opt.on_replayed) opt.on_replayed(it->second.entry, it->second.where, locs);
    }
    if (recovered && (!apply || opt.keep_recent_max > 0)) {
      kept.push_back(
          RecoveredEntry{it->second.entry, std::move(locs), {}, it->second.where, apply});
      if (apply && kept.size() > opt.keep_recent_max) kept.pop_front();
    }
  }
  for (auto& r : kept) {
    if (r.applied) continue;
    for (const auto& [log, ls] : scan.logs) {
      auto pos = std::find_if(ls.records.begin(), ls.records.end(),
                              [&](const RecordPos& p) { return p.seq == r.entry.index.value; });
      if (pos != ls.records.end()) r.starts.push_back(LogStart{log, pos->file_no, pos->pos});
    }
  }
  if (recovered)
    recovered->assign(std::make_move_iterator(kept.begin()), std::make_move_iterator(kept.end()));
  for (auto it = scan.entries.lower_bound(idx); it != scan.entries.end(); ++it)
    ++stats->entries_cut;
  for (const auto& [log, ls] : scan.logs) {
    auto st = cut_log(env, log, ls, idx, writer, stats);
    if (!st.ok()) return st;
  }
  if (total_bytes > 0)
    env.log(LogLevel::info, "recovery: replayed " + std::to_string(stats->entries_replayed) +
                                " entries, cut " + std::to_string(stats->entries_cut) +
                                " incomplete, " + std::to_string(stats->torn_tails_cut) +
                                " torn tails");
  return ok_status();
}

Status load_frames(Env& env, RecoveredEntry* e) {
  size_t k = 0;
  for (auto& eff : e->entry.effects) {
    auto* a = std::get_if<EffAppend>(&eff);
    if (!a) continue;
    const RecordLocation& at = e->locations.at(k++);
    auto b = env.read(log_file_name(at.log, at.file_no), at.pos, at.len);
    if (!b.ok()) return b.error();
    auto rec = decode_record(b.value().data(), b.value().size());
    if (!rec.ok()) return rec.error();
    auto st = decode_frames(rec.value().body, rec.value().body_size, a);
    if (!st.ok()) return st;
  }
  return ok_status();
}

Result<Bytes> read_replicated(Env& env, const RecordLocation& at,
                              const std::vector<RecordLocation>& messages) {
  auto b = env.read(log_file_name(at.log, at.file_no), at.pos, at.len);
  if (!b.ok()) return b.error();
  auto rec = decode_record(b.value().data(), b.value().size());
  if (!rec.ok()) return rec.error();
  if (rec.value().header.kind != RecordKind::entry)
    return make_error(Errc::corrupt, "not an entry record");
  auto e = decode_entry(rec.value().body, rec.value().body_size);
  if (!e.ok()) return e.error();
  RecoveredEntry r{std::move(e.value()), messages, {}, at, true};
  size_t appends = 0;
  for (const auto& eff : r.entry.effects) appends += std::holds_alternative<EffAppend>(eff);
  if (appends != messages.size()) return make_error(Errc::corrupt, "message records missing");
  auto st = load_frames(env, &r);
  if (!st.ok()) return st.error();
  return encode_replicated(r.entry);
}

}  // namespace queen
