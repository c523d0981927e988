// The body scanner (push, ack batch and transaction bodies) against nlohmann/json: it never
// accepts what the general parser refuses, keeps a payload's bytes as sent, and leaves errors
// to the general parser, so a refused request names its field as before.
#include "server/json_scan.h"

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <variant>

#include "server/api/api.h"
#include "server/json_bytes.h"
#include "server/json_writer.h"

namespace queen::server {
namespace {

using json = nlohmann::json;

// True when the scanner takes `text` as one JSON value.
bool scans(std::string_view text) {
  JsonScan s(text, kJsonDepthMax);
  std::string_view raw;
  return s.value(&raw) && s.at_end();
}

bool nlohmann_accepts(std::string_view text) {
  return json_depth(text, kJsonDepthMax) <= kJsonDepthMax && json::accept(text);
}

TEST(JsonScan, AgreesWithTheGeneralParserOnEdgeCases) {
  const char* cases[] = {"0",
                         "-0",
                         "01",
                         "1.",
                         ".5",
                         "1e",
                         "1e+",
                         "1E-7",
                         "-",
                         "1.5e308",
                         "1e309",
                         "-1e400",
                         "123456789012345678901234567890",
                         "true",
                         "tru",
                         "nul",
                         "null ",
                         " [ ] ",
                         "[,]",
                         "[1,]",
                         "{}",
                         "{\"a\"}",
                         "{\"a\":}",
                         "{\"a\":1,}",
                         "{1:2}",
                         "\"\\u00e9\"",
                         "\"\\ud83d\\ude00\"",
                         "\"\\ud83d\"",
                         "\"\\ude00\"",
                         "\"\\ud83d\\u0041\"",
                         "\"\\x\"",
                         "\"\\u12\"",
                         "\"a\tb\"",
                         "\"\x7f\"",
                         "\"\xc3\xa9\"",
                         "\"\xc0\xaf\"",
                         "\"\xed\xa0\x80\"",
                         "\"\xf4\x90\x80\x80\"",
                         "\"\xe2\x82\"",
                         "\"\xf0\x9f\x98\x80\"",
                         "\"\xff\"",
                         "\"\\u0000\"",
                         "[1 2]",
                         "{} {}",
                         "",
                         "\"unterminated",
                         "[[[[[[[[[[]]]]]]]]]]"};
  for (const char* text : cases) {
    EXPECT_EQ(scans(text), nlohmann_accepts(text)) << text;
  }
  std::string deep(kJsonDepthMax, '[');
  deep += std::string(kJsonDepthMax, ']');
  EXPECT_TRUE(scans(deep));
  EXPECT_FALSE(scans("[" + deep + "]")) << "deeper than kJsonDepthMax";
}

// A random JSON value, rendered with random whitespace.
rc::Gen<std::string> genJsonText(int depth) {
  auto scalar = rc::gen::oneOf(
      rc::gen::map(rc::gen::arbitrary<int64_t>(), [](int64_t v) { return std::to_string(v); }),
      rc::gen::map(rc::gen::arbitrary<double>(),
                   [](double v) { return std::isfinite(v) ? json(v).dump() : "null"; }),
      rc::gen::map(rc::gen::arbitrary<std::string>(),
                   [](std::string v) {
                     return json(v).dump(-1, ' ', false, json::error_handler_t::replace);
                   }),
      rc::gen::element<std::string>("true", "false", "null", "\"\\u00e9\\/\\n\""));
  if (depth == 0) return scalar;
  auto space = rc::gen::element<std::string>("", " ", "\n\t", "\r ");
  auto array = rc::gen::map(
      rc::gen::pair(rc::gen::container<std::vector<std::string>>(genJsonText(depth - 1)), space),
      [](const auto& p) {
        std::string out = "[" + p.second;
        for (size_t i = 0; i < p.first.size(); ++i) out += (i ? "," : "") + p.first[i];
        return out + p.second + "]";
      });
  auto object = rc::gen::map(
      rc::gen::container<std::vector<std::pair<std::string, std::string>>>(
          rc::gen::pair(rc::gen::arbitrary<std::string>(), genJsonText(depth - 1))),
      [](const auto& members) {
        std::string out = "{";
        for (size_t i = 0; i < members.size(); ++i) {
          out += (i ? " , " : "") +
                 json(members[i].first).dump(-1, ' ', false, json::error_handler_t::replace) +
                 ": " + members[i].second;
        }
        return out + "}";
      });
  return rc::gen::oneOf(scalar, array, object);
}

RC_GTEST_PROP(JsonScanProp, TakesEveryValidValueWhole, ()) {
  std::string text = *genJsonText(3);
  RC_ASSERT(nlohmann_accepts(text));
  std::string spaced = " " + text + " ";
  JsonScan s(spaced, kJsonDepthMax);
  std::string_view raw;
  RC_ASSERT(s.value(&raw));
  RC_ASSERT(s.at_end());
  RC_ASSERT(raw == text);
}

RC_GTEST_PROP(JsonScanProp, NeverTakesWhatTheGeneralParserRefuses, ()) {
  std::string text = *genJsonText(3);
  auto at = *rc::gen::inRange<size_t>(0, text.size() + 1);
  auto byte = *rc::gen::arbitrary<char>();
  auto how = *rc::gen::inRange(0, 3);
  if (how == 0) text.insert(at, 1, byte);
  if (how == 1 && at < text.size()) text.erase(at, 1);
  if (how == 2 && at < text.size()) text[at] = byte;
  if (scans(text)) RC_ASSERT(nlohmann_accepts(text));
}

const PushCmd& push_of(const Parsed& p) {
  return std::get<PushCmd>(p.command->command);
}

// Strings are passed over sixteen bytes at a time, then eight, then one: a quote, a
// backslash, a control byte or a byte of UTF-8 is seen wherever it sits in a block, and the
// string reads as the general parser reads it (or is refused as it refuses it).
TEST(JsonScan, SeesEverySpecialByteAtEveryPositionOfAWord) {
  const std::string bytes("\"\\\x00\x01\x1f\x20\x7f\x80\xc3\xff", 10);
  for (size_t size = 1; size <= 41; ++size) {
    for (size_t at = 0; at < size; ++at) {
      for (char c : bytes) {
        std::string text = "\"" + std::string(size, 'x') + "\"";
        text[1 + at] = c;
        SCOPED_TRACE("size " + std::to_string(size) + ", byte " + std::to_string(int(c)) + " at " +
                     std::to_string(at));
        JsonScan s(text, kJsonDepthMax);
        std::string scratch;
        std::string_view got;
        bool ok = s.text(&got, &scratch) && s.at_end();
        ASSERT_EQ(ok, nlohmann_accepts(text));
        if (ok) {
          EXPECT_EQ(got, json::parse(text).get<std::string>());
        }
      }
    }
  }
}

// The runs both use stop at the first byte that ends them, wherever it sits (in a block of
// sixteen, of eight or in the bytes after), whatever follows it, and run to the end without one.
TEST(JsonBytes, RunsStopAtTheFirstByteThatEndsThem) {
  const std::string bytes("\"\\\x00\x01\x1f\x20\x41\x7e\x7f\x80\xc3\xff", 12);
  auto reference = [](const std::string& t, bool ascii_only) {
    size_t i = 0;
    for (; i < t.size(); ++i) {
      auto c = static_cast<unsigned char>(t[i]);
      if (c < 0x20 || c == '"' || c == '\\' || (ascii_only && c >= 0x80)) break;
    }
    return i;
  };
  for (size_t size = 0; size <= 41; ++size) {
    std::string plain(size, 'x');
    EXPECT_EQ(json_plain_ascii_run(plain.data(), size), size);
    EXPECT_EQ(json_unescaped_run(plain.data(), size), size);
    for (size_t at = 0; at < size; ++at) {
      for (char c : bytes) {
        for (char after : {'x', '"'}) {
          std::string text = plain;
          text[at] = c;
          if (at + 1 < size) text[size - 1] = after;
          SCOPED_TRACE("size " + std::to_string(size) + ", byte " + std::to_string(int(c)) +
                       " at " + std::to_string(at) + ", last " + after);
          EXPECT_EQ(json_plain_ascii_run(text.data(), size), reference(text, true));
          EXPECT_EQ(json_unescaped_run(text.data(), size), reference(text, false));
        }
      }
    }
  }
}

TEST(JsonScan, APushPayloadIsKeptAsSent) {
  struct Ids : IdSource {
    int64_t now_ms() override { return 1700000000000; }
    uint64_t random_u64() override { return ++n; }
    uint64_t n = 0;
  } ids;
  Parsed p = parse_push(R"({"items":[{"queue":"q","payload":{"b": 1.50, "a":[2 ,1]}}]})",
                        EdgeSettings{}, ids);
  ASSERT_TRUE(p.command.has_value()) << p.answer.body;
  EXPECT_EQ(push_of(p).items[0].payload, R"({"b": 1.50, "a":[2 ,1]})");
  // A repeated key goes to the general parser: the last one counts, as before.
  p = parse_push(R"({"items":[{"queue":"a","queue":"b"}]})", EdgeSettings{}, ids);
  ASSERT_TRUE(p.command.has_value()) << p.answer.body;
  EXPECT_EQ(push_of(p).items[0].queue, "b");
}

TEST(JsonScan, ARefusedPushStillNamesItsField) {
  struct Ids : IdSource {
    int64_t now_ms() override { return 1700000000000; }
    uint64_t random_u64() override { return 7; }
  } ids;
  struct Case {
    const char* body;
    const char* names;
  } cases[] = {
      {R"({"items":[{"queue":"q"},{"queue":""}]})", "items[1].queue"},
      {R"({"items":[{"queue":"q","partition":5}]})", "items[0].partition"},
      {R"({"items":[{"queue":"q","payload":{"a":}}]})", "invalid JSON"},
      {R"({"items":{}})", "items must be an array"},
      {R"({"items":[{"partition":"p"}]})", "items[0].queue"},
      // Refused once read (a control character), before and after items that are not.
      {R"({"items":[{"queue":"q"},{"queue":"a\u0001"},{"queue":"q","partition":"b\u0002"}]})",
       "items[1].queue must not contain control characters"},
      // A body that does not parse is answered so, whatever an item before was refused for.
      {R"({"items":[{"queue":"a\u0001"},{"queue":"q","payload":{"a":}}]})", "invalid JSON"},
  };
  for (const Case& c : cases) {
    Parsed p = parse_push(c.body, EdgeSettings{}, ids);
    EXPECT_FALSE(p.command.has_value()) << c.body;
    EXPECT_EQ(p.answer.status, 400u) << c.body;
    EXPECT_NE(p.answer.body.find(c.names), std::string::npos) << p.answer.body;
  }
}

struct StepIds : IdSource {
  int64_t now_ms() override { return 1700000000000; }
  uint64_t random_u64() override { return ++n; }
  uint64_t n = 0;
};

// An ack batch names its first refused item, as the general parser does: an item's own
// consumerGroup is checked only where no batch consumerGroup (written before or after the
// items) overrides it, and in item order with the item's other fields.
TEST(JsonScan, ARefusedAckBatchNamesItsFirstRefusedItem) {
  const std::string bad_group =
      R"({"transactionId":"t","partitionId":"1","consumerGroup":"a\u0001"})";
  const std::string bad_partition = R"({"transactionId":"t","partitionId":"x"})";
  const std::string fine = R"({"transactionId":"t","partitionId":"2"})";
  struct Case {
    std::string acks, group, names;  // group: the batch's consumerGroup value, "" for none
  } cases[] = {
      {fine + "," + bad_group + "," + bad_partition, "", "acknowledgments[1].consumerGroup"},
      {fine + "," + bad_partition + "," + bad_group, "", "acknowledgments[1].partitionId"},
      {bad_group + "," + bad_partition, R"("g")", "acknowledgments[1].partitionId"},
      {fine + "," + bad_group, R"("a\u0002")", "acknowledgments[0].consumerGroup"},
  };
  for (const Case& c : cases) {
    std::string tail = c.group.empty() ? "}" : R"(,"consumerGroup":)" + c.group + "}";
    std::string scanned = R"({"acknowledgments":[)" + c.acks + "]" + tail;
    // A repeated key: the scanner leaves this body to the general parser.
    std::string general = R"({"consumerGroup":1,"acknowledgments":[)" + c.acks + "]" +
                          (c.group.empty() ? R"(,"consumerGroup":null})" : tail);
    StepIds a, b;
    Parsed x = parse_ack_batch(scanned, EdgeSettings{}, a);
    Parsed y = parse_ack_batch(general, EdgeSettings{}, b);
    EXPECT_FALSE(x.command.has_value()) << scanned;
    EXPECT_EQ(x.answer.status, 400u) << scanned;
    EXPECT_NE(x.answer.body.find(c.names), std::string::npos) << x.answer.body;
    EXPECT_EQ(x.answer.body, y.answer.body) << general;
  }
}

TEST(JsonScan, TextViewsAPlainStringAndUnescapesAnyOther) {
  std::string body = R"(["plain", "tab\tand \u00e9", "", "\"q\""])";
  JsonScan s(body, kJsonDepthMax);
  std::string scratch;
  std::string_view v;
  ASSERT_TRUE(s.eat('['));
  ASSERT_TRUE(s.text(&v, &scratch));
  EXPECT_EQ(v, "plain");
  EXPECT_TRUE(v.data() >= body.data() && v.data() < body.data() + body.size());  // no copy
  ASSERT_TRUE(s.eat(','));
  ASSERT_TRUE(s.text(&v, &scratch));
  EXPECT_EQ(v, "tab\tand \xc3\xa9");
  ASSERT_TRUE(s.eat(','));
  ASSERT_TRUE(s.text(&v, &scratch));
  EXPECT_EQ(v, "");
  ASSERT_TRUE(s.eat(','));
  ASSERT_TRUE(s.text(&v, &scratch));
  EXPECT_EQ(v, "\"q\"");
  ASSERT_TRUE(s.eat(']'));
  EXPECT_TRUE(s.at_end());
  JsonScan bad(R"("a\x")", kJsonDepthMax);
  EXPECT_FALSE(bad.text(&v, &scratch));
  EXPECT_FALSE(bad.ok());
}

