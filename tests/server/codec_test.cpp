// Unit tests of the edge's wire format and configuration: what a request turns into before
// it reaches the node, and what a reply looks like on the wire.
#include <gtest/gtest.h>
#include <set>

#include <map>
#include <nlohmann/json.hpp>
#include <random>

#include "server/api/api.h"
#include "server/api/routes.h"
#include "server/config.h"
#include "server/json_writer.h"
#include "tests/server/fixed_ids.h"

namespace queen::server {
namespace {

using nlohmann::json;

EnvLookup lookup_from(std::map<std::string, std::string> vars) {
  return [vars](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

TEST(Codec, PushMintsIdsHashesTransactionIdsAndKeepsPayloadText) {
  FixedIds ids;
  Parsed p = parse_push(
      R"({"items":[{"queue":"q","partition":"p","transactionId":"t","payload":{"a":[1,2]}},)"
      R"({"queue":"q"}]})",
      EdgeSettings{}, ids);
  ASSERT_TRUE(p.command.has_value()) << p.answer.body;
  EXPECT_EQ(p.command->deadline_ms, 1700000000000 + 30000);
  const auto& items = std::get<PushCmd>(p.command->command).items;
  ASSERT_EQ(items.size(), 2u);
  EXPECT_EQ(items[0].payload, R"({"a":[1,2]})");
  EXPECT_EQ(items[0].txn_hash, hash_transaction_id("t"));
  EXPECT_EQ(items[1].partition, "Default");
  EXPECT_EQ(items[1].payload, "null");
  EXPECT_EQ(items[1].transaction_id, uuid_to_string(items[1].message_id));
  EXPECT_EQ(items[1].txn_hash, hash_transaction_id(items[1].transaction_id));
  EXPECT_EQ(items[0].message_id.bytes[6] >> 4, 7) << "message ids are UUIDv7";
}

// One request's message ids run on (a recorded answer keeps them as a run); the next
// request's start afresh.
TEST(Codec, APushsMessageIdsFollowEachOther) {
  FixedIds ids;
  std::string body = R"({"items":[{"queue":"q"},{"queue":"q"},{"queue":"r","partition":"x"}]})";
  for (bool scanned : {true, false}) {
    // A repeated key sends a body to the general parser.
    std::string text = scanned ? body : R"({"items":[],)" + body.substr(1);
    Parsed p = parse_push(text, EdgeSettings{}, ids);
    ASSERT_TRUE(p.command.has_value()) << p.answer.body;
    const auto& items = std::get<PushCmd>(p.command->command).items;
    ASSERT_EQ(items.size(), 3u);
    for (size_t i = 1; i < items.size(); ++i) {
      Uuid next;
      ASSERT_TRUE(uuid_successor(items[i - 1].message_id, &next));
      EXPECT_EQ(items[i].message_id, next) << i;
      EXPECT_NE(items[i].transaction_id, items[i - 1].transaction_id);
    }
    Parsed again = parse_push(text, EdgeSettings{}, ids);
    const auto& more = std::get<PushCmd>(again.command->command).items;
    Uuid next;
    ASSERT_TRUE(uuid_successor(items.back().message_id, &next));
    EXPECT_NE(more.front().message_id, next) << "a new request, a new random start";
  }
}

TEST(Codec, TransactionIdOverTheLimitIsRefused) {
  FixedIds ids;
  json body = {{"items", {{{"queue", "q"}, {"transactionId", std::string(65536, 't')}}}}};
  Parsed p = parse_push(body.dump(), EdgeSettings{}, ids);
  EXPECT_FALSE(p.command.has_value());
  EXPECT_EQ(p.answer.status, 400u);
  body["items"][0]["transactionId"] = std::string(65535, 't');
  EXPECT_TRUE(parse_push(body.dump(), EdgeSettings{}, ids).command.has_value());
}

TEST(Codec, APushOfMoreItemsThanTheLimitIsRefusedWhole) {
  FixedIds ids;
  std::string body = "{\"items\":[";
  for (size_t i = 0; i <= kPushItemsMax; ++i)
    body += i == 0 ? "{\"queue\":\"q\"}" : ",{\"queue\":\"q\"}";
  body += "]}";
  Parsed p = parse_push(body, EdgeSettings{}, ids);
  EXPECT_FALSE(p.command.has_value());
  EXPECT_EQ(p.answer.status, 400u);
  EXPECT_NE(p.answer.body.find("items: " + std::to_string(kPushItemsMax + 1) + " in one push"),
            std::string::npos)
      << p.answer.body;
}

TEST(Codec, PopDefaultsAndSubscription) {
  FixedIds ids;
  Parsed p = parse_pop("q", std::nullopt, {}, EdgeSettings{}, ids);
  ASSERT_TRUE(p.command.has_value());
  const auto& pop = std::get<PopCmd>(p.command->command);
  EXPECT_EQ(pop.batch, kPopBatchDefault);
  EXPECT_EQ(pop.group, "__QUEUE_MODE__");
  EXPECT_EQ(pop.subscription_mode, SubscriptionMode::all) << "queue mode reads everything";

  Parsed named = parse_pop("q", std::string("p"),
                           {{"consumerGroup", "g"}, {"wait", "true"}, {"timeout", "90000"}},
                           EdgeSettings{}, ids);
  const auto& g = std::get<PopCmd>(named.command->command);
  EXPECT_EQ(g.subscription_mode, SubscriptionMode::new_only);
  EXPECT_TRUE(g.wait);
  EXPECT_EQ(named.command->deadline_ms, 1700000000000 + 60000) << "timeout is capped at 60 s";

  Parsed from = parse_pop("q", std::nullopt,
                          {{"consumerGroup", "g"}, {"subscriptionFrom", "2024-01-02T03:04:05Z"}},
                          EdgeSettings{}, ids);
  const auto& f = std::get<PopCmd>(from.command->command);
  EXPECT_EQ(f.subscription_mode, SubscriptionMode::from_time);
  EXPECT_EQ(f.subscription_from_us, 1704164645000000);
}

TEST(Codec, AckReadsPartitionIdDigitsAndStatus) {
  FixedIds ids;
  Parsed p = parse_ack(R"({"transactionId":"t","partitionId":"42","status":"success",)"
                       R"("leaseId":"0190a0b0-c0d0-7e0f-8a0b-0c0d0e0f1011"})",
                       EdgeSettings{}, ids);
  ASSERT_TRUE(p.command.has_value()) << p.answer.body;
  const auto& item = std::get<AckCmd>(p.command->command).items[0];
  EXPECT_EQ(item.partition_id.value, 42u);
  EXPECT_EQ(item.status, AckStatus::completed);
  EXPECT_TRUE(item.lease_id.has_value());
  EXPECT_EQ(item.txn_hash, hash_transaction_id("t"));
  for (const char* bad : {"-1", "4 2", "", "99999999999999999999999", "0x10"}) {
    json body = {{"transactionId", "t"}, {"partitionId", bad}};
    Parsed r = parse_ack(body.dump(), EdgeSettings{}, ids);
    EXPECT_EQ(r.answer.status, 400u) << bad;
    EXPECT_NE(r.answer.body.find("partitionId"), std::string::npos) << r.answer.body;
  }
}

TEST(Codec, AckBatchGroupAppliesToEveryItem) {
  FixedIds ids;
  Parsed p = parse_ack_batch(
      R"({"consumerGroup":"g","acknowledgments":[{"transactionId":"a","partitionId":"1",)"
      R"("consumerGroup":"other"},{"transactionId":"b","partitionId":"2"}]})",
      EdgeSettings{}, ids);
  ASSERT_TRUE(p.command.has_value()) << p.answer.body;
  for (const auto& item : std::get<AckCmd>(p.command->command).items) EXPECT_EQ(item.group, "g");
}

TEST(Codec, RendersPopWithRawPayloadAndEmptyPopAs204) {
  PopReply reply;
  reply.queue = "q";
  reply.group = "g";
  reply.partitions_claimed = 1;
  PopMessage m;
  m.queue = "q";
  m.partition = "p";
  m.partition_id = PartitionId(7);
  m.offset = Offset(3);
  m.transaction_id = "t";
  m.payload = R"({"big":12345678901234567890})";
  m.created_us = 1704164645123456;
  reply.messages.push_back(m);
  HttpAnswer a = render_reply(Reply{reply});
  EXPECT_EQ(a.status, 200u);
  EXPECT_NE(a.body.find(R"("data":{"big":12345678901234567890})"), std::string::npos) << a.body;
  EXPECT_NE(a.body.find(R"("createdAt":"2024-01-02T03:04:05.123456Z")"), std::string::npos);
  EXPECT_NE(a.body.find(R"("partitionId":"7")"), std::string::npos);
  EXPECT_TRUE(json::accept(a.body));

  HttpAnswer empty = render_reply(Reply{PopReply{}});
  EXPECT_EQ(empty.status, 204u);
  EXPECT_EQ(empty.body, "");
}

// Messages of several partitions, appends and leases in one answer: each carries its own
// partition, queue, creation time and lease (what they share is rendered once).
TEST(Codec, RendersEachPopMessagesOwnPartitionTimeAndLease) {
  PopReply reply;
  reply.queue = "q";
  reply.group = "g\"1";
  struct Shape {
    std::string partition;
    uint64_t pid;
    int64_t created_us;
    uint64_t lease;
  };
  std::vector<Shape> shapes = {{"a", 1, 1704164645000000, 5},   {"a", 1, 1704164645000000, 5},
                               {"a", 1, 1704164646000000, 5},   {"b\n", 2, 1704164646000000, 5},
                               {"b\n", 2, 1704164646000000, 0}, {"a", 1, 1704164647000000, 6}};
  for (size_t i = 0; i < shapes.size(); ++i) {
    PopMessage m;
    m.queue = "q" + std::to_string(shapes[i].pid);
    m.partition = shapes[i].partition;
    m.partition_id = PartitionId(shapes[i].pid);
    m.offset = Offset(i);
    m.transaction_id = "t" + std::to_string(i);
    m.payload = "{}";
    m.created_us = shapes[i].created_us;
    if (shapes[i].lease != 0) m.lease_id = LeaseId{make_uuid_v7(1, 2, shapes[i].lease)};
    reply.messages.push_back(m);
  }
  HttpAnswer a = render_reply(Reply{reply});
  json body = json::parse(a.body);
  ASSERT_EQ(body["messages"].size(), shapes.size());
  for (size_t i = 0; i < shapes.size(); ++i) {
    const json& m = body["messages"][i];
    EXPECT_EQ(m["partition"], shapes[i].partition) << i;
    EXPECT_EQ(m["partitionId"], std::to_string(shapes[i].pid)) << i;
    EXPECT_EQ(m["queue"], "q" + std::to_string(shapes[i].pid)) << i;
    EXPECT_EQ(m["offset"], i);
    EXPECT_EQ(m["createdAt"], format_iso_us(shapes[i].created_us)) << i;
    std::string lease = shapes[i].lease ? uuid_to_string(make_uuid_v7(1, 2, shapes[i].lease)) : "";
    EXPECT_EQ(m["leaseId"], lease) << i;
    EXPECT_EQ(m["consumerGroup"], "g\"1") << i;
    EXPECT_EQ(m["id"], m["messageId"]) << i;
  }
}

TEST(Codec, ErrorReplyKeepsStatusCodeAndRetryAfter) {
  HttpAnswer a =
      render_reply(Reply{ErrorReply{api::Errc::timeout, "the request deadline elapsed", 1}});
  EXPECT_EQ(a.status, 503u);
  EXPECT_EQ(a.retry_after_s, 1);
  EXPECT_EQ(json::parse(a.body),
            (json{{"error", "the request deadline elapsed"}, {"code", "timeout"}}));
}

TEST(Codec, IsoTimesRoundTrip) {
  for (int64_t us :
       {int64_t{0}, int64_t{1704164645123456}, int64_t{951782400000001}, int64_t{-1}}) {
    auto back = parse_iso_us(format_iso_us(us));
    ASSERT_TRUE(back.has_value()) << format_iso_us(us);
    EXPECT_EQ(*back, us) << format_iso_us(us);
  }
  EXPECT_EQ(parse_iso_us("2024-01-02T04:04:05+01:00"), parse_iso_us("2024-01-02T03:04:05Z"));
  EXPECT_EQ(parse_iso_us("2024-01-02"), parse_iso_us("2024-01-02T00:00:00Z"));
  EXPECT_FALSE(parse_iso_us("2024-13-02").has_value());
  EXPECT_FALSE(parse_iso_us("yesterday").has_value());
}

TEST(Codec, IsoTimesReadAsUtcWithMicroseconds) {
  EXPECT_EQ(format_iso_us(1704164645123456), "2024-01-02T03:04:05.123456Z");
  EXPECT_EQ(format_iso_us(0), "1970-01-01T00:00:00.000000Z");
  EXPECT_EQ(format_iso_us(-1), "1969-12-31T23:59:59.999999Z");
  EXPECT_EQ(format_iso_us(253402300800000007), "10000-01-01T00:00:00.000007Z");
}

// Ids written straight into an answer read as their text forms do.
TEST(Codec, UuidsAndDecimalIdsRenderAsTheirText) {
  Uuid id;
  for (size_t i = 0; i < id.bytes.size(); ++i) id.bytes[i] = static_cast<uint8_t>(i * 17 + 3);
  JsonWriter w;
  w.begin_array().uuid(id).decimal_string(0).decimal_string(UINT64_MAX).number(-5).end_array();
  EXPECT_EQ(json::parse(w.text()), (json{uuid_to_string(id), "0", std::to_string(UINT64_MAX), -5}));
  EXPECT_EQ(uuid_to_string(id), "03142536-4758-697a-8b9c-adbecfe0f102");
}

// Writes `v` with the writer's calls, as a reply renderer does.
void write_json(const json& v, JsonWriter& w) {
  if (v.is_array()) {
    w.begin_array();
    for (const json& e : v) write_json(e, w);
    w.end_array();
  } else if (v.is_object()) {
    w.begin_object();
    for (const auto& [k, e] : v.items()) write_json(e, w.key(k));
    w.end_object();
  } else if (v.is_string()) {
    w.string(v.get<std::string>());
  } else if (v.is_number_integer()) {
    w.number(v.get<int64_t>());
  } else if (v.is_boolean()) {
    w.boolean(v.get<bool>());
  } else {
    w.null();
  }
}

// A nested value built from `seed`: containers of up to four members, up to `depth` deep,
// empty ones among them.
json nested_value(std::mt19937_64& rng, int depth) {
  auto kind = depth == 0 ? rng() % 4 : rng() % 6;
  size_t members = rng() % 5;
  if (kind == 4) {
    json a = json::array();
    for (size_t i = 0; i < members; ++i) a.push_back(nested_value(rng, depth - 1));
    return a;
  }
  if (kind == 5) {
    json o = json::object();
    for (size_t i = 0; i < members; ++i) o["k" + std::to_string(i)] = nested_value(rng, depth - 1);
    return o;
  }
  if (kind == 0) return "s" + std::to_string(rng() % 100);
  if (kind == 1) return static_cast<int64_t>(rng() % 1000) - 500;
  if (kind == 2) return rng() % 2 == 0;
  return nullptr;
}

// Commas go between the members of every container, however they nest, and nowhere else.
TEST(Codec, TheWriterPlacesCommasInNestedContainers) {
  for (uint64_t seed = 0; seed < 2000; ++seed) {
    std::mt19937_64 rng(seed);
    json v = nested_value(rng, 5);
    JsonWriter w;
    write_json(v, w);
    EXPECT_EQ(json::parse(w.text()), v) << "seed " << seed << ": " << w.text();
  }
  JsonWriter w;  // spliced members count as members
  w.begin_object().members(JsonWriter::members_of([](JsonWriter& m) {
    m.key("a").number(1);
    m.key("b").begin_array().end_array();
  }));
  w.key("c").begin_object().end_object().end_object();
  EXPECT_EQ(w.text(), R"({"a":1,"b":[],"c":{}})");
}

// Results into several partitions, in runs and alone: each names its own target and status,
// whatever the results around it (what a run shares is rendered once).
TEST(Codec, RendersEachPushResultsOwnTargetAndStatus) {
  struct Shape {
    char target;  // results of one letter go to one queue and partition
    PushStatus status;
  } shapes[] = {
      {'a', PushStatus::queued}, {'a', PushStatus::queued},   {'b', PushStatus::duplicate},
      {'a', PushStatus::queued}, {'c', PushStatus::queued},   {'c', PushStatus::error},
      {'c', PushStatus::queued}, {'b', PushStatus::buffered}, {'b', PushStatus::queued}};
  PushReply reply;
  for (uint32_t i = 0; i < std::size(shapes); ++i) {
    PushResult r;
    r.index = i;
    r.status = shapes[i].status;
    r.message_id = make_uuid_v7(1, 2, i);
    r.transaction_id = "t" + std::to_string(i);
    r.queue = std::string("q-") + shapes[i].target;
    r.partition = std::string("p\"") + shapes[i].target;  // one that needs an escape
    r.partition_id = PartitionId(100 + static_cast<uint64_t>(shapes[i].target));
    r.offset = Offset(10 + i);
    if (r.status == PushStatus::error) r.error = "refused";
    reply.results.push_back(r);
  }
  HttpAnswer a = render_reply(Reply{reply});
  ASSERT_EQ(a.status, 201u);
  json items = json::parse(a.body);
  ASSERT_EQ(items.size(), std::size(shapes));
  const char* statuses[] = {"queued", "duplicate", "failed", "buffered"};  // by PushStatus
  for (size_t i = 0; i < items.size(); ++i) {
    const PushResult& r = reply.results[i];
    const json& item = items[i];
    EXPECT_EQ(item["index"], i);
    EXPECT_EQ(item["message_id"], uuid_to_string(r.message_id)) << i;
    EXPECT_EQ(item["transaction_id"], r.transaction_id) << i;
    EXPECT_EQ(item["queueName"], r.queue) << i;
    EXPECT_EQ(item["partition"], r.partition) << i;
    EXPECT_EQ(item["partitionId"], std::to_string(r.partition_id.value)) << i;
    EXPECT_EQ(item["status"], statuses[static_cast<int>(r.status)]) << i;
    if (r.status == PushStatus::error) {
      EXPECT_EQ(item["error"], "refused");
      EXPECT_FALSE(item.contains("offset"));
    } else {
      EXPECT_EQ(item["offset"], r.offset.value) << i;
    }
  }
}

// Acks of several partitions, in runs and alone, with every outcome: each result names its
// own partition and outcome, whatever the results around it.
TEST(Codec, RendersEachAckResultsOwnOutcomeAndNames) {
  AckReply reply;
  const char* partitions[] = {"p1", "p1", "p2", "p1", "", "p3", "p3", "p3"};
  for (uint32_t i = 0; i < std::size(partitions); ++i) {
    AckResult r;
    r.index = i;
    r.transaction_id = "t" + std::to_string(i);
    r.success = i != 5;
    r.error = i == 5 ? "lease expired" : "";
    r.lease_released = i == 7;
    r.dlq = i == 3;
    r.noop = i == 1;
    r.queue = partitions[i][0] ? "q\\" : "";  // one that needs an escape; none beside no name
    r.partition = partitions[i];
    reply.results.push_back(r);
  }
  HttpAnswer a = render_reply(Reply{reply});
  ASSERT_EQ(a.status, 200u);
  json items = json::parse(a.body);
  ASSERT_EQ(items.size(), reply.results.size());
  for (size_t i = 0; i < items.size(); ++i) {
    const AckResult& r = reply.results[i];
    const json& item = items[i];
    EXPECT_EQ(item["index"], i);
    EXPECT_EQ(item["transactionId"], r.transaction_id);
    EXPECT_EQ(item["success"], r.success) << i;
    EXPECT_EQ(item["error"], r.error.empty() ? json(nullptr) : json(r.error)) << i;
    EXPECT_EQ(item["leaseReleased"], r.lease_released) << i;
    EXPECT_EQ(item["dlq"], r.dlq) << i;
    EXPECT_EQ(item["noop"], r.noop) << i;
    EXPECT_EQ(item["queueName"], r.queue.empty() ? json(nullptr) : json(r.queue)) << i;
    EXPECT_EQ(item["partitionName"], r.partition.empty() ? json(nullptr) : json(r.partition)) << i;
  }
}

// Each kind of value is written whole with the comma before it, first in its container or not,
// the widest integers included.
TEST(Codec, TheWriterWritesEachKindOfValueFirstOrAfterAnother) {
  Uuid u = make_uuid_v7(1700000000000, 1, 2);
  std::string id = uuid_to_string(u);
  auto each = [&](JsonWriter& w) {
    w.number(INT64_MIN).number(UINT64_MAX).number(uint32_t{7}).number(-1);
    w.decimal_string(UINT64_MAX).decimal_string(0).uuid(u).boolean(true).boolean(false).null();
    w.raw("").raw("[1]").string("x").string("");
  };
  std::string values =
      "-9223372036854775808,18446744073709551615,7,-1,\"18446744073709551615\","
      "\"0\",\"" +
      id + "\",true,false,null,null,[1],\"x\",\"\"";
  for (int first = 0; first < 2; ++first) {
    JsonWriter w;
    w.begin_array();
    if (first == 0) w.number(0);
    each(w);
    w.end_array();
    EXPECT_EQ(w.text(), "[" + std::string(first == 0 ? "0," : "") + values + "]");
  }
  JsonWriter o;
  o.begin_object().key("a").uuid(u).key("b").decimal_string(12).key("c").boolean(false);
  o.key("d").null().key("e").number(INT64_MIN).end_object();
  EXPECT_EQ(o.text(),
            "{\"a\":\"" + id + R"(","b":"12","c":false,"d":null,"e":-9223372036854775808})");
}

TEST(Codec, PercentDecodingAndQueries) {
  EXPECT_EQ(percent_decode("a%20b+c", false), "a b+c");
  EXPECT_EQ(percent_decode("a%20b+c", true), "a b c");
  EXPECT_FALSE(percent_decode("%2", false).has_value());
  EXPECT_FALSE(percent_decode("%zz", false).has_value());
  auto q = parse_query("batch=5&batch=6&consumerGroup=my%20group&flag");
  ASSERT_TRUE(q.has_value());
  EXPECT_EQ(q->at("batch"), "5");
  EXPECT_EQ(q->at("consumerGroup"), "my group");
  EXPECT_EQ(q->at("flag"), "");
  EXPECT_FALSE(parse_query("q=%FF").has_value()) << "not UTF-8";
}

TEST(Codec, DeepNestingIsMeasuredWithoutParsing) {
  EXPECT_EQ(json_depth(R"({"a":[1,{"b":"[[["}]})", 100), 3u);
  EXPECT_EQ(json_depth(std::string(1000000, '['), 256), 257u);
}

TEST(Routes, PopPathSegmentsArePercentDecoded) {
  FixedIds ids;
  Parsed p = route_request("GET", "/api/v1/pop/queue/my%20queue/partition/a%2Fb?batch=2", "",
                           EdgeSettings{}, ids);
  ASSERT_TRUE(p.command.has_value()) << p.answer.body;
  const auto& pop = std::get<PopCmd>(p.command->command);
  EXPECT_EQ(pop.queue, "my queue");
  EXPECT_EQ(pop.partition, "a/b");
  EXPECT_EQ(pop.batch, 2u);
}

TEST(Config, DefaultsMatchTheReference) {
  auto c = load_config(lookup_from({}));
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c.value().port, 6632);
  EXPECT_EQ(c.value().bind_addr, "0.0.0.0");
  EXPECT_EQ(c.value().data_dir, "./data/raft");
  EXPECT_EQ(c.value().body_bytes_max, 64ull << 20);
  EXPECT_EQ(c.value().stmt_timeout_ms, 30000);
  EXPECT_EQ(c.value().node.checkpoint_ms, 5);
  EXPECT_FALSE(c.value().node.consume_fast);
}

TEST(Config, BooleansAndNumbers) {
  for (const char* yes : {"true", "1", "yes", "on", "ON"}) {
    auto c = load_config(lookup_from({{"QUEEN_CONSUME_FAST", yes}}));
    ASSERT_TRUE(c.ok()) << yes;
    EXPECT_TRUE(c.value().node.consume_fast) << yes;
  }
  auto bad = load_config(lookup_from({{"QUEEN_CONSUME_FAST", "sometimes"}}));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("QUEEN_CONSUME_FAST"), std::string::npos);
  auto kept =
      load_config(lookup_from({{"QUEEN_RAFT_PIPELINE", "-3"}, {"QUEEN_STMT_TIMEOUT_MS", "x"}}));
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ(kept.value().node.pipeline_max, 8u) << "a non-positive number keeps the default";
  EXPECT_EQ(kept.value().stmt_timeout_ms, 30000);
  auto port = load_config(lookup_from({{"QUEEN_BIND_ADDR", "0.0.0.0:80"}}));
  EXPECT_FALSE(port.ok()) << "a port in the bind address is fatal";
}

// The node thread serves connections up to 12 requests in flight by default; 0 turns that
// off (the edge threads only), as QUEEN_HTTP_THREADS=0 turns the edge threads off.
TEST(Config, ConnectionsOnTheNodeThread) {
  auto c = load_config(lookup_from({}));
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c.value().http_threads, 2);
  EXPECT_EQ(c.value().http_node_busy_max, 12);
  auto off =
      load_config(lookup_from({{"QUEEN_HTTP_NODE_BUSY_MAX", "0"}, {"QUEEN_HTTP_THREADS", "0"}}));
  ASSERT_TRUE(off.ok());
  EXPECT_EQ(off.value().http_node_busy_max, 0);
  EXPECT_EQ(off.value().http_threads, 0);
  auto bad = load_config(lookup_from({{"QUEEN_HTTP_NODE_BUSY_MAX", "-1"}}));
  ASSERT_TRUE(bad.ok());
  EXPECT_EQ(bad.value().http_node_busy_max, 12) << "a negative number keeps the default";
}

TEST(Config, SharedQueueLogs) {
  auto c = load_config(lookup_from({}));
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c.value().node.qlog_shards, 0u) << "one log per queue unless told";
  c = load_config(lookup_from({{"QUEEN_QLOG_SHARDS", "4"}}));
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c.value().node.qlog_shards, 4u);
  for (const char* bad : {"-1", "4097", "four"}) {
    auto refused = load_config(lookup_from({{"QUEEN_QLOG_SHARDS", bad}}));
    ASSERT_FALSE(refused.ok()) << bad;
    EXPECT_NE(refused.error().message.find("QUEEN_QLOG_SHARDS"), std::string::npos);
  }
}

TEST(Config, DedupRingsBound) {
  auto c = load_config(lookup_from({}));
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c.value().node.dedup_front_bytes_max, 512ull << 20) << "the reference's default";
  c = load_config(lookup_from({{"QUEEN_RAFT_DEDUP_FRONT_MB", "0"}}));
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c.value().node.dedup_front_bytes_max, 0u) << "no bound";
  c = load_config(lookup_from({{"QUEEN_RAFT_DEDUP_FRONT_MB", "64"}}));
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c.value().node.dedup_front_bytes_max, 64ull << 20);
  for (const char* bad : {"-1", "1048577", "lots"}) {
    auto refused = load_config(lookup_from({{"QUEEN_RAFT_DEDUP_FRONT_MB", bad}}));
    ASSERT_FALSE(refused.ok()) << bad;
    EXPECT_NE(refused.error().message.find("QUEEN_RAFT_DEDUP_FRONT_MB"), std::string::npos);
  }
}

