#include "io/real/disk.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "core/state/checkpoint.h"
#include "io/real/latency.h"
#include "io/real/log.h"
#include "io/real/thread_name.h"

namespace queen::real {

namespace fs = std::filesystem;

struct Disk::OpenFile {
  int fd = -1;
  explicit OpenFile(int f) : fd(f) {}
  ~OpenFile() {
    if (fd >= 0) ::close(fd);
  }
};

bool valid_file_name(const std::string& file) {
  if (file.empty() || file.front() == '/' || file.back() == '/') return false;
  if (file.find('\0') != std::string::npos) return false;
  size_t start = 0;
  while (start <= file.size()) {
    size_t end = file.find('/', start);
    if (end == std::string::npos) end = file.size();
    std::string_view seg(file.data() + start, end - start);
    if (seg.empty() || seg == "." || seg == "..") return false;
    start = end + 1;
  }
  return true;
}

namespace {

std::string errno_text(int err) {
  return std::strerror(err);
}

bool write_all(int fd, const uint8_t* data, size_t size) {
  while (size > 0) {
    ssize_t n = ::write(fd, data, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

// False with errno set to why (close does not overwrite it).
bool fsync_dir(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return false;
  bool ok = ::fsync(fd) == 0;
  int err = errno;
  ::close(fd);
  errno = err;
  return ok;
}

// The folders whose entries a file at `file` needs durable: its own, up to the data folder.
std::vector<std::string> folders_of(const std::string& root, const std::string& file) {
  std::vector<std::string> out;
  for (fs::path rel = fs::path(file).parent_path();; rel = rel.parent_path()) {
    out.push_back((fs::path(root) / rel).string());
    if (rel.empty()) break;
  }
  return out;
}

// fsync of each folder in turn; false at the first that fails.
bool fsync_dirs(const std::vector<std::string>& folders) {
  for (const std::string& folder : folders)
    if (!fsync_dir(folder)) return false;
  return true;
}

// Writes what it is given to the file as it comes (into the page cache: the copy of the
// process lives, and the node pays copy-on-write faults, only while it encodes).
class FileSink final : public ByteSink {
 public:
  explicit FileSink(int fd) : fd_(fd) {}
  void put(const uint8_t* data, size_t size) override { ok_ = ok_ && write_all(fd_, data, size); }
  bool ok() const { return ok_; }

 private:
  int fd_;
  bool ok_ = true;
};

// In the forked copy: the producer writing the file, then _exit (no atexit handlers, no
// flushing of the parent's buffers). Its writeback is settle_file()'s, in the node.
[[noreturn]] void write_in_copy(const std::string& path, const Env::FileProducer& produce) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) ::_exit(1);
  FileSink sink(fd);
  produce(sink);
  bool ok = sink.ok() && ::close(fd) == 0;
  ::_exit(ok ? 0 : 1);
}

// Writes back the file a chunk at a time, starting each chunk's writeback and waiting for
// the one before it (at most two chunks queued at the device, so the log's fdatasync, which
// queues behind them, is not held up by the whole file), then fdatasyncs it and its folders.
bool settle_file(const std::string& path, const std::vector<std::string>& folders) {
  constexpr off_t kChunkBytes = 256 << 10;
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st {};
  bool ok = ::fstat(fd, &st) == 0;
  for (off_t at = 0; ok && at < st.st_size; at += kChunkBytes) {
    ok = ::sync_file_range(fd, at, kChunkBytes, SYNC_FILE_RANGE_WRITE) == 0;
    if (ok && at > 0)
      ok = ::sync_file_range(fd, at - kChunkBytes, kChunkBytes, SYNC_FILE_RANGE_WAIT_AFTER) == 0;
  }
  ok = ok && ::fdatasync(fd) == 0;
  ok = ::close(fd) == 0 && ok;
  return ok && fsync_dirs(folders);
}

}  // namespace

struct Disk::Forked {
  pid_t pid = -1;
  std::string path;
  std::thread waiter;
  std::mutex mutex;     // orders the waiter's "it exited" against stop()'s kill
  bool exited = false;  // the copy is gone (a zombie until the waiter reaps it)
  bool killed = false;  // stop() killed it: not reported, its file is removed
  bool ok = false;      // it wrote and synced its file (read after the waiter is joined)
  std::atomic<bool> done{false};
};

Disk::Disk(DiskOptions options, SyncDone sync_done)
    : options_(std::move(options)), sync_done_(std::move(sync_done)) {}

Disk::~Disk() {
  stop();
}

Status Disk::open() {
  std::error_code ec;
  fs::create_directories(options_.root, ec);
  if (ec) {
    return make_error(Errc::io, "cannot create data folder " + options_.root + ": " + ec.message());
  }
  fs::path root = fs::absolute(options_.root, ec);
  if (!ec && root.has_parent_path()) fsync_dir(root.parent_path().string());
  writer_ = std::thread([this] {
    name_this_thread("queen-disk");
    writer_loop();
  });
  for (size_t i = 0; i < kSyncHelpers; ++i)
    helpers_.emplace_back([this] {
      name_this_thread("queen-sync");
      helper_loop();
    });
  return ok_status();
}

Result<std::vector<FileInfo>> Disk::list_files() const {
  std::vector<FileInfo> files;
  std::error_code ec;
  fs::path root(options_.root);
  for (fs::recursive_directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
    if (!it->is_regular_file(ec)) continue;
    uint64_t size = it->file_size(ec);
    if (ec) break;
    files.push_back({it->path().lexically_relative(root).generic_string(), size});
  }
  if (ec) return make_error(Errc::io, "cannot list " + options_.root + ": " + ec.message());
  std::sort(files.begin(), files.end(),
            [](const FileInfo& a, const FileInfo& b) { return a.name < b.name; });
  return files;
}

std::string Disk::full_path(const std::string& file) const {
  return options_.root + "/" + file;
}

void Disk::append(const std::string& file, Bytes data) {
  enqueue(Op{Op::Kind::append, file, std::move(data), 0});
}

void Disk::sync(const std::string& file, uint64_t token) {
  enqueue(
      Op{.kind = Op::Kind::sync, .file = file, .token = token, .queued_at = HandoffClock::now()});
}

class Disk::PieceSink final : public ByteSink {
 public:
  PieceSink(Disk& disk, std::string file) : disk_(disk), file_(std::move(file)) {}
  void put(const uint8_t* data, size_t size) override {
    while (size > 0) {
      if (piece_.capacity() == 0) piece_ = disk_.take_piece();
      size_t n = std::min(size, kPieceBytes - piece_.size());
      piece_.insert(piece_.end(), data, data + n);
      data += n;
      size -= n;
      if (piece_.size() == kPieceBytes) send();
    }
  }
  // The last piece; a file of no bytes still gets its (empty) first one.
  void finish() {
    if (!piece_.empty() || first_) send();
  }

