// The real disk's whole-file writes (io/real/disk.h): a file encoded by a forked copy of
// the process from memory as it was at the call, reported durable once written and
// fdatasync'd, without holding up the caller; a file expected small written from the caller's
// thread instead, in pieces; failures reported as ok=false; and a copy still running at
// stop() killed with its unfinished file removed.
#include "io/real/disk.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

namespace queen::test {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

void put_text(ByteSink& sink, const std::string& text) {
  sink.put(reinterpret_cast<const uint8_t*>(text.data()), text.size());
}

// A producer that writes `text` (read when it runs).
Env::FileProducer writes(const std::string& text) {
  return [text](ByteSink& sink) { put_text(sink, text); };
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Polls for a file with a deadline; true once it exists.
bool wait_for_file(const fs::path& path, std::chrono::milliseconds limit) {
  auto until = std::chrono::steady_clock::now() + limit;
  while (!fs::exists(path)) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(2ms);
  }
  return true;
}

class DiskTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("queen-disk-test-" + std::to_string(::getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
  }
  void TearDown() override {
    if (disk_) disk_->stop();
    fs::remove_all(root_);
  }

  real::Disk& open(bool fork_whole_files = true) {
    real::DiskOptions options{.root = root_.string(), .fork_whole_files = fork_whole_files};
    disk_ = std::make_unique<real::Disk>(options, [this](uint64_t token, bool ok) {
      std::lock_guard lock(mutex_);
      done_[token] = ok;
      ++reports_[token];
      cv_.notify_all();
    });
    EXPECT_TRUE(disk_->open().ok());
    return *disk_;
  }

  // The reported outcome of `token`, or nothing within the deadline.
  std::optional<bool> outcome(uint64_t token, std::chrono::milliseconds limit = 20s) {
    std::unique_lock lock(mutex_);
    if (!cv_.wait_for(lock, limit, [&] { return done_.count(token) > 0; })) return std::nullopt;
    return done_[token];
  }

  // write_whole of a producer reading a string the caller changes right after the call:
  // the file holds the string as it was at the call.
  void expect_state_at_the_call(real::Disk& disk, const std::string& file, uint64_t token) {
    std::string state = "as at the call";
    disk.write_whole(
        file, [&state](ByteSink& sink) { put_text(sink, state); }, token);
    state = "changed after the call";
    ASSERT_EQ(outcome(token), std::optional<bool>(true));
    EXPECT_EQ(read_text(root_ / file), "as at the call");
  }

  size_t reported() {
    std::lock_guard lock(mutex_);
    return done_.size();
  }

  fs::path root_;
  std::unique_ptr<real::Disk> disk_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::map<uint64_t, bool> done_;
  std::map<uint64_t, int> reports_;  // how many times each token was reported
};

TEST_F(DiskTest, AWholeFileHoldsTheStateAtTheCallAndIsReportedDurable) {
  real::Disk& disk = open();
  expect_state_at_the_call(disk, "store/ckpt.1", 7);
  auto size = disk.file_size("store/ckpt.1");
  ASSERT_TRUE(size.ok());
  EXPECT_EQ(size.value(), std::string("as at the call").size());
  auto read = disk.read("store/ckpt.1", 3, 2);
  ASSERT_TRUE(read.ok());
  EXPECT_EQ(std::string(read.value().begin(), read.value().end()), "at");
}

// read_into reads into the caller's buffer, resized to what it asked for (a reader of many
// pieces reuses one buffer); a read past the file's end is refused, not cut short.
TEST_F(DiskTest, ReadIntoFillsTheCallersBufferAndRefusesAShortRead) {
  real::Disk& disk = open();
  std::string text;
  for (int i = 0; i < 300'000; ++i) text += static_cast<char>('a' + i % 26);
  disk.write_whole("store/ckpt.2", writes(text), 3);
  ASSERT_EQ(outcome(3), std::optional<bool>(true));
  Bytes buf(5, 'x');
  ASSERT_TRUE(disk.read_into("store/ckpt.2", 100'000, 200'000, &buf).ok());
  EXPECT_EQ(std::string(buf.begin(), buf.end()), text.substr(100'000, 200'000));
  ASSERT_TRUE(disk.read_into("store/ckpt.2", 26, 3, &buf).ok());
  EXPECT_EQ(std::string(buf.begin(), buf.end()), "abc");
  auto past = disk.read_into("store/ckpt.2", 299'999, 2, &buf);
  ASSERT_FALSE(past.ok());
  EXPECT_EQ(past.error().code, Errc::truncated);
  EXPECT_EQ(disk.read_into("store/none", 0, 1, &buf).error().code, Errc::not_found);
}

// The producer waits for a file that the caller creates only after write_whole returned:
// had it run on the caller's thread, it would have given up and written "not forked".
TEST_F(DiskTest, TheCallerGoesOnWhileTheCopyProduces) {
  real::Disk& disk = open();
  fs::path go = root_ / "go";
  disk.write_whole(
      "big", [go](ByteSink& sink) { put_text(sink, wait_for_file(go, 10s) ? "forked" : "not"); },
      1);
  std::ofstream(go).put('x');
  ASSERT_EQ(outcome(1), std::optional<bool>(true));
  EXPECT_EQ(read_text(root_ / "big"), "forked");
}

// Pieces of any size, past several chunks of writeback, arrive whole and in order.
TEST_F(DiskTest, AFileWrittenInManyPiecesArrivesWhole) {
  real::Disk& disk = open();
  std::string expected;
  for (size_t i = 0; expected.size() < (3u << 20) + 5; ++i)
    expected += std::string(1 + (i * 7919) % 70000, static_cast<char>('a' + i % 26));
  disk.write_whole(
      "pieces",
      [&expected](ByteSink& sink) {
        for (size_t at = 0, i = 0; at < expected.size(); ++i) {
          size_t n = std::min(expected.size() - at, 1 + (i * 104729) % 300000);
          sink.put(reinterpret_cast<const uint8_t*>(expected.data()) + at, n);
          at += n;
        }
      },
      2);
  ASSERT_EQ(outcome(2), std::optional<bool>(true));
  EXPECT_TRUE(read_text(root_ / "pieces") == expected);
}

// A file expected small is produced before write_whole returns (a forked copy would set its
// own copy of `ran`); it goes to the writer in pieces, which arrive whole and in order, and
// replaces what a file of that name held before.
TEST_F(DiskTest, AFileExpectedSmallIsWrittenOnTheCallersThread) {
  real::Disk& disk = open();
  std::ofstream(root_ / "small") << std::string(5u << 20, 'x');
  std::string expected;
  for (size_t i = 0; expected.size() < (3u << 20) + 5; ++i)
    expected += std::string(1 + (i * 7919) % 70000, static_cast<char>('a' + i % 26));
  bool ran = false;
  disk.write_whole(
      "small",
      [&expected, &ran](ByteSink& sink) {
        ran = true;
        for (size_t at = 0, i = 0; at < expected.size(); ++i) {
          size_t n = std::min(expected.size() - at, 1 + (i * 104729) % 300000);
          sink.put(reinterpret_cast<const uint8_t*>(expected.data()) + at, n);
          at += n;
        }
      },
      3, /*expected_bytes=*/1000);
  EXPECT_TRUE(ran);
  ASSERT_EQ(outcome(3), std::optional<bool>(true));
  EXPECT_TRUE(read_text(root_ / "small") == expected);
  disk.write_whole("empty", writes(""), 4, 0);
  ASSERT_EQ(outcome(4), std::optional<bool>(true));
  EXPECT_TRUE(fs::exists(root_ / "empty"));
}

TEST_F(DiskTest, WithoutForkTheFileIsWrittenOnTheCallersThread) {
  expect_state_at_the_call(open(/*fork_whole_files=*/false), "store/ckpt.2", 3);
}

TEST_F(DiskTest, AFileThatCannotBeWrittenIsReportedNotDurable) {
  real::Disk& disk = open();
  fs::create_directories(root_ / "taken");  // a folder where the file should go
  disk.write_whole("taken", writes("x"), 5);
  EXPECT_EQ(outcome(5), std::optional<bool>(false));
  std::ofstream(root_ / "plain").put('x');  // a file where a folder should be
  disk.write_whole("plain/ckpt", writes("x"), 6);
  EXPECT_EQ(outcome(6), std::optional<bool>(false));
}

// Appends and syncs of several files queued back to back (the writer takes them in batches
// and shares fdatasyncs): every sync is reported, each file holds its appends in call order,
// and a file that cannot be written fails its syncs without failing the others'.
TEST_F(DiskTest, InterleavedSyncsOfSeveralFilesAreEachReported) {
  real::Disk& disk = open();
  std::ofstream(root_ / "plain").put('x');  // a file where a folder should be
  std::map<std::string, std::string> expected;
  const char* files[] = {"log/a", "log/b", "plain/c"};
  uint64_t token = 100;
  for (int i = 0; i < 300; ++i) {
    std::string file = files[i % 3], piece = std::to_string(i) + ";";
    disk.append(file, Bytes(piece.begin(), piece.end()));
    expected[file] += piece;
    if (i % 2 == 0) disk.sync(file, token++);
  }
  auto deadline = std::chrono::steady_clock::now() + 20s;
  for (uint64_t t = 100; t < token; ++t) {
    // Syncs alternate over the files as the appends do: every third one is of plain/c.
    bool broken = std::string(files[(t - 100) * 2 % 3]) == "plain/c";
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    EXPECT_EQ(outcome(t, std::max(left, 0ms)), std::optional<bool>(!broken)) << "token " << t;
  }
  EXPECT_EQ(read_text(root_ / "log/a"), expected["log/a"]);
  EXPECT_EQ(read_text(root_ / "log/b"), expected["log/b"]);
}

// Syncs of more files than the writer and its sync helpers, in batches: each file's fdatasync
// runs on one of them, and every sync is reported once, after its file's appends.
TEST_F(DiskTest, SyncsOfManyFilesInABatchAreEachReportedOnce) {
  real::Disk& disk = open();
  constexpr int kFiles = 13, kRounds = 40;
  std::map<std::string, std::string> expected;
  uint64_t token = 1;
  for (int round = 0; round < kRounds; ++round) {
    for (int f = 0; f < kFiles; ++f) {
      std::string file = "log/f" + std::to_string(f), piece = std::to_string(round) + ";";
      disk.append(file, Bytes(piece.begin(), piece.end()));
      expected[file] += piece;
      disk.sync(file, token++);
    }
  }
  for (uint64_t t = 1; t < token; ++t)
    ASSERT_EQ(outcome(t), std::optional<bool>(true)) << "token " << t;
  disk.stop();
  for (uint64_t t = 1; t < token; ++t) EXPECT_EQ(reports_[t], 1) << "token " << t;
  for (const auto& [file, text] : expected) EXPECT_EQ(read_text(root_ / file), text) << file;
}

TEST_F(DiskTest, StopKillsAnUnfinishedCopyAndRemovesItsFile) {
  real::Disk& disk = open();
  fs::path file = root_ / "store/ckpt.3", never = root_ / "never";
  disk.write_whole(
      "store/ckpt.3",
      [never](ByteSink& sink) {
        put_text(sink, "the first part");  // then torn midway
        wait_for_file(never, 60s);
        put_text(sink, "too late");
      },
      9);
  ASSERT_TRUE(wait_for_file(file, 10s));
  auto started = std::chrono::steady_clock::now();
  disk.stop();
  EXPECT_LT(std::chrono::steady_clock::now() - started, 30s);
  EXPECT_FALSE(fs::exists(file));
  EXPECT_EQ(reported(), 0u);
}

// A copy killed from outside (it dies with the node thread, which stops before the disk)
// is reported not durable, and stop() removes its torn file.
TEST_F(DiskTest, ACopyThatDiesIsReportedAndItsTornFileRemovedAtStop) {
  real::Disk& disk = open();
  disk.write_whole(
      "store/ckpt.4",
      [](ByteSink& sink) {
        put_text(sink, "the first part");
        ::raise(SIGKILL);
      },
      4);
  EXPECT_EQ(outcome(4), std::optional<bool>(false));
  EXPECT_TRUE(fs::exists(root_ / "store/ckpt.4"));
  disk.stop();
  EXPECT_FALSE(fs::exists(root_ / "store/ckpt.4"));
}

}  // namespace
}  // namespace queen::test
