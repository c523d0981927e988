// Retention and store checkpoints on the real binary, as a client sees them: a queue with
// retentionSeconds loses its old messages (consumed or not) while new ones stay; the data
// folder keeps a store checkpoint and sheds log files; a restart brings back exactly what
// was kept, and a retried push of a removed message is still recognised as a duplicate.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "tests/server/api_helpers.h"
#include "tests/server/harness.h"

namespace queen::test {
namespace {

using std::chrono::milliseconds;
namespace fs = std::filesystem;

size_t count_files(const std::string& dir, const std::string& prefix) {
  size_t n = 0;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (it->is_regular_file() && it->path().filename().string().starts_with(prefix)) ++n;
  return n;
}

json queue_view(HttpClient& c, const std::string& q) {
  HttpResult r = c.get("/api/v1/resources/queues/" + q);
  EXPECT_EQ(r.status, 200) << r.body;
  return r.body_json();
}

TEST(RetentionServer, OldMessagesGoNewOnesStayAndARestartKeepsExactlyThat) {
  TempDir dir;
  std::string data = dir.path() + "/data";
  ServerProcess server(data, dir.path() + "/server.log",
                       {{"RETENTION_INTERVAL", "100"},
                        {"QUEEN_RAFT_DURABLE_EVERY_MS", "100"},
                        {"QUEEN_RAFT_SEGMENT_BYTES", "4096"},
                        {"QUEEN_RAFT_TXN_WINDOW_MIN_S", "1"}});
  std::string error;
  ASSERT_TRUE(server.start(&error)) << error;
  HttpClient c(server.port());
  const std::string q = "retained";
  // The files go once the append rows do: after the dedup window too.
  ASSERT_EQ(
      configure(c, q,
                {{"retentionEnabled", true}, {"retentionSeconds", 2}, {"dedupWindowSeconds", 1}})
          .status,
      200);
  // A queue with the default dedup window (an hour) keeps its removed messages' ids.
  const std::string windowed = "windowed";
  ASSERT_EQ(configure(c, windowed, {{"retentionEnabled", true}, {"retentionSeconds", 2}}).status,
            200);
  std::string big(1500, 'x');
  for (int i = 0; i < 8; ++i)
    ASSERT_EQ(push(c, {{q, "", "old-" + std::to_string(i), big}}).status, 201);
  ASSERT_EQ(push(c, {{windowed, "", "w-0", big}}).status, 201);
  // Gone once two seconds old, consumed or not.
  EXPECT_TRUE(eventually(milliseconds(15000), [&] {
    return queue_view(c, q)["messages"]["total"] == 0 &&
           queue_view(c, windowed)["messages"]["total"] == 0;
  })) << queue_view(c, q).dump();
  // The store is checkpointed and the files that held the old payloads are gone.
  // (The queue is the data folder's first: its log is qlog/q1.)
  const std::string first_file = data + "/qlog/q1/r00000001.qlog";
  EXPECT_TRUE(
      eventually(milliseconds(10000),
                 [&] { return count_files(data, "ckpt.") >= 1 && !fs::exists(first_file); }))
      << "checkpoints " << count_files(data, "ckpt.") << ", " << first_file << " still there";
  const std::string kept = "kept";
  ASSERT_EQ(push(c, {{kept, "", "keep-0", big}}).status, 201);
  ASSERT_EQ(server.stop(), 0);
  ASSERT_TRUE(server.start(&error)) << error;
  HttpClient again(server.port());
  // What retention removed stays removed; what it did not is all there.
  EXPECT_EQ(pop(again, {.queue = q, .batch = 10}).status, 204);
  HttpResult got = pop(again, {.queue = kept, .batch = 10});
  ASSERT_EQ(got.status, 200) << got.body;
  json msgs = got.body_json()["messages"];
  ASSERT_EQ(msgs.size(), 1u) << got.body;
  EXPECT_EQ(msgs[0]["transactionId"], "keep-0");
  // A retried push of a removed message is still inside its dedup window.
  HttpResult dup = push(again, {{windowed, "", "w-0", big}});
  ASSERT_EQ(dup.status, 201) << dup.body;
  EXPECT_EQ(dup.body_json()[0]["status"], "duplicate") << dup.body;
}

}  // namespace
}  // namespace queen::test