 private:
  void send() {
    disk_.enqueue(Op{Op::Kind::append, file_, std::move(piece_), 0, first_, true});
    piece_ = Bytes();
    first_ = false;
  }
  Disk& disk_;
  std::string file_;
  Bytes piece_;
  bool first_ = true;
};

Bytes Disk::take_piece() {
  {
    std::lock_guard lock(spare_mutex_);
    if (!spare_pieces_.empty()) {
      Bytes piece = std::move(spare_pieces_.back());
      spare_pieces_.pop_back();
      return piece;
    }
  }
  Bytes piece;
  piece.reserve(kPieceBytes);
  return piece;
}

void Disk::give_back(Bytes piece) {
  if (piece.capacity() != kPieceBytes) return;
  piece.clear();
  std::lock_guard lock(spare_mutex_);
  if (spare_pieces_.size() < kSparePiecesMax) spare_pieces_.push_back(std::move(piece));
}

void Disk::write_whole(const std::string& file, const Env::FileProducer& produce, uint64_t token,
                       uint64_t expected_bytes) {
  bool large = expected_bytes > options_.whole_in_place_bytes_max;
  if (large && options_.fork_whole_files && valid_file_name(file) &&
      fork_whole(file, produce, token))
    return;
  PieceSink sink(*this, file);
  produce(sink);
  sink.finish();
  sync(file, token);
}

bool Disk::fork_whole(const std::string& file, const Env::FileProducer& produce, uint64_t token) {
  reap_finished();
  std::string path = full_path(file);
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  if (ec) return false;  // the FIFO's append reports the failure
  std::vector<std::string> folders = folders_of(options_.root, file);
  pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) {
    log_line(LogLevel::warn, "disk",
             "cannot fork to write " + file + " (" + errno_text(errno) + "): writing it here");
    return false;
  }
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(1);  // the parent died before prctl
    // Sockets the node closes must not stay open here (a peer would not see the close).
    ::close_range(3, ~0u, 0);
    write_in_copy(path, produce);
  }
  auto forked = std::make_unique<Forked>();
  Forked* f = forked.get();
  f->pid = pid;
  f->path = path;
  f->waiter = std::thread([this, f, file, token, folders = std::move(folders)] {
    name_this_thread("queen-fork-wait");
    siginfo_t info{};
    while (::waitid(P_PID, static_cast<id_t>(f->pid), &info, WEXITED | WNOWAIT) != 0 &&
           errno == EINTR) {
    }
    bool killed;
    {
      std::lock_guard lock(f->mutex);
      f->exited = true;
      killed = f->killed;
    }
    int status = 0;
    while (::waitpid(f->pid, &status, 0) < 0 && errno == EINTR) {
    }
    bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (ok && !killed) ok = settle_file(f->path, folders);
    f->ok = ok;
    if (!killed) {
      if (!ok) log_line(LogLevel::error, "disk", "the forked writer of " + file + " failed");
      sync_done_(token, ok);
    }
    f->done = true;
  });
  forked_.push_back(std::move(forked));
  return true;
}

