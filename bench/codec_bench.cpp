// Times the edge's reading of the hot request bodies (push, ack batch, transaction), each
// read by the scanner and by the general parser, in the shapes queen-bench sends, and the
// rendering of push and pop answers. The general path is forced by a repeated key in front of
// the body, which the scanner leaves to it. Prints nanoseconds per body and per message; a
// benchmark, not a test.
//   queen-codec-bench [iterations]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "server/api/api.h"

namespace {

using namespace queen::server;

struct Ids : IdSource {
  int64_t now_ms() override { return 1700000000000; }
  uint64_t random_u64() override { return ++n; }
  uint64_t n = 0;
};

std::string payload(int i) {
  // About 256 bytes, as queen-bench sends.
  return "{\"id\":" + std::to_string(i) + ",\"kind\":\"order\",\"note\":\"" +
         std::string(200, 'x') + "\",\"total\":" + std::to_string(i * 7) + "}";
}

std::string push_body(int items) {
  std::string out = "{\"items\":[";
  for (int i = 0; i < items; ++i) {
    if (i > 0) out += ',';
    out += "{\"queue\":\"bench\",\"partition\":\"p7\",\"payload\":" + payload(i) + "}";
  }
  return out + "]}";
}

std::string ack_item(int i) {
  return "{\"transactionId\":\"0190a0b0-0000-7000-8000-" + std::to_string(100000000000 + i) +
         "\",\"partitionId\":\"12\",\"leaseId\":\"0190a0b0-0000-7000-8000-000000000001\"," +
         "\"status\":\"completed\"";
}

std::string ack_body(int items) {
  std::string out = "{\"consumerGroup\":\"bench\",\"acknowledgments\":[";
  for (int i = 0; i < items; ++i) out += (i > 0 ? "," : "") + ack_item(i) + "}";
  return out + "]}";
}

// An ack and a push of 10 messages, as the txn scenario sends.
std::string txn_body() {
  std::string out = "{\"operations\":[" + ack_item(0) +
                    ",\"type\":\"ack\",\"consumerGroup\":\"bench\"},{\"type\":\"push\",\"items\":[";
  for (int i = 0; i < 10; ++i) {
    if (i > 0) out += ',';
    out += "{\"queue\":\"bench-out\",\"partition\":\"12\",\"payload\":{\"i\":" + std::to_string(i) +
           "}}";
  }
  return out + "]}]}";
}

// `body` with a repeated `key` in front: the scanner refuses it, the general parser reads it.
std::string general(const std::string& body, const char* key) {
  return "{\"" + std::string(key) + "\":1," + body.substr(1);
}

// A push of 100 messages answered, and (below) a pop of 100 messages.
queen::Reply push_reply() {
  queen::PushReply r;
  for (uint32_t i = 0; i < 100; ++i) {
    queen::PushResult x;
    x.index = i;
    x.message_id.bytes[15] = static_cast<uint8_t>(i);
    x.transaction_id = "0190a0b0-0000-7000-8000-" + std::to_string(100000000000 + i);
    x.queue = "bench";
    x.partition = "p7";
    x.partition_id = queen::PartitionId(12);
    x.offset = queen::Offset(1000000 + i);
    r.results.push_back(std::move(x));
  }
  return queen::Reply{std::move(r)};
}

// An ack batch of 100 answered: the last one releases the lease, as a whole batch does.
queen::Reply ack_reply() {
  queen::AckReply r;
  for (uint32_t i = 0; i < 100; ++i) {
    queen::AckResult x;
    x.index = i;
    x.transaction_id = "0190a0b0-0000-7000-8000-" + std::to_string(100000000000 + i);
    x.success = true;
    x.lease_released = i == 99;
    x.queue = "bench";
    x.partition = "p7";
    r.results.push_back(std::move(x));
  }
  return queen::Reply{std::move(r)};
}

queen::Reply pop_reply() {
  queen::PopReply r;
  r.queue = "bench";
  for (uint32_t i = 0; i < 100; ++i) {
    queen::PopMessage m;
    m.queue = "bench";
    m.partition = "p7";
    m.partition_id = queen::PartitionId(12);
    m.offset = queen::Offset(1000000 + i);
    m.transaction_id = "0190a0b0-0000-7000-8000-" + std::to_string(100000000000 + i);
    m.message_id.bytes[15] = static_cast<uint8_t>(i);
    m.created_us = 1700000000000000 + i;
    m.payload = payload(static_cast<int>(i));
    m.lease_id.bytes[0] = 1;
    r.messages.push_back(std::move(m));
  }
  return queen::Reply{std::move(r)};
}

void time_render(const char* name, const queen::Reply& reply, int messages, int iterations) {
  size_t bytes = 0;
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iterations; ++i) bytes += render_reply(reply).body.size();
  double ns =
      std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count() /
      iterations;
  std::printf("%-22s %9.0f ns/body %8.0f ns/message (%zu bytes)\n", name, ns, ns / messages,
              bytes / static_cast<size_t>(iterations));
}

template <class F>
void time(const char* name, const std::string& body, int messages, int iterations, F&& parse) {
  Ids ids;
  EdgeSettings settings;
  if (!parse(body, settings, ids).command) {
    std::fprintf(stderr, "%s: refused\n", name);
    std::exit(1);
  }
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iterations; ++i) parse(body, settings, ids);
  double ns =
      std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count() /
      iterations;
  std::printf("%-22s %9.0f ns/body %8.0f ns/message\n", name, ns, ns / messages);
}

}  // namespace

int main(int argc, char** argv) {
  int n = argc > 1 ? std::atoi(argv[1]) : 2000;
  std::string push = push_body(100), acks = ack_body(100), txn = txn_body();
  time("push scanned", push, 100, n, parse_push);
  time("push general", general(push, "items"), 100, n, parse_push);
  time("ack batch scanned", acks, 100, n, parse_ack_batch);
  time("ack batch general", general(acks, "acknowledgments"), 100, n, parse_ack_batch);
  time("transaction scanned", txn, 11, n * 10, parse_transaction);
  time("transaction general", general(txn, "operations"), 11, n * 10, parse_transaction);
  time_render("render push answer", push_reply(), 100, n);
  time_render("render pop answer", pop_reply(), 100, n);
  time_render("render ack answer", ack_reply(), 100, n);
  return 0;
}
