// Thin wrappers over the HTTP API used by the integration tests: build the bodies and
// targets the way a client would, and return the decoded answer.
#pragma once

#include <sstream>
#include <string>
#include <vector>

#include "tests/server/harness.h"

namespace queen::test {

struct PushSpec {
  std::string queue;
  std::string partition;  // empty: leave it out (the Default partition)
  std::string transaction_id;
  json payload = nullptr;
};

inline json push_body(const std::vector<PushSpec>& items) {
  json arr = json::array();
  for (const auto& it : items) {
    json item = {{"queue", it.queue}, {"payload", it.payload}};
    if (!it.partition.empty()) item["partition"] = it.partition;
    if (!it.transaction_id.empty()) item["transactionId"] = it.transaction_id;
    arr.push_back(item);
  }
  return json{{"items", arr}};
}

inline HttpResult push(HttpClient& c, const std::vector<PushSpec>& items) {
  return c.post("/api/v1/push", push_body(items));
}

struct PopSpec {
  std::string queue;
  std::string partition;  // empty: any partition
  std::string group;      // empty: queue mode
  int batch = 1;
  bool wait = false;
  int timeout_ms = 0;
  std::string subscription_mode;
  bool auto_ack = false;
};

inline std::string pop_target(const PopSpec& s) {
  std::string t = "/api/v1/pop/queue/" + url_encode(s.queue);
  if (!s.partition.empty()) t += "/partition/" + url_encode(s.partition);
  t += "?batch=" + std::to_string(s.batch);
  if (!s.group.empty()) t += "&consumerGroup=" + url_encode(s.group);
  if (s.wait) t += "&wait=true&timeout=" + std::to_string(s.timeout_ms);
  if (!s.subscription_mode.empty()) t += "&subscriptionMode=" + s.subscription_mode;
  if (s.auto_ack) t += "&autoAck=true";
  return t;
}

inline HttpResult pop(HttpClient& c, const PopSpec& s) {
  return c.get(pop_target(s), s.wait ? s.timeout_ms + 10000 : 10000);
}

inline json ack_item(const json& message, const std::string& status,
                     const std::string& group = "") {
  json a = {{"transactionId", message["transactionId"]},
            {"partitionId", message["partitionId"]},
            {"leaseId", message["leaseId"]},
            {"status", status}};
  if (!group.empty()) a["consumerGroup"] = group;
  return a;
}

inline HttpResult ack(HttpClient& c, const json& message, const std::string& status,
                      const std::string& group = "") {
  return c.post("/api/v1/ack", ack_item(message, status, group));
}

inline HttpResult configure(HttpClient& c, const std::string& queue, const json& options,
                            const std::string& mode = "") {
  json body = {{"queue", queue}, {"options", options}};
  if (!mode.empty()) body["mode"] = mode;
  return c.post("/api/v1/configure", body);
}

// Pops `queue` for `group` (subscriptionMode=all) until it answers 204, acking every batch
// completed; appends what it received to `out`. False, with `error` set, on any other answer.
inline bool drain(HttpClient& c, const std::string& queue, const std::string& group,
                  std::vector<json>* out, std::string* error, int pops_max = 100000) {
  for (int i = 0; i < pops_max; ++i) {
    HttpResult r =
        pop(c, {.queue = queue, .group = group, .batch = 1000, .subscription_mode = "all"});
    if (r.status == 204) return true;
    if (r.status != 200) {
      *error = "pop answered " + std::to_string(r.status) + " " + r.body + r.transport_error;
      return false;
    }
    json acks = json::array();
    json answer = r.body_json();
    for (const json& m : answer["messages"]) {
      out->push_back(m);
      acks.push_back(ack_item(m, "completed"));
    }
    HttpResult a =
        c.post("/api/v1/ack/batch", json{{"acknowledgments", acks}, {"consumerGroup", group}});
    if (a.status != 200) {
      *error = "ack answered " + std::to_string(a.status) + " " + a.body + a.transport_error;
      return false;
    }
  }
  *error = "still not drained after " + std::to_string(pops_max) + " pops";
  return false;
}

// The value of one series of /metrics/prometheus (its name and labels exactly); -1: absent.
inline double metric(HttpClient& client, const std::string& series) {
  HttpResult r = client.get("/metrics/prometheus");
  std::istringstream in(r.body);
  for (std::string line; std::getline(in, line);)
    if (line.rfind(series + " ", 0) == 0) return std::stod(line.substr(series.size() + 1));
  return -1;
}

}  // namespace queen::test