void Disk::reap_finished() {
  for (auto it = forked_.begin(); it != forked_.end();) {
    if (!(*it)->done) {
      ++it;
      continue;
    }
    (*it)->waiter.join();
    it = forked_.erase(it);
  }
}

Result<uint64_t> Disk::file_size(const std::string& file) const {
  if (!valid_file_name(file)) return make_error(Errc::io, "bad file name " + file);
  struct stat st {};
  if (::stat(full_path(file).c_str(), &st) != 0) {
    int err = errno;
    return make_error(err == ENOENT ? Errc::not_found : Errc::io,
                      "cannot stat " + file + ": " + errno_text(err));
  }
  return static_cast<uint64_t>(st.st_size);
}

void Disk::enqueue(Op op) {
  std::unique_lock lock(queue_mutex_);
  uint64_t bytes = op.data.size();
  // An op larger than the whole budget still goes through once the queue is empty.
  queue_cv_.wait(lock, [&] {
    return stopping_ || queue_.empty() ||
           (queue_.size() < options_.queue_ops_max &&
            queued_bytes_ + bytes <= options_.queue_bytes_max);
  });
  queued_bytes_ += bytes;
  queue_.push_back(std::move(op));
  queue_cv_.notify_all();
}

void Disk::writer_loop() {
  std::vector<Op> batch;
  for (;;) {
    batch.clear();
    {
      std::unique_lock lock(queue_mutex_);
      queue_cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping and drained
      uint64_t bytes = 0;
      while (!queue_.empty() && batch.size() < kBatchOpsMax && bytes < kBatchBytesMax) {
        bytes += queue_.front().data.size();
        batch.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
      queued_bytes_ -= bytes;
      busy_ = true;
      queue_cv_.notify_all();
    }
    run_batch(batch);
    {
      std::lock_guard lock(queue_mutex_);
      busy_ = false;
    }
    queue_cv_.notify_all();
  }
}

// The appends in call order, then one fdatasync per file for all the syncs of it in the
// batch: a sync's appends were written before it, so the later fdatasync covers them.
void Disk::run_batch(std::vector<Op>& batch) {
  Syncs syncs;  // in first-sync order
  for (Op& op : batch) {
    if (op.kind == Op::Kind::append) {
      run_append(op);
      if (op.spare) give_back(std::move(op.data));
      continue;
    }
    record_handoff(Handoff::disk, op.queued_at);
    auto it =
        std::find_if(syncs.begin(), syncs.end(), [&](const auto& s) { return s.first == op.file; });
    if (it == syncs.end()) it = syncs.insert(syncs.end(), {std::move(op.file), {}});
    it->second.push_back(op.token);
  }
  run_syncs(syncs);
}

void Disk::run_syncs(const Syncs& syncs) {
  if (syncs.size() <= 1) {
    for (const auto& [file, tokens] : syncs) run_sync(file, tokens);
    return;
  }
  {
    std::lock_guard lock(sync_mutex_);
    round_ = &syncs;
    round_next_ = 0;
    round_done_ = 0;
  }
  sync_cv_.notify_all();
  take_syncs();
  std::unique_lock lock(sync_mutex_);
  sync_cv_.wait(lock, [&] { return round_done_ == syncs.size(); });
  round_ = nullptr;
}

void Disk::take_syncs() {
  for (;;) {
    const std::pair<std::string, std::vector<uint64_t>>* one;
    {
      std::lock_guard lock(sync_mutex_);
      if (round_ == nullptr || round_next_ >= round_->size()) return;
      one = &(*round_)[round_next_++];
    }
    run_sync(one->first, one->second);
    std::lock_guard lock(sync_mutex_);
    if (++round_done_ == round_->size()) sync_cv_.notify_all();
  }
}

void Disk::helper_loop() {
  std::unique_lock lock(sync_mutex_);
  for (;;) {
    sync_cv_.wait(lock, [&] {
      return helpers_stopping_ || (round_ != nullptr && round_next_ < round_->size());
    });
    if (helpers_stopping_) return;
    lock.unlock();
    take_syncs();
    lock.lock();
  }
}

void Disk::run_append(const Op& op) {
  int err = 0;
  auto f = handle(op.file, /*create=*/true, &err);
  bool ok = f && (!op.first_piece || ::ftruncate(f->fd, 0) == 0) &&
            write_all(f->fd, op.data.data(), op.data.size());
  if (!ok) {
    if (f) err = errno;
    log_line(LogLevel::error, "disk", "append to " + op.file + " failed: " + errno_text(err));
    std::lock_guard lock(files_mutex_);
    failed_.insert(op.file);
  }
}

void Disk::run_sync(const std::string& file, const std::vector<uint64_t>& tokens) {
  int err = 0;
  auto f = handle(file, /*create=*/true, &err);
  bool ok = f != nullptr;
  std::string why;  // what failed, when it is not this sync's own errno
  if (ok) {
    std::lock_guard lock(files_mutex_);
    ok = failed_.count(file) == 0;
    if (!ok) why = "an earlier write or sync of it failed";
  }
  auto started = std::chrono::steady_clock::now();
  if (ok && ::fdatasync(f->fd) != 0) {
    err = errno;
    ok = false;
  }
  if (ok) {
    process_latencies().fsync.record_us(std::chrono::duration_cast<std::chrono::microseconds>(
                                            std::chrono::steady_clock::now() - started)
                                            .count());
  }
  if (ok && !sync_new_dirs(file)) {
    err = errno;
    ok = false;
    why = "fsync of its folder: " + errno_text(err);
  }
  if (!ok) {
    log_line(LogLevel::error, "disk",
             "sync of " + file + " failed: " + (why.empty() ? errno_text(err) : why));
    std::lock_guard lock(files_mutex_);
    failed_.insert(file);
  }
  for (uint64_t token : tokens) sync_done_(token, ok);
}

// The first sync of a created file also makes its directory entry durable, and those of
// the folders created for it, up to the data folder.
bool Disk::sync_new_dirs(const std::string& file) {
  {
    std::lock_guard lock(files_mutex_);
    if (new_files_.erase(file) == 0) return true;
  }
  return fsync_dirs(folders_of(options_.root, file));
}

std::shared_ptr<Disk::OpenFile> Disk::handle(const std::string& file, bool create, int* errno_out) {
  if (!valid_file_name(file)) {
    *errno_out = EINVAL;
    return nullptr;
  }
  std::lock_guard lock(files_mutex_);
  auto it = open_.find(file);
  if (it != open_.end()) {
    lru_.splice(lru_.begin(), lru_, it->second.second);
    return it->second.first;
  }
  std::string path = full_path(file);
  int fd = ::open(path.c_str(), O_RDWR | O_APPEND | O_CLOEXEC);
  if (fd < 0 && errno == ENOENT && create) {
    std::error_code ec;
    fs::create_directories(fs::path(path).parent_path(), ec);
    fd = ::open(path.c_str(), O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd >= 0) new_files_.insert(file);
  }
  if (fd < 0) {
    *errno_out = errno;
    return nullptr;
  }
  auto f = std::make_shared<OpenFile>(fd);
  lru_.push_front(file);
  open_.emplace(file, std::make_pair(f, lru_.begin()));
  while (open_.size() > options_.open_files_max) {
    open_.erase(lru_.back());  // an fd still in use stays open until its last user drops it
    lru_.pop_back();
  }
  return f;
}

void Disk::forget(const std::string& file) {
  std::lock_guard lock(files_mutex_);
  auto it = open_.find(file);
  if (it == open_.end()) return;
  lru_.erase(it->second.second);
  open_.erase(it);
}

Result<Bytes> Disk::read(const std::string& file, uint64_t pos, uint64_t len) {
  Bytes out;
  if (auto st = read_into(file, pos, len, &out); !st.ok()) return st.error();
  return out;
}

Status Disk::read_into(const std::string& file, uint64_t pos, uint64_t len, Bytes* out) {
  int err = 0;
  auto f = handle(file, /*create=*/false, &err);
  if (!f) {
    return make_error(err == ENOENT ? Errc::not_found : Errc::io,
                      "cannot open " + file + ": " + errno_text(err));
  }
  out->resize(len);  // zeroes only what it grows by: a buffer read into again is reused as is
  uint64_t done = 0;
  while (done < len) {
    ssize_t n = ::pread(f->fd, out->data() + done, len - done, static_cast<off_t>(pos + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return make_error(Errc::io, "read of " + file + " failed: " + errno_text(errno));
    }
    if (n == 0) {
      return make_error(Errc::truncated, file + " ends at " + std::to_string(pos + done) +
                                             ", before " + std::to_string(pos + len));
    }
    done += static_cast<uint64_t>(n);
  }
  LogIndex at;
  if (parse_checkpoint_file(file, &at))
    checkpoint_bytes_read_.fetch_add(len, std::memory_order_relaxed);
  return ok_status();
}

void Disk::wait_idle() {
  std::unique_lock lock(queue_mutex_);
  queue_cv_.wait(lock, [&] { return queue_.empty() && !busy_; });
}

Status Disk::truncate(const std::string& file, uint64_t size_bytes) {
  wait_idle();
  int err = 0;
  auto f = handle(file, /*create=*/false, &err);
  if (!f) return make_error(Errc::io, "cannot open " + file + ": " + errno_text(err));
  if (::ftruncate(f->fd, static_cast<off_t>(size_bytes)) != 0 || ::fdatasync(f->fd) != 0) {
    return make_error(Errc::io, "truncate of " + file + " failed: " + errno_text(errno));
  }
  return ok_status();
}

Status Disk::remove(const std::string& file) {
  if (!valid_file_name(file)) return make_error(Errc::io, "bad file name " + file);
  wait_idle();
  forget(file);
  {
    std::lock_guard lock(files_mutex_);
    failed_.erase(file);
    new_files_.erase(file);
  }
  std::string path = full_path(file);
  if (::unlink(path.c_str()) != 0) {
    int err = errno;
    return make_error(err == ENOENT ? Errc::not_found : Errc::io,
                      "remove of " + file + " failed: " + errno_text(err));
  }
  if (!fsync_dir(fs::path(path).parent_path().string())) {
    return make_error(Errc::io, "fsync of the folder of " + file + " failed");
  }
  return ok_status();
}

Status Disk::rename(const std::string& from, const std::string& to) {
  if (!valid_file_name(from) || !valid_file_name(to))
    return make_error(Errc::io, "bad file name " + from + " or " + to);
  wait_idle();
  forget(from);
  forget(to);
  {
    std::lock_guard lock(files_mutex_);
    failed_.erase(to);
    new_files_.erase(from);
    new_files_.erase(to);
  }
  fs::path src = full_path(from), dst = full_path(to);
  std::error_code ec;
  bool made = fs::create_directories(dst.parent_path(), ec);
  if (ec) return make_error(Errc::io, "cannot create the folder of " + to + ": " + ec.message());
  if (::rename(src.c_str(), dst.c_str()) != 0) {
    int err = errno;
    return make_error(err == ENOENT ? Errc::not_found : Errc::io,
                      "rename of " + from + " failed: " + errno_text(err));
  }
  bool synced = fsync_dir(dst.parent_path().string()) && fsync_dir(src.parent_path().string());
  if (made) synced = synced && fsync_dir(dst.parent_path().parent_path().string());
  if (!synced) return make_error(Errc::io, "fsync of the folders of " + to + " failed");
  return ok_status();
}

void Disk::stop() {
  {
    std::lock_guard lock(queue_mutex_);
    stopping_ = true;
  }
  queue_cv_.notify_all();
  if (writer_.joinable()) writer_.join();
  {
    std::lock_guard lock(sync_mutex_);
    helpers_stopping_ = true;
  }
  sync_cv_.notify_all();
  for (auto& t : helpers_) t.join();
  helpers_.clear();
  for (auto& f : forked_) {
    {
      std::lock_guard lock(f->mutex);
      if (!f->exited) {
        f->killed = true;
        ::kill(f->pid, SIGKILL);  // still a live process or a zombie: the pid is its own
      }
    }
    f->waiter.join();
    // Killed here, or before: the copy dies with the node thread, which stops first.
    if (f->killed || !f->ok) ::unlink(f->path.c_str());
  }
  forked_.clear();
}

}  // namespace queen::real
