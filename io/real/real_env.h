// The environment over the real world: the system wall clock, a seeded mt19937_64, Asio
// steady timers, the Disk (a writer thread with fdatasync) and a sink that routes replies to
// the connections that own them. Every method is called on the node thread, the one thread
// running `node_context`; every event it produces (timer, sync completion) is posted there.
//
// fatal() logs and ends the process with exit code 1: a node whose fsync failed must not go
// on serving, and it recovers from what is durable when it starts again.
//
// Payloads of encrypted queues are sealed and opened with AES-256-GCM under the key given to
// set_payload_key() (io/real/payload_cipher.h); without a key both fail, and the node refuses
// pushes to encrypted queues rather than store them in the clear.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <random>

#include "io/env.h"
#include "io/real/disk.h"
#include "io/real/payload_cipher.h"

namespace queen {
class Node;
}

namespace queen::real {

// Receives every reply on the node thread; it must hand it off without blocking.
class ReplySink {
 public:
  virtual ~ReplySink() = default;
  virtual void deliver(ReplyHandle handle, Reply reply) = 0;
};

class RealEnv final : public Env {
 public:
  RealEnv(boost::asio::io_context& node_context, Disk& disk, ReplySink& sink, uint64_t seed);
  ~RealEnv() override;

  // The node that timer events go to; set before the node is started.
  void attach(Node* node) { node_ = node; }

  int64_t now_us() override;
  uint64_t random_u64() override { return rng_(); }
  void set_timer(TimerId id, int64_t delay_ms) override;

  void append(const std::string& file, Bytes data) override;
  void sync(const std::string& file, uint64_t token) override;
  Result<Bytes> read(const std::string& file, uint64_t pos, uint64_t len) override;
  Status read_into(const std::string& file, uint64_t pos, uint64_t len, Bytes* out) override;
  Status truncate(const std::string& file, uint64_t size_bytes) override;
  Status remove(const std::string& file) override;
  Status rename(const std::string& from, const std::string& to) override;
  Result<std::vector<FileInfo>> list_files() override { return disk_.list_files(); }
  void write_whole_file(const std::string& file, const FileProducer& produce, uint64_t token,
                        uint64_t expected_bytes) override {
    disk_.write_whole(file, produce, token, expected_bytes);
  }
  Result<uint64_t> file_size(const std::string& file) override { return disk_.file_size(file); }

  void reply(ReplyHandle handle, Reply reply) override;
  // Peers: messages go to the cluster transport (io/real/transport.h) once one is set.
  void send(uint64_t to_node, Bytes message) override {
    if (peer_sender_) peer_sender_(to_node, std::move(message));
  }
  void set_peer_sender(std::function<void(uint64_t, Bytes)> sender) {
    peer_sender_ = std::move(sender);
  }
  // The membership in use goes to the transport (its peers) and the edge (their addresses).
  void members_changed(const std::vector<Member>& members) override {
    if (members_handler_) members_handler_(members);
  }
  void set_members_handler(std::function<void(const std::vector<Member>&)> handler) {
    members_handler_ = std::move(handler);
  }
  // Forwarded commands go to the edge's forwarder (server/command_forwarder.h) once one is set.
  using CommandForwarder =
      std::function<void(uint64_t to, uint64_t forward_id,
                         std::shared_ptr<const CommandEnvelope> command, int64_t remaining_ms)>;
  void forward(uint64_t to_node, uint64_t forward_id,
               std::shared_ptr<const CommandEnvelope> command, int64_t remaining_ms) override {
    if (command_forwarder_)
      command_forwarder_(to_node, forward_id, std::move(command), remaining_ms);
  }
  void set_command_forwarder(CommandForwarder forwarder) {
    command_forwarder_ = std::move(forwarder);
  }
  [[noreturn]] void fatal(std::string_view reason) override;
  void log(LogLevel level, std::string_view message) override;

  // Set before the node is started (not thread-safe against seal/open).
  void set_payload_key(const PayloadKey& key) { cipher_ = std::make_unique<PayloadCipher>(key); }
  Result<std::string> seal_payload(std::string_view plain) override;
  Result<std::string> open_payload(std::string_view sealed) override;

 private:
  struct TimerSlot {
    std::unique_ptr<boost::asio::steady_timer> timer;
    uint64_t generation = 0;  // a firing whose generation is stale was replaced
  };

  boost::asio::io_context& context_;
  Disk& disk_;
  ReplySink& sink_;
  std::mt19937_64 rng_;
  Node* node_ = nullptr;
  std::map<TimerId, TimerSlot> timers_;
  std::function<void(uint64_t, Bytes)> peer_sender_;
  std::function<void(const std::vector<Member>&)> members_handler_;
  CommandForwarder command_forwarder_;
  std::unique_ptr<PayloadCipher> cipher_;  // null: no QUEEN_ENCRYPTION_KEY
};

// The system wall clock in microseconds (also used by the edge for deadlines and ids).
int64_t wall_clock_us();

}  // namespace queen::real
