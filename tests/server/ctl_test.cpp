// queenctl against the real `queen` binary: what it prints, what lands on the node, and the
// exit codes a script reads (0 ok, 1 the node refused, 2 bad usage, 3 no answer, 4 not found).
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/server/api_helpers.h"
#include "tests/server/harness.h"
#include "tests/server/shared_node.h"

#ifndef QUEENCTL_BINARY
#error "QUEENCTL_BINARY must name the queenctl executable"
#endif

namespace queen::test {
namespace {

using std::chrono::seconds;

struct CtlResult {
  int rc = -1;
  std::string out, err;
};

std::string quoted(const std::string& arg) {
  std::string q = "'";
  for (char c : arg) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) out.push_back(line);
  return out;
}

class CtlTest : public SharedNodeTest {
 protected:
  static constexpr int kRunSecondsMax = 30;

  std::string url() const { return "http://127.0.0.1:" + std::to_string(server_->port()); }

  // Runs queenctl with `args` (and `input` on its stdin) against the shared node.
  CtlResult ctl(const std::vector<std::string>& args, const std::string& input = "") {
    std::string base = dir_->path() + "/ctl";
    { std::ofstream(base + ".in") << input; }
    // A run that hangs (a tail that never sees its messages) fails at the deadline instead.
    std::string cmd = "QUEEN_URL=" + quoted(url()) + " timeout " + std::to_string(kRunSecondsMax) +
                      " " + quoted(QUEENCTL_BINARY);
    for (const std::string& a : args) cmd += " " + quoted(a);
    cmd += " <" + base + ".in >" + base + ".out 2>" + base + ".err";
    int status = std::system(cmd.c_str());
    CtlResult r;
    r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = slurp(base + ".out");
    r.err = slurp(base + ".err");
    return r;
  }