TEST(Config, RingsFileMinimum) {
  auto c = load_config(lookup_from({}));
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c.value().node.rings_file_bytes_min, 64ull << 20);
  c = load_config(lookup_from({{"QUEEN_RAFT_RINGS_FILE_MIN_MB", "0"}}));
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c.value().node.rings_file_bytes_min, 0u) << "rings of any size";
  for (const char* bad : {"-1", "1048577", "big"}) {
    auto refused = load_config(lookup_from({{"QUEEN_RAFT_RINGS_FILE_MIN_MB", bad}}));
    ASSERT_FALSE(refused.ok()) << bad;
    EXPECT_NE(refused.error().message.find("QUEEN_RAFT_RINGS_FILE_MIN_MB"), std::string::npos);
  }
}

TEST(Config, ForwardingOfACluster) {
  std::map<std::string, std::string> env{
      {"QUEEN_RAFT_NODE_ID", "2"},
      {"QUEEN_RAFT_PEERS", "1=127.0.0.1:7401/127.0.0.1:6632,2=127.0.0.1:7402/127.0.0.1:6642"}};
  auto c = load_config(lookup_from(env));
  ASSERT_TRUE(c.ok()) << c.error().message;
  ASSERT_TRUE(c.value().cluster);
  EXPECT_EQ(c.value().cluster->forward_streams, 4u);
  EXPECT_TRUE(c.value().cluster->client_offload);
  env["QUEEN_RAFT_FWD_STREAMS"] = "64";
  env["QUEEN_RAFT_CLIENT_OFFLOAD"] = "off";
  c = load_config(lookup_from(env));
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c.value().cluster->forward_streams, 64u);
  EXPECT_FALSE(c.value().cluster->client_offload);
  for (const char* bad : {"0", "65", "many"}) {
    env["QUEEN_RAFT_FWD_STREAMS"] = bad;
    auto refused = load_config(lookup_from(env));
    ASSERT_FALSE(refused.ok()) << bad;
    EXPECT_NE(refused.error().message.find("QUEEN_RAFT_FWD_STREAMS"), std::string::npos);
  }
  env["QUEEN_RAFT_FWD_STREAMS"] = "4";
  env["QUEEN_RAFT_CLIENT_OFFLOAD"] = "sometimes";
  auto refused = load_config(lookup_from(env));
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("QUEEN_RAFT_CLIENT_OFFLOAD"), std::string::npos);
}

// Every error code of the core maps to an HTTP status and a code string of its own.
TEST(Codec, EveryCoreErrorCodeHasItsOwnWireCode) {
  std::set<std::string> codes;
  for (int i = 0; i <= static_cast<int>(api::kErrcLast); ++i) {
    HttpAnswer a = render_reply(Reply{ErrorReply{static_cast<api::Errc>(i), "why", 0}});
    EXPECT_GE(a.status, 400u) << i;
    auto body = json::parse(a.body);
    EXPECT_EQ(body["error"], "why");
    EXPECT_TRUE(codes.insert(body["code"].get<std::string>()).second) << body["code"];
  }
  EXPECT_EQ(render_reply(Reply{ErrorReply{api::Errc::not_leader, "m", 1, 2}}).status, 503u);
  EXPECT_EQ(render_reply(Reply{ErrorReply{api::Errc::storage_full, "m", 0}}).status, 507u);
  EXPECT_EQ(render_reply(Reply{ErrorReply{api::Errc::overloaded, "m", 1}}).status, 429u);
}

}  // namespace
}  // namespace queen::server
