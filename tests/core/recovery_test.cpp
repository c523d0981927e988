// Crash recovery: every answered write is back, torn tails are cut, entries incomplete in any
// log they touch are never replayed.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "core/qlog/log.h"
#include "tests/core/mem_env.h"

namespace queen::testing {
namespace {

TEST(Recovery, RestartKeepsQueuesOffsetsPayloadsAndCursors) {
  Harness h;
  h.push("q", "p", {"a", "b", "c"});
  PopReply r = h.pop("q", "g", 1);
  h.ack(r.messages[0], "g", AckStatus::completed, r.lease_id);
  h.env.crash();
  h.restart();
  const PartitionState* p = h.node().store().partition("q", "p");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->next_offset, Offset(3));
  auto msgs = h.node().read_messages(p->id, Offset(0), 10);
  ASSERT_TRUE(msgs.ok());
  ASSERT_EQ(msgs.value().size(), 3u);
  EXPECT_EQ(msgs.value()[1].payload, "{\"t\":\"b\"}");
  EXPECT_EQ(h.node().store().cursor("g", p->id)->next, Offset(1));
  PopReply after = h.pop("q", "g", 5);
  ASSERT_EQ(after.messages.size(), 2u);
  EXPECT_EQ(after.messages[0].transaction_id, "b");
  // New pushes continue the offsets.
  EXPECT_EQ(h.push("q", "p", {"d"}).results[0].offset, Offset(3));
}

TEST(Recovery, LeaseSurvivesARestartUntilItExpires) {
  Harness h;
  h.push("q", "p", {"a"});
  PopReply r = h.pop("q", "g", 1);
  ASSERT_EQ(r.messages.size(), 1u);
  h.env.crash();
  h.restart();
  EXPECT_TRUE(h.pop("q", "g", 1).messages.empty());
  EXPECT_TRUE(h.ack(r.messages[0], "g", AckStatus::completed, r.lease_id).success);
}

TEST(Recovery, UnsyncedEntryIsDroppedAndNeverAnswered) {
  Harness h;
  h.push("q", "p", {"a"});
  h.env.hold_syncs = true;
  ReplyHandle hd = h.send(h.push_cmd("q", "p", {"b"}));
  h.env.run();
  EXPECT_FALSE(h.take(hd).has_value());
  h.env.crash();
  h.env.hold_syncs = false;
  h.restart();
  EXPECT_EQ(h.node().store().partition("q", "p")->next_offset, Offset(1));
  EXPECT_EQ(h.push("q", "p", {"c"}).results[0].offset, Offset(1));
}

TEST(Recovery, TornTailIsCutAndLaterWritesContinueCleanly) {
  Harness h;
  h.push("q", "p", {"a"});
  std::string file = log_file_name(LogId(1), 1);
  ASSERT_TRUE(h.env.files.contains(file));
  size_t good = h.env.files[file].size();
  h.env.files[file].insert(h.env.files[file].end(), {1, 2, 3, 4, 5, 6, 7});
  h.restart();
  EXPECT_EQ(h.env.files[file].size(), good);
  EXPECT_EQ(h.node().stats().torn_tails_cut, 1u);
  EXPECT_EQ(h.push("q", "p", {"b"}).results[0].offset, Offset(1));
  h.restart();
  EXPECT_EQ(h.node().store().partition("q", "p")->next_offset, Offset(2));
}

TEST(Recovery, EntryMissingFromOneOfItsLogsIsNotReplayedAndIsCutEverywhere) {
  Harness h;
  h.push("a", "Default", {"x"});
  h.push("b", "Default", {"y"});
  h.env.hold_syncs = true;
  PushCmd c = h.push_cmd("a", "Default", {"a2"});
  c.items.push_back(h.push_cmd("b", "Default", {"b2"}).items[0]);
  h.send(c);
  h.env.run();
  // Log a's sync lands; log b's write is lost with the crash.
  auto s = h.env.pending_syncs.front();
  h.env.synced[s.first] = h.env.files[s.first].size();
  h.env.crash();
  h.env.hold_syncs = false;
  h.restart();
  EXPECT_EQ(h.node().store().partition("a", "Default")->next_offset, Offset(1));
  EXPECT_EQ(h.node().store().partition("b", "Default")->next_offset, Offset(1));
  // The surviving half was cut: a later restart does not see it either.
  h.push("b", "Default", {"b3"});
  h.restart();
  EXPECT_EQ(h.node().store().partition("a", "Default")->next_offset, Offset(1));
  EXPECT_EQ(h.node().store().partition("b", "Default")->next_offset, Offset(2));
}

TEST(Recovery, LogsRollAtTheSegmentSize) {
  NodeConfig cfg;
  cfg.segment_bytes = 512;
  Harness h(cfg);
  for (int i = 0; i < 20; ++i) h.push("q", "p", {"m" + std::to_string(i)});
  EXPECT_TRUE(h.env.files.contains(log_file_name(LogId(1), 2)));
  h.restart();
  auto msgs = h.node().read_messages(h.node().store().partition("q", "p")->id, Offset(0), 100);
  ASSERT_TRUE(msgs.ok());
  ASSERT_EQ(msgs.value().size(), 20u);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(msgs.value()[i].transaction_id, "m" + std::to_string(i));
}

// A single node's restart reads only the log files that hold entries past its checkpoint:
// older files are left unread (a backlog's restart does not scan the whole backlog), and
// everything in them stays readable, deduplicated and reclaimable.
TEST(Recovery, ASingleNodeLeavesFilesBelowItsCheckpointUnread) {
  NodeConfig cfg;
  cfg.segment_bytes = 2048;
  cfg.durable_every_ms = 100;
  Harness h(cfg);
  for (int i = 0; i < 100; ++i) h.push("q", "p", {"m" + std::to_string(i)});
  h.env.advance_ms(cfg.durable_every_ms + 1);  // a store checkpoint holds those 100
  h.env.run();
  for (int i = 100; i < 103; ++i) h.push("q", "p", {"m" + std::to_string(i)});
  uint64_t log_bytes = 0;
  for (const auto& [name, bytes] : h.env.files)
    if (name.starts_with("qlog/")) log_bytes += bytes.size();
  h.env.log_bytes_read = 0;
  h.env.crash();
  h.restart();
  EXPECT_LT(h.env.log_bytes_read * 4, log_bytes) << "most of the log was read again";
  EXPECT_EQ(h.node().stats().recovered_entries, 3u) << "the three after the checkpoint";
  auto msgs = h.node().read_messages(h.node().store().partition("q", "p")->id, Offset(0), 200);
  ASSERT_TRUE(msgs.ok());
  ASSERT_EQ(msgs.value().size(), 103u);
  for (int i = 0; i < 103; ++i) EXPECT_EQ(msgs.value()[i].transaction_id, "m" + std::to_string(i));
  // A retried push from before the checkpoint is still a duplicate; new ones go on.
  PushReply again = h.push("q", "p", {"m3", "m103"});
  EXPECT_EQ(again.results[0].status, PushStatus::duplicate);
  EXPECT_EQ(again.results[0].offset, Offset(3));
  EXPECT_EQ(again.results[1].offset, Offset(103));
}

// A restart reads the log a window at a time, never a whole file: records that cross a
// window's end and a record larger than a window come back whole, and a tail torn inside
// such a record is cut as any torn tail.
TEST(Recovery, ScansTheLogAWindowAtATime) {
  Harness h;
  auto push_big = [&](int n, char fill) {
    std::vector<std::string> txns;
    for (int i = 0; i < n; ++i) txns.push_back(std::string(1, fill) + std::to_string(i));
    PushCmd c = h.push_cmd("q", "p", txns);
    for (auto& it : c.items) it.payload = "\"" + std::string(100'000, fill) + "\"";
    return h.call<PushReply>(c);
  };
  for (int i = 0; i < 12; ++i) push_big(3, static_cast<char>('a' + i));  // records of 300 KB
  push_big(15, 'z');                                                       // one of 1.5 MB
  const std::string file = log_file_name(LogId(1), 1);
  const uint64_t log_bytes = h.env.files.at(file).size();
  ASSERT_GT(log_bytes, 3 * 1'600'000u);  // more than three times the largest read
  h.env.read_bytes_max = 0;
  h.env.crash();
  h.restart();
  EXPECT_LT(h.env.read_bytes_max, 1'600'000u) << "a window, or the one record larger";
  PartitionId pid = h.node().store().partition("q", "p")->id;
  auto msgs = h.node().read_messages(pid, Offset(0), 100);
  ASSERT_TRUE(msgs.ok());
  ASSERT_EQ(msgs.value().size(), 12u * 3 + 15);
  EXPECT_EQ(msgs.value()[0].transaction_id, "a0");
  EXPECT_EQ(msgs.value().back().transaction_id, "z14");
  EXPECT_EQ(msgs.value().back().payload.size(), 100'002u);

  h.env.files.at(file).resize(log_bytes - 700'000);  // torn inside the large record
  h.env.synced[file] = log_bytes - 700'000;
  h.restart();
  msgs = h.node().read_messages(pid, Offset(0), 100);
  ASSERT_TRUE(msgs.ok());
  ASSERT_EQ(msgs.value().size(), 12u * 3);
  EXPECT_EQ(msgs.value().back().transaction_id, "l2");
  EXPECT_EQ(h.push("q", "p", {"after"}).results[0].offset, Offset(36));
}

// The log folders holding message records, e.g. {"q1", "s0"}.
std::set<std::string> log_folders(const MemEnv& env) {
  std::set<std::string> out;
  for (const auto& [log, files] : log_files(env)) {
    std::string name = log_file_name(log, 1);  // qlog/<folder>/r00000001.qlog
    if (log != LogId(0)) out.insert(name.substr(5, name.find('/', 5) - 5));
  }
  return out;
}

// Every message pushed to `queue` (partition p), in offset order, by transactionId.
std::vector<std::string> transaction_ids(Harness& h, const std::string& queue) {
  std::vector<std::string> out;
  const PartitionState* p = h.node().store().partition(queue, "p");
  if (!p) return out;
  auto msgs = h.node().read_messages(p->id, Offset(0), 1000);
  if (!msgs.ok()) return out;
  for (const auto& m : msgs.value()) out.push_back(m.transaction_id);
  return out;
}

// QUEEN_QLOG_SHARDS: queues write into shared logs (queue id % K: queues 1 and 3 share s1),
// a restart reads them back, and a restart under another layout writes new entries the new
// way while everything written the old way stays readable.
TEST(Recovery, QueuesShareLogsAndTheLayoutMayChangeAcrossRestarts) {
  NodeConfig cfg;
  cfg.qlog_shards = 2;
  Harness h(cfg);
  std::map<std::string, std::vector<std::string>> pushed;
  auto push_all = [&](const std::string& tag) {
    PushCmd c = h.push_cmd("a", "p", {tag + "a"});  // one entry touching all three queues
    c.items.push_back(h.push_cmd("b", "p", {tag + "b"}).items[0]);
    c.items.push_back(h.push_cmd("c", "p", {tag + "c"}).items[0]);
    h.call<PushReply>(c);
    h.push("c", "p", {tag + "c2"});
    for (const char* q : {"a", "b", "c"}) pushed[q].push_back(tag + q);
    pushed["c"].push_back(tag + "c2");
  };
  push_all("k2-");
  EXPECT_EQ(log_folders(h.env), (std::set<std::string>{"s0", "s1"}));
  h.env.crash();
  h.restart();
  for (const char* q : {"a", "b", "c"}) EXPECT_EQ(transaction_ids(h, q), pushed[q]) << q;
  h.config().qlog_shards = 0;
  h.restart();
  push_all("k0-");
  EXPECT_EQ(log_folders(h.env), (std::set<std::string>{"s0", "s1", "q1", "q2", "q3"}));
  h.config().qlog_shards = 3;
  h.env.crash();
  h.restart();
  push_all("k3-");
  EXPECT_TRUE(log_folders(h.env).contains("s2"));
  h.env.crash();
  h.restart();
  for (const char* q : {"a", "b", "c"}) EXPECT_EQ(transaction_ids(h, q), pushed[q]) << q;
}

TEST(Recovery, SharedAndQueueLogNamesReadBack) {
  for (LogId log : {LogId(0), LogId(7), log_of_queue(QueueId(9), 4), log_of_queue(QueueId(8), 4)}) {
    LogId back;
    uint32_t file_no = 0;
    ASSERT_TRUE(parse_log_file_name(log_file_name(log, 12), &back, &file_no));
    EXPECT_EQ(back, log);
    EXPECT_EQ(file_no, 12u);
  }
  EXPECT_EQ(log_file_name(log_of_queue(QueueId(9), 4), 1), "qlog/s1/r00000001.qlog");
  EXPECT_EQ(log_file_name(log_of_queue(QueueId(9), 0), 1), "qlog/q9/r00000001.qlog");
  LogId log;
  uint32_t file_no = 0;
  for (const char* bad : {"qlog/x1/r00000001.qlog", "qlog/s4096/r00000001.qlog",
                          "qlog/q1/r00000001.qlog.tmp", "qlog/SHARDS"})
    EXPECT_FALSE(parse_log_file_name(bad, &log, &file_no)) << bad;
}

TEST(Recovery, ReportsProgressForALargeLog) {
  Harness h;
  std::vector<std::string> txns;
  for (int i = 0; i < 200; ++i) txns.push_back("t" + std::to_string(i));
  for (int i = 0; i < 10; ++i) h.push("q", "p", txns);
  h.env.logs.clear();
  h.restart();
  ASSERT_FALSE(h.env.logs.empty());
  EXPECT_NE(h.env.logs.front().find("recovery: scanning"), std::string::npos);
  EXPECT_NE(h.env.logs.back().find("replayed"), std::string::npos);
}

TEST(Recovery, ARequestIdRetriedAfterARestartGetsTheRecordedAnswer) {
  Harness h;
  RequestId request{make_uuid_v7(1, 2, 3)};
  auto send = [&](const std::string& txn) {
    ReplyHandle handle = 1000 + h.env.replies.size() + h.env.now % 1000;
    h.env.perform(h.node().on_command(
        handle, CommandEnvelope{request, h.env.now / 1000 + 30000, h.push_cmd("q", "p", {txn})}));
    h.env.run();
    h.env.advance_ms(10);
    auto r = h.take(handle);
    QUEEN_ASSERT(r.has_value(), "no reply");
    return std::get<PushReply>(r->body);
  };
  PushReply first = send("a");
  h.env.crash();
  h.restart();
  PushReply again = send("a");
  ASSERT_EQ(again.results.size(), 1u);
  EXPECT_EQ(again.results[0].status, PushStatus::queued);
  EXPECT_EQ(again.results[0].message_id, first.results[0].message_id);
  EXPECT_EQ(again.results[0].offset, first.results[0].offset);
  EXPECT_EQ(h.node().store().partition("q", "p")->next_offset, Offset(1));
}

// A KV incr is not idempotent: a retry planned afresh would count twice. Its logged outcome
// answers the retry after a restart with the first value and version, and counts once.
TEST(Recovery, AKvIncrRetriedAfterARestartGetsTheRecordedAnswerAndCountsOnce) {
  Harness h;
  RequestId request{make_uuid_v7(4, 5, 6)};
  KvOp inc;
  inc.op = KvOpKind::incr;
  inc.ns = "counters";
  inc.key = "visits";
  inc.forever = true;
  auto send = [&](const RequestId& id) {
    ReplyHandle handle = 2000 + h.env.replies.size() + h.env.now % 1000;
    h.env.perform(
        h.node().on_command(handle, CommandEnvelope{id, h.env.now / 1000 + 30000, KvCmd{{inc}}}));
    h.env.run();
    h.env.advance_ms(10);
    auto r = h.take(handle);
    QUEEN_ASSERT(r.has_value(), "no reply");
    return std::get<KvReply>(r->body);
  };
  KvReply first = send(request);
  ASSERT_EQ(first.results.size(), 1u);
  ASSERT_TRUE(first.results[0].applied);
  EXPECT_EQ(first.results[0].row.value, "1");
  h.env.crash();
  h.restart();
  KvReply again = send(request);
  ASSERT_EQ(again.results.size(), 1u);
  EXPECT_EQ(again.results[0].row.value, "1");
  EXPECT_EQ(again.results[0].row.version, first.results[0].row.version);
  // A new request id counts again: the counter moved once for the first id.
  EXPECT_EQ(send(RequestId{make_uuid_v7(4, 5, 7)}).results[0].row.value, "2");
}

}  // namespace
}  // namespace queen::testing