// Keys and ids written with escapes read as the same text written plainly.
TEST(JsonScan, AnAckBatchReadsEscapedKeysAndIdsAsWrittenPlainly) {
  std::string plain = R"({"consumerGroup":"g","acknowledgments":[{"transactionId":"t1",)"
                      R"("partitionId":"12","leaseId":"0190a0b0-0000-7000-8000-00000000000a"}]})";
  std::string escaped =
      R"({"consumer\u0047roup":"g","acknowledgments":[{"transaction\u0049d":"t\u0031",)"
      R"("partitionId":"12","lease\u0049d":"0190A0B0-0000-7000-8000-00000000000\u0041"}]})";
  StepIds a, b;
  Parsed x = parse_ack_batch(plain, EdgeSettings{}, a);
  Parsed y = parse_ack_batch(escaped, EdgeSettings{}, b);
  ASSERT_TRUE(x.command.has_value()) << x.answer.body;
  ASSERT_TRUE(y.command.has_value()) << y.answer.body;
  const AckItem& p = std::get<AckCmd>(x.command->command).items.at(0);
  const AckItem& q = std::get<AckCmd>(y.command->command).items.at(0);
  ASSERT_TRUE(p.lease_id.has_value());
  EXPECT_EQ(uuid_to_string(*p.lease_id), "0190a0b0-0000-7000-8000-00000000000a");
  EXPECT_EQ(p.lease_id, q.lease_id);
  EXPECT_EQ(q.transaction_id, "t1");
  EXPECT_EQ(q.group, "g");
  Parsed refused = parse_ack_batch(
      R"({"acknowledgments":[{"transactionId":"t","partitionId":"1","leaseId":"nope"}]})",
      EdgeSettings{}, a);
  EXPECT_EQ(refused.answer.status, 400u);
  EXPECT_NE(refused.answer.body.find("acknowledgments[0].leaseId must be a UUID"),
            std::string::npos)
      << refused.answer.body;
}

