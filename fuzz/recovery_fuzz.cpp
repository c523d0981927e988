// Fuzz target: crash recovery over damaged log files. The input is split into a few files of
// the system log and two queue logs; recovery must never crash, must cut what it cannot
// trust, and must be idempotent: a second recovery over what the first left finds the same
// state and cuts nothing more, and one from a checkpoint of that state (skipping the files
// below it) replays and cuts nothing.
#include <cstddef>
#include <cstdint>
#include <map>

#include "core/common/assert.h"
#include "core/qlog/log.h"

namespace {

class FuzzEnv : public queen::Env {
 public:
  std::map<std::string, queen::Bytes> files;
  int64_t now_us() override { return 1; }
  uint64_t random_u64() override { return 4; }
  void set_timer(queen::TimerId, int64_t) override {}
  void append(const std::string& f, queen::Bytes d) override {
    files[f].insert(files[f].end(), d.begin(), d.end());
  }
  void sync(const std::string&, uint64_t) override {}
  queen::Result<queen::Bytes> read(const std::string& f, uint64_t pos, uint64_t len) override {
    auto& b = files[f];
    if (pos + len > b.size()) return queen::make_error(queen::Errc::io, "short read");
    return queen::Bytes(b.begin() + pos, b.begin() + pos + len);
  }
  queen::Status truncate(const std::string& f, uint64_t size) override {
    files[f].resize(size);
    return queen::ok_status();
  }
  queen::Status remove(const std::string& f) override {
    files.erase(f);
    return queen::ok_status();
  }
  queen::Result<std::vector<queen::FileInfo>> list_files() override { return list(); }
  queen::Status rename(const std::string& from, const std::string& to) override {
    files[to] = files[from];
    files.erase(from);
    return queen::ok_status();
  }
  void reply(queen::ReplyHandle, queen::Reply) override {}
  void fatal(std::string_view) override {}
  void log(queen::LogLevel, std::string_view) override {}
  std::vector<queen::FileInfo> list() const {
    std::vector<queen::FileInfo> out;
    for (const auto& [n, b] : files) out.push_back({n, b.size()});
    return out;
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace queen;
  FuzzEnv env;
  const char* names[] = {"qlog/q0/r00000001.qlog", "qlog/q1/r00000001.qlog",
                         "qlog/q1/r00000002.qlog", "qlog/q2/r00000001.qlog"};
  size_t part = size / 4 + 1;
  for (size_t i = 0; i < 4 && i * part < size; ++i) {
    size_t n = std::min(part, size - i * part);
    env.files[names[i]].assign(data + i * part, data + i * part + n);
  }
  Store store;
  Outputs unused;  // recovery writes through the Env (the start-up scan), not the writer
  LogWriter writer(unused, 1 << 20);
  RecoveryStats stats;
  if (!recover(env, env.list(), RecoveryOptions{}, &store, &writer, &stats).ok()) return 0;
  Store again;
  LogWriter writer2(unused, 1 << 20);
  RecoveryStats stats2;
  QUEEN_ASSERT(recover(env, env.list(), RecoveryOptions{}, &again, &writer2, &stats2).ok(),
               "second recovery failed");
  QUEEN_ASSERT(stats2.entries_replayed == stats.entries_replayed, "recovery not idempotent");
  QUEEN_ASSERT(stats2.torn_tails_cut == 0 && stats2.entries_cut == 0, "second recovery cut");
  // A single node's restart from a checkpoint of what the first recovery applied: files below
  // it may be left unread, and nothing is replayed or cut.
  Store from_checkpoint = store;
  LogWriter writer3(unused, 1 << 20);
  RecoveryStats stats3;
  RecoveryOptions skip;
  skip.skip_below_store = true;
  QUEEN_ASSERT(recover(env, env.list(), skip, &from_checkpoint, &writer3, &stats3).ok(),
               "recovery from a checkpoint failed");
  QUEEN_ASSERT(stats3.entries_replayed == 0 && stats3.entries_cut == 0 &&
                   stats3.torn_tails_cut == 0,
               "recovery from a checkpoint replayed or cut");
  QUEEN_ASSERT(from_checkpoint == store, "recovery from a checkpoint changed the store");
  return 0;
}
