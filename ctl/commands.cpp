#include "ctl/commands.h"

#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>

namespace queen::ctl {
namespace {

// ---------- answers ----------

// What a failed answer means for the exit code, printed on stderr.
int failure(const Response& r, const std::string& what) {
  if (r.status == 0) {
    std::fprintf(stderr, "queenctl: %s: no answer from the node: %s\n", what.c_str(),
                 r.error.c_str());
    return kUnreachable;
  }
  std::string reason = r.body;
  json body = json::parse(r.body, nullptr, false);
  if (body.is_object()) {
    for (const char* key : {"detail", "error", "message"})
      if (body.contains(key) && body[key].is_string()) {
        reason = body[key].get<std::string>();
        break;
      }
  }
  std::fprintf(stderr, "queenctl: %s: %d %s\n", what.c_str(), r.status, reason.c_str());
  return r.status == 404 ? kNotFound : kApiError;
}

bool ok(const Response& r) {
  return r.status >= 200 && r.status < 300;
}

json body_of(const Response& r) {
  return r.body.empty() ? json() : json::parse(r.body, nullptr, false);
}

// Prints the answer as JSON (--json) or hands it to `human`; a failure prints its reason.
int answer(Ctl& c, const Response& r, const std::string& what,
           const std::function<void(const json&)>& human) {
  if (!ok(r)) return failure(r, what);
  json body = body_of(r);
  if (c.as_json)
    std::cout << (r.body.empty() ? "null" : body.dump()) << "\n";
  else
    human(body);
  return kOk;
}

int usage_error(const std::string& message) {
  std::fprintf(stderr, "queenctl: %s (see queenctl --help)\n", message.c_str());
  return kUsage;
}

// A value from the command line: JSON when it parses as JSON, else the text as a string.
json value_of(const std::string& text) {
  json v = json::parse(text, nullptr, false);
  return v.is_discarded() ? json(text) : v;
}

std::string page_query(const Args& a, int64_t limit_default) {
  std::string q = "limit=" + encode(a.option_or("limit", std::to_string(limit_default)));
  if (auto o = a.option("offset")) q += "&offset=" + encode(*o);
  if (auto s = a.option("search")) q += "&search=" + encode(*s);
  return q;
}

void print_page_footer(const json& pagination, size_t shown) {
  if (!pagination.is_object()) return;
  uint64_t offset = pagination.value("offset", 0), total = pagination.value("total", 0);
  if (shown == 0) return void(std::printf("(none of %llu)\n", (unsigned long long)total));
  std::printf("(%llu-%llu of %llu)\n", (unsigned long long)offset + 1,
              (unsigned long long)(offset + shown), (unsigned long long)total);
}

// ---------- node and cluster ----------

int health(Ctl& c) {
  Response r = c.http.get("/health");
  if (r.status == 0) return failure(r, "health");
  json body = body_of(r);
  if (c.as_json)
    std::cout << body.dump() << "\n";
  else {
    json raft = body.value("raft", json::object());
    std::printf("%s  role=%s leader=%s term=%s commit=%s applied=%s\n",
                cell(body, "status").c_str(), cell(raft, "role").c_str(),
                cell(raft, "leader").c_str(), cell(raft, "term").c_str(),
                cell(raft, "commit").c_str(), cell(raft, "applied").c_str());
  }
  return r.status == 200 ? kOk : kUnreachable;
}

int status(Ctl& c) {
  Response r = c.http.get("/api/v1/resources/overview");
  return answer(c, r, "status", [&](const json& o) {
    json m = o.value("messages", json::object());
    Table t({"QUEUES", "PARTITIONS", "MESSAGES", "PENDING", "PROCESSING", "DEAD", "IN/S", "OUT/S"});
    json tp = o.value("throughput", json::object());
    t.row({cell(o, "queues"), cell(o, "partitions"), cell(m, "total"), cell(m, "pending"),
           cell(m, "processing"), cell(m, "deadLetter"), cell(tp, "ingestedPerSecond"),
           cell(tp, "processedPerSecond")});
    std::cout << t.render();
  });
}

int cluster(Ctl& c) {
  Response r = c.http.get("/api/v1/system/raft/membership");
  return answer(c, r, "cluster", [&](const json& m) {
    std::printf("leader %s  term %s  commit %s  cluster version %s\n", cell(m, "leader").c_str(),
                cell(m, "term").c_str(), cell(m, "commit").c_str(),
                cell(m, "clusterVersion").c_str());
    Table t({"ID", "ROLE", "RAFT", "HTTP", "MATCH", "LAG", "FENCED"});
    for (const json& x : m.value("members", json::array()))
      t.row({cell(x, "id"), cell(x, "role"), cell(x, "raft"), cell(x, "http"), cell(x, "match"),
             cell(x, "lag"), cell(x, "fenced")});
    std::cout << t.render();
  });
}

// ---------- queues ----------

int queues(Ctl& c) {
  std::string q = page_query(c.args, 100);
  if (auto ns = c.args.option("namespace")) q += "&namespace=" + encode(*ns);
  Response r = c.http.get("/api/v1/status/queues?" + q);
  return answer(c, r, "queues", [&](const json& b) {
    Table t({"QUEUE", "PARTITIONS", "MESSAGES", "PENDING", "PROCESSING", "DEAD"});
    for (const json& x : b.value("queues", json::array())) {
      json m = x.value("messages", json::object());
      t.row({cell(x, "name"), cell(x, "partitions"), cell(m, "total"), cell(m, "pending"),
             cell(m, "processing"), cell(m, "deadLetter")});
    }
    std::cout << t.render();
    print_page_footer(b.value("pagination", json()), t.size());
  });
}

int queue(Ctl& c) {
  if (c.args.positional.size() != 2) return usage_error("queue takes one queue name");
  const std::string& name = c.args.positional[1];
  Response r = c.http.get("/api/v1/status/queues/" + encode(name) + "?" + page_query(c.args, 20));
  return answer(c, r, "queue " + name, [&](const json& b) {
    json q = b.value("queue", json::object()), cfg = q.value("config", json::object());
    std::printf("queue %s  namespace %s  task %s\n", cell(q, "name").c_str(),
                cell(q, "namespace").c_str(), cell(q, "task").c_str());
    for (const auto& [k, v] : cfg.items()) std::printf("  %s: %s\n", k.c_str(), cell(v).c_str());
    Table t({"PARTITION", "MESSAGES", "PENDING", "PROCESSING", "COMPLETED", "DEAD", "NEWEST"});
    for (const json& p : b.value("partitions", json::array())) {
      json m = p.value("messages", json::object());
      t.row({cell(p, "name"), cell(m, "total"), cell(m, "pending"), cell(m, "processing"),
             cell(m, "completed"), cell(m, "deadLetter"), cell(p, "newestMessage")});
    }
    std::cout << t.render();
    print_page_footer(b.value("pagination", json()), t.size());
  });
}

// ---------- push ----------

struct PushTotals {
  uint64_t queued = 0, duplicates = 0, failed = 0;
};

int send_batch(Ctl& c, json& items, PushTotals* totals) {
  if (items.empty()) return kOk;
  json body = {{"items", std::move(items)}};
  items = json::array();
  Response r = c.http.request("POST", "/api/v1/push", body.dump());
  if (!ok(r)) return failure(r, "push");
  json results = body_of(r);
  if (c.as_json) std::cout << results.dump() << "\n";
  for (const json& x : results) {
    std::string s = x.value("status", "");
    ++(s == "queued" ? totals->queued : s == "duplicate" ? totals->duplicates : totals->failed);
  }
  return kOk;
}

json push_item(const Args& a, const std::string& queue, json payload) {
  json item = {{"queue", queue}, {"payload", std::move(payload)}};
  if (auto p = a.option("partition")) item["partition"] = *p;
  return item;
}

// Pushes one message per line of `in` (NDJSON: each line JSON, or text sent as a string when
// it is not JSON), in batches; a progress bar on stderr when it is a terminal or --progress.
int push_lines(Ctl& c, std::istream& in, uint64_t size_bytes, const std::string& queue,
               int64_t batch, PushTotals* totals) {
  bool tty = isatty(STDERR_FILENO) && !c.args.flag("no-progress");
  Progress progress("push " + queue, size_bytes, c.args.flag("progress") || tty);
  json items = json::array();
  uint64_t read_bytes = 0, lines = 0;
  std::string line;
  while (std::getline(in, line)) {
    read_bytes += line.size() + 1;
    if (line.empty()) continue;
    ++lines;
    items.push_back(push_item(c.args, queue, value_of(line)));
    if (static_cast<int64_t>(items.size()) >= batch) {
      if (int rc = send_batch(c, items, totals); rc != kOk) {
        std::fprintf(stderr, "queenctl: stopped at line %llu; the lines before it were pushed\n",
                     (unsigned long long)lines);
        return rc;
      }
      progress.update(read_bytes, totals->queued + totals->duplicates);
    }
  }
  int rc = send_batch(c, items, totals);
  progress.finish(read_bytes, totals->queued + totals->duplicates);
  return rc;
}

int push(Ctl& c) {
  if (c.args.positional.size() < 2) return usage_error("push needs a queue");
  const std::string& queue = c.args.positional[1];
  std::string error;
  auto batch = int_option(c.args, "batch", 500, &error);
  if (!batch || *batch == 0) return usage_error(error.empty() ? "--batch must be > 0" : error);
  PushTotals totals;
  int rc = kOk;
  if (auto file = c.args.option("file")) {
    if (c.args.positional.size() > 2) return usage_error("give payloads or --file, not both");
    if (*file == "-") {
      rc = push_lines(c, std::cin, 0, queue, *batch, &totals);
    } else {
      std::ifstream in(*file, std::ios::binary | std::ios::ate);
      if (!in) return usage_error("cannot read " + *file);
      uint64_t size = static_cast<uint64_t>(in.tellg());
      in.seekg(0);
      rc = push_lines(c, in, size, queue, *batch, &totals);
    }
  } else {
    if (c.args.positional.size() < 3) return usage_error("push needs payloads or --file");
    json items = json::array();
    for (size_t i = 2; i < c.args.positional.size(); ++i)
      items.push_back(push_item(c.args, queue, value_of(c.args.positional[i])));
    rc = send_batch(c, items, &totals);
  }
  if (!c.as_json)
    std::printf("pushed %llu to %s (%llu duplicates, %llu failed)\n",
                (unsigned long long)totals.queued, queue.c_str(),
                (unsigned long long)totals.duplicates, (unsigned long long)totals.failed);
  return rc != kOk ? rc : totals.failed > 0 ? kApiError : kOk;
}

// ---------- pop, tail, ack ----------

std::string payload_of(const json& m) {
  if (m.contains("data")) return m["data"].dump();
  if (m.contains("payload")) return m["payload"].dump();
  return "-";  // a browse lists messages without their payloads
}

void print_messages(const json& messages) {
  Table t({"PARTITION", "PARTITION_ID", "TRANSACTION_ID", "LEASE", "CREATED", "PAYLOAD"});
  for (const json& m : messages)
    t.row({cell(m, "partition"), cell(m, "partitionId"), cell(m, "transactionId"),
           cell(m, "leaseId"), cell(m, "createdAt"), payload_of(m)});
  std::cout << t.render();
}

std::string pop_target(const Args& a, const std::string& queue, int64_t batch, bool wait,
                       int64_t wait_ms, bool auto_ack) {
  std::string t = "/api/v1/pop/queue/" + encode(queue);
  if (auto p = a.option("partition")) t += "/partition/" + encode(*p);
  t += "?batch=" + std::to_string(batch);
  if (auto g = a.option("group")) t += "&consumerGroup=" + encode(*g);
  t += wait ? "&wait=true&timeout=" + std::to_string(wait_ms) : "&wait=false";
  if (auto_ack) t += "&autoAck=true";
  return t;
}

int ack_all(Ctl& c, const json& messages) {
  json acks = json::array();
  for (const json& m : messages) {
    json a = {{"transactionId", m["transactionId"]},
              {"partitionId", m["partitionId"]},
              {"leaseId", m.value("leaseId", json())},
              {"status", "completed"}};
    if (auto g = c.args.option("group")) a["consumerGroup"] = *g;
    acks.push_back(a);
  }
  Response r = c.http.request("POST", "/api/v1/ack/batch", json{{"acknowledgments", acks}}.dump());
  return ok(r) ? kOk : failure(r, "ack");
}

int pop(Ctl& c) {
  if (c.args.positional.size() != 2) return usage_error("pop takes one queue name");
  std::string error;
  auto batch = int_option(c.args, "batch", 1, &error);
  auto wait_ms = int_option(c.args, "timeout-ms", 30000, &error);
  if (!batch || !wait_ms) return usage_error(error);
  bool wait = c.args.flag("wait");
  std::string target = pop_target(c.args, c.args.positional[1], *batch, wait, *wait_ms, false);
  Response r = c.http.request_within("GET", target, "", *wait_ms + 10000);
  if (r.status == 204) {
    if (c.as_json)
      std::cout << json{{"messages", json::array()}}.dump() << "\n";
    else
      std::printf("no messages\n");
    return kOk;
  }
  int rc = answer(c, r, "pop", [](const json& b) { print_messages(b["messages"]); });
  if (rc == kOk && c.args.flag("ack")) rc = ack_all(c, body_of(r)["messages"]);
  return rc;
}

std::atomic<bool> g_interrupted{false};

// tail QUEUE: the newest messages; with -f, follows the queue as a consumer group (default
// queenctl-tail, from new messages, auto-acked) until interrupted or --count messages.
int tail(Ctl& c) {
  if (c.args.positional.size() != 2) return usage_error("tail takes one queue name");
  const std::string& queue = c.args.positional[1];
  std::string error;
  auto count = int_option(c.args, "count", 0, &error);
  auto limit = int_option(c.args, "limit", 10, &error);
  if (!count || !limit) return usage_error(error);
  if (!c.args.flag("follow")) {
    Response r =
        c.http.get("/api/v1/messages?queue=" + encode(queue) + "&limit=" + std::to_string(*limit));
    return answer(c, r, "tail", [](const json& b) { print_messages(b["messages"]); });
  }
  Args follow = c.args;
  if (!follow.option("group")) follow.options["group"] = "queenctl-tail";
  std::signal(SIGINT, [](int) { g_interrupted = true; });
  std::signal(SIGTERM, [](int) { g_interrupted = true; });
  constexpr int64_t kPollWaitMs = 1000;  // short, so an interrupt is seen within a second
  std::string target =
      pop_target(follow, queue, 100, true, kPollWaitMs, true) + "&subscriptionMode=new";
  int64_t seen = 0;
  while (!g_interrupted && (*count == 0 || seen < *count)) {
    Response r = c.http.request_within("GET", target, "", kPollWaitMs + 10000);
    if (r.status == 204) continue;
    if (!ok(r)) return g_interrupted ? kOk : failure(r, "tail");
    json body = body_of(r);  // kept: a range over a temporary's member would dangle
    for (const json& m : body["messages"]) {
      if (c.as_json)
        std::cout << m.dump() << "\n";
      else
        std::cout << cell(m, "partition") << "  " << payload_of(m) << "\n";
      if (*count != 0 && ++seen >= *count) break;
    }
    std::cout.flush();
  }
  return kOk;
}

int ack(Ctl& c) {
  if (c.args.positional.size() != 3)
    return usage_error("ack takes a partition id and a transaction id");
  json a = {{"partitionId", c.args.positional[1]},
            {"transactionId", c.args.positional[2]},
            {"status", c.args.option_or("status", "completed")}};
  if (auto l = c.args.option("lease")) a["leaseId"] = *l;
  if (auto g = c.args.option("group")) a["consumerGroup"] = *g;
  if (auto e = c.args.option("error")) a["error"] = *e;
  Response r = c.http.request("POST", "/api/v1/ack", a.dump());
  if (!ok(r)) return failure(r, "ack");
  json results = body_of(r);
  json first = results.is_array() && !results.empty() ? results[0] : json::object();
  bool success = first.value("success", false);
  if (c.as_json)
    std::cout << results.dump() << "\n";
  else if (success)
    std::printf("acked %s\n", c.args.positional[2].c_str());
  if (!success) std::fprintf(stderr, "queenctl: ack refused: %s\n", cell(first, "error").c_str());
  return success ? kOk : kApiError;
}

// ---------- groups and dead letters ----------

int groups(Ctl& c) {
  if (c.args.positional.size() == 2) {
    const std::string& name = c.args.positional[1];
    Response r = c.http.get("/api/v1/consumer-groups/" + encode(name));
    return answer(c, r, "group " + name, [&](const json& b) {
      Table t({"QUEUE", "PARTITION", "LAG", "LAG_S", "CONSUMED", "LEASED"});
      json list = b.is_array() ? b : json::array({b});
      for (const json& g : list)
        for (const json& p : g.value("partitions", json::array()))
          t.row({cell(g, "queueName"), cell(p, "partition"), cell(p, "offsetLag"),
                 cell(p, "timeLagSeconds"), cell(p, "totalConsumed"), cell(p, "leaseActive")});
      std::cout << t.render();
    });
  }
  Response r = c.http.get("/api/v1/consumer-groups");
  return answer(c, r, "groups", [&](const json& b) {
    Table t({"GROUP", "QUEUE", "MEMBERS", "LAG", "MAX_LAG_S", "STATE"});
    for (const json& g : b)
      t.row({cell(g, "name"), cell(g, "queueName"), cell(g, "members"), cell(g, "totalLag"),
             cell(g, "maxTimeLag"), cell(g, "state")});
    std::cout << t.render();
  });
}

std::string dlq_target(const Args& a, int64_t limit, int64_t offset) {
  std::string t =
      "/api/v1/dlq?limit=" + std::to_string(limit) + "&offset=" + std::to_string(offset);
  if (auto q = a.option("queue")) t += "&queue=" + encode(*q);
  if (auto g = a.option("group")) t += "&consumerGroup=" + encode(*g);
  return t;
}

int dlq(Ctl& c) {
  std::string error;
  auto limit = int_option(c.args, "limit", 50, &error);
  auto offset = int_option(c.args, "offset", 0, &error);
  if (!limit || !offset) return usage_error(error);
  Response r = c.http.get(dlq_target(c.args, *limit, *offset));
  return answer(c, r, "dlq", [&](const json& b) {
    Table t({"DLQ_ID", "QUEUE", "PARTITION", "GROUP", "RETRIES", "FAILED_AT", "ERROR"});
    for (const json& m : b.value("messages", json::array()))
      t.row({cell(m, "dlqId"), cell(m, "queue"), cell(m, "partition"), cell(m, "consumerGroup"),
             cell(m, "retryCount"), cell(m, "failedAt"), cell(m, "errorMessage")});
    std::cout << t.render();
    std::printf("(%zu shown of %s)\n", t.size(), cell(b, "total").c_str());
  });
}

// replay ID... | replay --all [--queue Q] [--group G]: every listed dead letter, with progress.
int replay(Ctl& c) {
  std::vector<std::string> ids(c.args.positional.begin() + 1, c.args.positional.end());
  if (c.args.flag("all")) {
    if (!ids.empty()) return usage_error("give dead-letter ids or --all, not both");
    Response r = c.http.get(dlq_target(c.args, 1000, 0));
    if (!ok(r)) return failure(r, "dlq");
    json listed = body_of(r);
    for (const json& m : listed.value("messages", json::array())) ids.push_back(cell(m, "dlqId"));
  }
  if (ids.empty()) return usage_error("replay needs dead-letter ids or --all");
  Progress progress("replay", ids.size(), c.args.flag("progress"));
  int rc = kOk;
  uint64_t done = 0;
  for (const std::string& id : ids) {
    Response r = c.http.request("POST", "/api/v1/dlq/" + encode(id) + "/replay");
    if (!ok(r))
      rc = failure(r, "replay " + id);
    else if (c.as_json)
      std::cout << r.body << "\n";
    else
      std::printf("replayed %s -> %s\n", id.c_str(), cell(body_of(r), "messageId").c_str());
    ++done;
    progress.update(done, done);
  }
  progress.finish(done, done);
  return rc;
}

// ---------- KV ----------

int kv(Ctl& c) {
  const auto& p = c.args.positional;
  if (p.size() < 4) return usage_error("kv get|put|del NAMESPACE KEY [VALUE]");
  std::string target = "/api/v1/kv/" + encode(p[2]) + "/" + encode(p[3]);
  if (p[1] == "get" && p.size() == 4) {
    Response r = c.http.get(target);
    return answer(c, r, "kv get", [](const json& b) {
      std::cout << (b.contains("value") ? b["value"] : b).dump() << "\n";
    });
  }
  if (p[1] == "put" && p.size() == 5) {
    json body = {{"value", value_of(p[4])}};
    std::string error;
    auto ttl = int_option(c.args, "ttl", 0, &error);
    if (!ttl) return usage_error(error);
    if (*ttl > 0)
      body["ttlSeconds"] = *ttl;
    else
      body["forever"] = true;
    Response r = c.http.request("PUT", target, body.dump());
    return answer(c, r, "kv put", [&](const json& b) {
      std::printf("put %s/%s version %s\n", p[2].c_str(), p[3].c_str(), cell(b, "version").c_str());
    });
  }
  if ((p[1] == "del" || p[1] == "delete") && p.size() == 4) {
    Response r = c.http.request("DELETE", target);
    return answer(c, r, "kv del",
                  [&](const json&) { std::printf("deleted %s/%s\n", p[2].c_str(), p[3].c_str()); });
  }
  return usage_error("kv get|put|del NAMESPACE KEY [VALUE]");
}

}  // namespace

std::string usage() {
  return R"(queenctl: the Queen broker from the command line.

usage: queenctl [--url URL] [--token JWT] [--json] COMMAND [ARGS]

  health                          the node's health (exit 3 when unhealthy or unreachable)
  status                          queues, partitions, messages and throughput
  cluster                         members, roles and replication lag
  queues [--search S] [--limit N] [--offset N] [--namespace NS]
  queue NAME [--search S] [--limit N] [--offset N]   a queue and a page of its partitions
  push QUEUE PAYLOAD...           each argument one message (JSON, or text as a string)
  push QUEUE --file FILE|-        one message per line (NDJSON), --batch N (500); a progress
                                  bar on a terminal or with --progress
  pop QUEUE [--group G] [--partition P] [--batch N] [--wait] [--timeout-ms N] [--ack]
  tail QUEUE [--limit N]          the newest messages
  tail -f QUEUE [--group G] [--count N]   follow new messages (group queenctl-tail, auto-ack)
  ack PARTITION_ID TRANSACTION_ID [--lease L] [--group G] [--status S] [--error E]
  groups [GROUP]                  consumer groups, or one group's lag per partition
  dlq [--queue Q] [--group G] [--limit N] [--offset N]
  replay DLQ_ID... | replay --all [--queue Q] [--group G] [--progress]
  kv get NS KEY | kv put NS KEY VALUE [--ttl S] | kv del NS KEY

The URL defaults to $QUEEN_URL, else http://127.0.0.1:6632; the token to $QUEEN_TOKEN.
--json prints the node's answers, one JSON document per line.
Exit codes: 0 ok, 1 the node answered an error, 2 bad usage or input, 3 no answer (or
unhealthy), 4 not found.
)";
}

int run_command(Ctl& c) {
  static const std::map<std::string, int (*)(Ctl&)> kCommands = {
      {"health", health}, {"status", status}, {"cluster", cluster}, {"queues", queues},
      {"queue", queue},   {"push", push},     {"pop", pop},         {"tail", tail},
      {"ack", ack},       {"groups", groups}, {"group", groups},    {"dlq", dlq},
      {"replay", replay}, {"kv", kv}};
  auto it = kCommands.find(c.args.positional.at(0));
  if (it == kCommands.end()) return usage_error("unknown command " + c.args.positional[0]);
  return it->second(c);
}

}  // namespace queen::ctl