// Mostly one of a field's typical values as a JSON string, else random text, null or a
// number (which the parsers refuse).
rc::Gen<std::string> genField(std::vector<std::string> typical) {
  return rc::gen::weightedOneOf<std::string>(
      {{12,
        rc::gen::map(rc::gen::elementOf(typical), [](std::string v) { return json(v).dump(); })},
       {1, rc::gen::map(rc::gen::arbitrary<std::string>(),
                        [](std::string v) {
                          return json(v).dump(-1, ' ', false, json::error_handler_t::replace);
                        })},
       {1, rc::gen::just(std::string("null"))},
       {1, rc::gen::just(std::string("7"))}});
}

// A list of 1-4 items.
template <typename T>
rc::Gen<std::vector<std::string>> genItems(rc::Gen<T> item) {
  return rc::gen::mapcat(rc::gen::inRange<size_t>(1, 5), [item](size_t n) {
    return rc::gen::container<std::vector<std::string>>(n, item);
  });
}

// The elements' texts joined with commas, for a JSON array.
std::string joined(const std::vector<std::string>& elements) {
  std::string out;
  for (size_t i = 0; i < elements.size(); ++i) out += (i ? "," : "") + elements[i];
  return out;
}

// Both readings took the body, or refused it with the same answer.
void assertSameAnswer(const Parsed& x, const Parsed& y) {
  RC_ASSERT(x.command.has_value() == y.command.has_value());
  RC_ASSERT(x.answer.status == y.answer.status);
  RC_ASSERT(x.answer.body == y.answer.body);
  RC_TAG(x.command.has_value());
}