  // Every payload the queue holds, read as a consumer group from the start.
  std::multiset<std::string> payloads(const std::string& queue) {
    std::vector<json> got;
    std::string error;
    EXPECT_TRUE(drain(*client_, queue, "check-" + queue, &got, &error)) << error;
    std::multiset<std::string> out;
    for (const json& m : got) out.insert(m["data"].dump());
    return out;
  }
};

TEST_F(CtlTest, ExitCodesTellAScriptWhatHappened) {
  CtlResult h = ctl({"health"});
  EXPECT_EQ(h.rc, 0) << h.err;
  EXPECT_NE(h.out.find("healthy"), std::string::npos) << h.out;
  EXPECT_EQ(ctl({"--url", "http://127.0.0.1:1", "health"}).rc, 3);
  EXPECT_EQ(ctl({"frobnicate"}).rc, 2);
  EXPECT_EQ(ctl({"queues", "--limit"}).rc, 2);
  EXPECT_EQ(ctl({"queues", "--colour", "red"}).rc, 2);
  EXPECT_EQ(ctl({"--url", "https://example.invalid", "health"}).rc, 2);
  CtlResult missing = ctl({"queue", unique_name("-missing")});
  EXPECT_EQ(missing.rc, 4);
  EXPECT_NE(missing.err.find("404"), std::string::npos) << missing.err;
  EXPECT_EQ(ctl({"push", unique_name(), "--file", "/nonexistent/file"}).rc, 2);
  EXPECT_EQ(ctl({"push", unique_name(), "1", "--batch", "0"}).rc, 2);
}

TEST_F(CtlTest, PushFromArgumentsAFileAndStdinLandsEveryMessageOnce) {
  std::string q = unique_name();
  CtlResult args = ctl({"push", q, R"({"n":-1})", "plain text", "7"});
  ASSERT_EQ(args.rc, 0) << args.err;
  EXPECT_NE(args.out.find("pushed 3 to " + q), std::string::npos) << args.out;
  std::string file = dir_->path() + "/messages.ndjson";
  std::multiset<std::string> want = {R"({"n":-1})", R"("plain text")", "7"};
  {
    std::ofstream out(file);
    for (int i = 0; i < 1200; ++i) {
      out << "{\"n\":" << i << "}\n";
      want.insert("{\"n\":" + std::to_string(i) + "}");
    }
  }
  CtlResult from_file = ctl({"push", q, "--file", file, "--batch", "250", "--progress"});
  ASSERT_EQ(from_file.rc, 0) << from_file.err;
  EXPECT_NE(from_file.out.find("pushed 1200"), std::string::npos) << from_file.out;
  EXPECT_NE(from_file.err.find("100.0%"), std::string::npos) << "a progress bar: " << from_file.err;
  CtlResult from_stdin = ctl({"push", q, "--file", "-"}, "\"a\"\n\"b\"\n");
  ASSERT_EQ(from_stdin.rc, 0) << from_stdin.err;
  want.insert({R"("a")", R"("b")"});
  EXPECT_EQ(payloads(q), want);
}

TEST_F(CtlTest, PopPrintsTheMessagesAndAcksThem) {
  std::string q = unique_name();
  ASSERT_EQ(ctl({"push", q, R"({"k":1})", R"({"k":2})"}).rc, 0);
  CtlResult popped = ctl({"pop", q, "--batch", "10", "--ack"});
  ASSERT_EQ(popped.rc, 0) << popped.err;
  EXPECT_NE(popped.out.find(R"({"k":1})"), std::string::npos) << popped.out;
  EXPECT_NE(popped.out.find(R"({"k":2})"), std::string::npos) << popped.out;
  EXPECT_EQ(lines_of(popped.out).size(), 3u) << "a header and two rows: " << popped.out;
  CtlResult again = ctl({"pop", q, "--json"});
  ASSERT_EQ(again.rc, 0) << again.err;
  EXPECT_EQ(json::parse(again.out)["messages"].size(), 0u) << "both were acked";
}

TEST_F(CtlTest, TailFollowsNewMessagesUntilItsCount) {
  std::string q = unique_name();
  ASSERT_EQ(ctl({"push", q, R"("before")"}).rc, 0);  // not new when the tail starts
  CtlResult tailed;
  std::thread tail([&] { tailed = ctl({"tail", "-f", q, "--count", "2", "--json"}); });
  // The tail's group exists once its first pop reached the node.
  bool subscribed = eventually(seconds(10), [&] {
    json groups = client_->get("/api/v1/consumer-groups").body_json();
    for (const json& g : groups)
      if (g["name"] == "queenctl-tail" && g["queueName"] == q) return true;
    return false;
  });
  EXPECT_TRUE(subscribed);
  ASSERT_EQ(ctl({"push", q, R"("one")", R"("two")"}).rc, 0);
  tail.join();
  ASSERT_EQ(tailed.rc, 0) << tailed.err;
  std::vector<std::string> lines = lines_of(tailed.out);
  ASSERT_EQ(lines.size(), 2u) << tailed.out;
  EXPECT_EQ(json::parse(lines[0])["data"], "one");
  EXPECT_EQ(json::parse(lines[1])["data"], "two");
}

TEST_F(CtlTest, DeadLettersAreListedAndReplayed) {
  std::string q = unique_name();
  ASSERT_EQ(push(*client_, {{q, "", "", "doomed"}}).status, 201);
  HttpResult popped = pop(*client_, {.queue = q});
  ASSERT_EQ(popped.status, 200) << popped.body;
  ASSERT_EQ(ack(*client_, popped.body_json()["messages"][0], "dlq").status, 200);
  CtlResult listed = ctl({"dlq", "--queue", q, "--json"});
  ASSERT_EQ(listed.rc, 0) << listed.err;
  EXPECT_EQ(json::parse(listed.out)["messages"].size(), 1u) << listed.out;
  CtlResult table = ctl({"dlq", "--queue", q});
  EXPECT_NE(table.out.find(q), std::string::npos) << table.out;
  CtlResult replayed = ctl({"replay", "--all", "--queue", q});
  ASSERT_EQ(replayed.rc, 0) << replayed.err;
  EXPECT_NE(replayed.out.find("replayed"), std::string::npos) << replayed.out;
  EXPECT_EQ(json::parse(ctl({"dlq", "--queue", q, "--json"}).out)["messages"].size(), 0u);
  HttpResult again = pop(*client_, {.queue = q});
  ASSERT_EQ(again.status, 200) << "the replayed message is delivered again";
  EXPECT_EQ(again.body_json()["messages"][0]["data"], "doomed");
  EXPECT_EQ(ctl({"replay", "999999999"}).rc, 4);
}

TEST_F(CtlTest, KvPutGetAndDelete) {
  std::string ns = "ctl-kv";  // namespaces are lower case
  ASSERT_EQ(ctl({"kv", "put", ns, "k", R"({"v":[1,2]})"}).rc, 0);
  CtlResult got = ctl({"kv", "get", ns, "k"});
  ASSERT_EQ(got.rc, 0) << got.err;
  EXPECT_EQ(json::parse(got.out), json::parse(R"({"v":[1,2]})"));
  ASSERT_EQ(ctl({"kv", "del", ns, "k"}).rc, 0);
  EXPECT_EQ(ctl({"kv", "get", ns, "k"}).rc, 4);
  EXPECT_EQ(ctl({"kv", "get", ns}).rc, 2);
  CtlResult bad = ctl({"kv", "put", "Upper", "k", "1"});
  EXPECT_EQ(bad.rc, 1);
  EXPECT_NE(bad.err.find("400"), std::string::npos) << bad.err;
}

TEST_F(CtlTest, ListingsAreTablesOrTheNodesJson) {
  std::string q = unique_name();
  ASSERT_EQ(ctl({"push", q, "1", "--partition", "p1"}).rc, 0);
  ASSERT_EQ(ctl({"push", q, "2", "--partition", "p2"}).rc, 0);
  CtlResult table = ctl({"queues", "--search", q});
  ASSERT_EQ(table.rc, 0) << table.err;
  std::vector<std::string> lines = lines_of(table.out);
  ASSERT_EQ(lines.size(), 3u) << table.out;  // header, the queue, the page footer
  EXPECT_EQ(lines[1].rfind(q, 0), 0u) << lines[1];
  EXPECT_EQ(lines[2], "(1-1 of 1)");
  CtlResult detail = ctl({"queue", q, "--json", "--limit", "1", "--offset", "1"});
  ASSERT_EQ(detail.rc, 0) << detail.err;
  json page = json::parse(detail.out);
  ASSERT_EQ(page["partitions"].size(), 1u);
  EXPECT_EQ(page["partitions"][0]["name"], "p2");
  EXPECT_EQ(page["pagination"]["total"], 2);
  CtlResult status = ctl({"status", "--json"});
  ASSERT_EQ(status.rc, 0) << status.err;
  EXPECT_GE(json::parse(status.out)["queues"].get<int>(), 1);
}

}  // namespace
}  // namespace queen::test
