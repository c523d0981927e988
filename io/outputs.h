// The record of work a node returns from each event (core/node/node.h), in the order the node
// decided it: disk operations, timers, peer messages, forwards, replies and a fatal stop. The
// node does not do any of it; the driver (io/real) or the simulator (io/sim) carries it out
// through the Env (io/carry_out.h) before it hands the node its next event, as etcd-raft's
// Ready and Ra's effects are carried out by their hosts.
//
// Contract:
// - Outputs are carried out in order, all of them, before the node's next event. Operations
//   on one file keep their order; Env's own contract (io/env.h) holds for each.
// - A truncate or remove that fails stops the node (Env::fatal): the node cannot go on with
//   a log it does not know the shape of. A remove with `absent_ok` does not fail on a missing
//   file.
// - A whole-file write's producer reads the node's state as it is when it is carried out,
//   which is as the event left it: the node asks for one only last in an event.
// - `restart`: the node installed a snapshot's files and starts again from them once the rest
//   is carried out (Node::restart_in_place).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "core/api/commands.h"
#include "core/api/replies.h"
#include "core/state/entry.h"
#include "io/env.h"

namespace queen {

namespace output {
struct SetTimer {
  TimerId id = 0;
  int64_t delay_ms = 0;
};
struct Append {
  std::string file;
  Bytes data;
};
struct Sync {
  std::string file;
  uint64_t token = 0;
};
struct WriteWholeFile {
  std::string file;
  Env::FileProducer produce;
  uint64_t token = 0;
  uint64_t expected_bytes = UINT64_MAX;
};
struct Truncate {
  std::string file;
  uint64_t size_bytes = 0;
};
struct Remove {
  std::string file;
  bool absent_ok = false;
};
struct Send {
  uint64_t to_node = 0;
  Bytes message;
};
struct Forward {
  uint64_t to_node = 0;
  uint64_t forward_id = 0;
  std::shared_ptr<const CommandEnvelope> command;
  int64_t remaining_ms = 0;
};
struct Answer {
  ReplyHandle handle = 0;
  Reply reply;
};
struct Fatal {
  std::string reason;
};
struct Members {
  std::vector<Member> members;
};
}  // namespace output

using Output = std::variant<output::SetTimer, output::Append, output::Sync, output::WriteWholeFile,
                            output::Truncate, output::Remove, output::Send, output::Forward,
                            output::Answer, output::Fatal, output::Members>;

class [[nodiscard]] Outputs {
 public:
  void set_timer(TimerId id, int64_t delay_ms) { add(output::SetTimer{id, delay_ms}); }
  void append(std::string file, Bytes data) {
    add(output::Append{std::move(file), std::move(data)});
  }
  void sync(std::string file, uint64_t token) { add(output::Sync{std::move(file), token}); }
  void write_whole_file(std::string file, Env::FileProducer produce, uint64_t token,
                        uint64_t expected_bytes) {
    add(output::WriteWholeFile{std::move(file), std::move(produce), token, expected_bytes});
  }
  void truncate(std::string file, uint64_t size_bytes) {
    add(output::Truncate{std::move(file), size_bytes});
  }
  void remove(std::string file, bool absent_ok = false) {
    add(output::Remove{std::move(file), absent_ok});
  }
  void send(uint64_t to_node, Bytes message) { add(output::Send{to_node, std::move(message)}); }
  void forward(uint64_t to_node, uint64_t forward_id,
               std::shared_ptr<const CommandEnvelope> command, int64_t remaining_ms) {
    add(output::Forward{to_node, forward_id, std::move(command), remaining_ms});
  }
  void reply(ReplyHandle handle, Reply reply) { add(output::Answer{handle, std::move(reply)}); }
  void fatal(std::string reason) { add(output::Fatal{std::move(reason)}); }
  void members(std::vector<Member> members) { add(output::Members{std::move(members)}); }

  std::vector<Output>& items() { return items_; }
  const std::vector<Output>& items() const { return items_; }

  bool restart = false;

 private:
  void add(Output o) { items_.push_back(std::move(o)); }
  std::vector<Output> items_;
};

}  // namespace queen