void assertSameAck(const AckItem& p, const AckItem& q) {
  RC_ASSERT(p.transaction_id == q.transaction_id);
  RC_ASSERT(p.txn_hash == q.txn_hash);
  RC_ASSERT(p.partition_id == q.partition_id);
  RC_ASSERT(p.lease_id == q.lease_id);
  RC_ASSERT(p.status == q.status);
  RC_ASSERT(p.group == q.group);
}

// The same items; a payload may differ only in form.
void assertSamePushItems(const std::vector<PushItem>& p, const std::vector<PushItem>& q) {
  RC_ASSERT(p.size() == q.size());
  for (size_t i = 0; i < p.size(); ++i) {
    RC_ASSERT(p[i].queue == q[i].queue);
    RC_ASSERT(p[i].partition == q[i].partition);
    RC_ASSERT(p[i].transaction_id == q[i].transaction_id);
    RC_ASSERT(p[i].message_id == q[i].message_id);
    RC_ASSERT(json::parse(p[i].payload) == json::parse(q[i].payload));
  }
}

// The same ack batch read by the scanner and by the general parser (a repeated key sends it
// there; the last one counts in both) gives the same command or the same refusal.
RC_GTEST_PROP(JsonScanProp, AnAckBatchReadsTheSameEitherWay, ()) {
  auto items = *genItems(rc::gen::map(
      rc::gen::tuple(
          genField({"t1", "t2"}), genField({"12", "0", "12", "12", "12", "12", "12", "12", "x"}),
          genField({"completed", "failed", "dlq", "retry", "completed", "completed", "completed",
                    "completed", "completed", "success", "bad"}),
          genField({"0190a0b0-0000-7000-8000-000000000001", "", "", "", "", "", "", "", "nope"}),
          genField({"g", ""})),
      [](const auto& t) {
        return "{\"transactionId\":" + std::get<0>(t) + ",\"partitionId\":" + std::get<1>(t) +
               ",\"status\":" + std::get<2>(t) + ",\"leaseId\":" + std::get<3>(t) +
               ",\"consumerGroup\":" + std::get<4>(t) + ",\"extra\":[1,{}]}";
      }));
  std::string list = joined(items);
  std::string group = *genField({"g", ""});
  std::string scanned = "{\"acknowledgments\":[" + list + "],\"consumerGroup\":" + group + "}";
  std::string general =
      "{\"consumerGroup\":1,\"acknowledgments\":[" + list + "],\"consumerGroup\":" + group + "}";
  StepIds a, b;
  Parsed x = parse_ack_batch(scanned, EdgeSettings{}, a);
  Parsed y = parse_ack_batch(general, EdgeSettings{}, b);
  assertSameAnswer(x, y);
  if (!x.command) return;
  const auto& p = std::get<AckCmd>(x.command->command).items;
  const auto& q = std::get<AckCmd>(y.command->command).items;
  RC_ASSERT(p.size() == q.size());
  for (size_t i = 0; i < p.size(); ++i) assertSameAck(p[i], q[i]);
}

// A push item as a client writes it.
rc::Gen<std::string> genPushItem() {
  return rc::gen::map(rc::gen::tuple(genField({"q", "q", ""}), genField({"p", ""}),
                                     genField({"t", ""}), genJsonText(2)),
                      [](const auto& t) {
                        return "{\"queue\":" + std::get<0>(t) + ",\"partition\":" + std::get<1>(t) +
                               ",\"transactionId\":" + std::get<2>(t) +
                               ",\"payload\":" + std::get<3>(t) + "}";
                      });
}

// Likewise a push: the same items, ids and refusals; the payload differs only in form.
RC_GTEST_PROP(JsonScanProp, APushReadsTheSameEitherWay, ()) {
  std::string list = joined(*genItems(genPushItem()));
  StepIds a, b;
  Parsed x = parse_push("{\"items\":[" + list + "]}", EdgeSettings{}, a);
  Parsed y = parse_push("{\"items\":1,\"items\":[" + list + "]}", EdgeSettings{}, b);
  assertSameAnswer(x, y);
  if (!x.command) return;
  assertSamePushItems(push_of(x).items, push_of(y).items);
}

// One operation of a transaction: an ack (its type last, as workers often write it), a push
// of items, or a push that is its own item.
rc::Gen<std::string> genTxnOperation() {
  auto type = [](const char* usual) {
    return genField({usual, usual, usual, usual, usual, usual, usual, "kv"});
  };
  auto ack = rc::gen::map(
      rc::gen::tuple(
          genField({"t1", "t2", "t1", "t2", ""}),
          genField({"12", "12", "12", "12", "12", "12", "x"}),
          genField({"completed", "completed", "completed", "completed", "failed", "bad"}),
          genField({"0190a0b0-0000-7000-8000-000000000001", "0190a0b0-0000-7000-8000-000000000002",
                    "", "nope"}),
          genField({"g", ""}), type("ack")),
      [](const auto& t) {
        return "{\"transactionId\":" + std::get<0>(t) + ",\"partitionId\":" + std::get<1>(t) +
               ",\"status\":" + std::get<2>(t) + ",\"leaseId\":" + std::get<3>(t) +
               ",\"consumerGroup\":" + std::get<4>(t) + ",\"type\":" + std::get<5>(t) + "}";
      });
  auto items = rc::gen::map(rc::gen::pair(type("push"), genItems(genPushItem())), [](auto p) {
    return "{\"type\":" + p.first + ",\"items\":[" + joined(p.second) + "]}";
  });
  auto one = rc::gen::map(rc::gen::pair(type("push"), genPushItem()),
                          [](auto p) { return "{\"type\":" + p.first + "," + p.second.substr(1); });
  return rc::gen::oneOf(ack, items, one);
}

// Likewise a transaction of acks and pushes: the same operations, leases, ids and refusals.
RC_GTEST_PROP(JsonScanProp, ATransactionReadsTheSameEitherWay, ()) {
  std::string list = joined(*genItems(genTxnOperation()));
  StepIds a, b;
  Parsed x = parse_transaction("{\"operations\":[" + list + "]}", EdgeSettings{}, a);
  Parsed y =
      parse_transaction("{\"operations\":1,\"operations\":[" + list + "]}", EdgeSettings{}, b);
  assertSameAnswer(x, y);
  if (!x.command) return;
  const auto& p = std::get<TxnCmd>(x.command->command);
  const auto& q = std::get<TxnCmd>(y.command->command);
  RC_ASSERT(p.transaction_id == q.transaction_id);
  RC_ASSERT(p.required_leases == q.required_leases);
  RC_ASSERT(p.operations.size() == q.operations.size());
  for (size_t i = 0; i < p.operations.size(); ++i) {
    const TxnOperation& m = p.operations[i];
    const TxnOperation& n = q.operations[i];
    RC_ASSERT(m.is_ack == n.is_ack);
    assertSameAck(m.ack, n.ack);
    assertSamePushItems(m.items, n.items);
  }
}

TEST(JsonScan, ATransactionPushKeepsItsPayloadAsSent) {
  StepIds ids;
  Parsed p = parse_transaction(
      R"({"operations":[{"type":"push","queue":"q","payload":{"b": 1.50, "a":[2 ,1]}}]})",
      EdgeSettings{}, ids);
  ASSERT_TRUE(p.command.has_value()) << p.answer.body;
  const auto& cmd = std::get<TxnCmd>(p.command->command);
  EXPECT_EQ(cmd.operations[0].items[0].payload, R"({"b": 1.50, "a":[2 ,1]})");
  // kv goes to the general parser, which reads it and stores the payload compacted.
  p = parse_transaction(R"({"operations":[{"type":"push","queue":"q","payload":{"b": 1}}],)"
                        R"("kv":[{"op":"put","ns":"n","key":"k","value":1,"forever":true}]})",
                        EdgeSettings{}, ids);
  ASSERT_TRUE(p.command.has_value()) << p.answer.body;
  EXPECT_EQ(std::get<TxnCmd>(p.command->command).operations[0].items[0].payload, R"({"b":1})");
  EXPECT_EQ(std::get<TxnCmd>(p.command->command).kv.size(), 1u);
}

// Reply strings: whatever bytes a name holds, the answer is JSON that reads back the same.
RC_GTEST_PROP(JsonWriterProp, StringsReadBackAsWritten, (const std::string& text)) {
  std::string valid = json(text).dump(-1, ' ', false, json::error_handler_t::replace);
  std::string name = json::parse(valid).get<std::string>();
  JsonWriter w;
  w.begin_object().key(name).string(name).end_object();
  json back = json::parse(w.text());
  RC_ASSERT(back.size() == 1u);
  RC_ASSERT(back.begin().key() == name);
  RC_ASSERT(back.begin().value().get<std::string>() == name);
}

TEST(JsonWriter, EscapesQuotesBackslashesAndControlCharacters) {
  JsonWriter w;
  w.string(
      std::string("a\"b\\c\n\x01"
                  "d\te\x1f",
                  11));
  EXPECT_EQ(w.text(), R"("a\"b\\c\n\u0001d\te\u001f")");
}

// Strings are checked sixteen bytes at a time, then eight, then one: a byte that needs an
// escape is found wherever it sits in a block, and bytes at 0x20 and above (UTF-8 included)
// are copied as they are.
TEST(JsonWriter, FindsTheByteToEscapeAtEveryPositionOfAWord) {
  const std::string specials("\x00\x01\x1f\"\\", 5);
  const std::string plain("\x20\x21\x7f\x80\xc3\xa9", 6);
  for (size_t size = 1; size <= 41; ++size) {
    for (size_t at = 0; at < size; ++at) {
      for (char c : specials + plain) {
        std::string text(size, 'x');
        text[at] = c;
        bool special = specials.find(c) != std::string::npos;
        std::string expected = special ? json(text).dump() : "\"" + text + "\"";
        JsonWriter w;
        w.string(text);
        EXPECT_EQ(w.text(), expected) << "size " << size << ", byte " << int(c) << " at " << at;
      }
    }
  }
}

TEST(JsonWriter, LiteralKeysAndOtherKeysRenderAlike) {
  JsonWriter literal, other;
  const char* name = "offset";
  literal.begin_object().key("offset").number(1).key("a").string("b").end_object();
  other.begin_object().key(std::string_view(name)).number(1).key(std::string("a")).string("b");
  other.end_object();
  EXPECT_EQ(literal.text(), R"({"offset":1,"a":"b"})");
  EXPECT_EQ(other.text(), literal.text());
}

}  // namespace
}  // namespace queen::server
