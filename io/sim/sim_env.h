// SimEnv: the environment one simulated node process sees (io/env.h over SimWorld). It
// lives as long as the node's machine, across crashes and restarts; every call is forwarded
// to the world, which traces it and applies that node's clock, disk and fault model.
// Calls made after the process died (after Env::fatal, within the same event) are ignored,
// as a dead process makes no calls.
#pragma once

#include "io/env.h"
#include "io/sim/rng.h"

namespace queen::sim {

class SimWorld;

class SimEnv final : public Env {
 public:
  SimEnv(SimWorld& world, int node, Rng rng) : world_(world), node_(node), rng_(rng) {}

  int64_t now_us() override;
  uint64_t random_u64() override { return rng_.next(); }
  void set_timer(TimerId id, int64_t delay_ms) override;
  void append(const std::string& file, Bytes data) override;
  void sync(const std::string& file, uint64_t token) override;
  void write_whole_file(const std::string& file, const FileProducer& produce, uint64_t token,
                        uint64_t expected_bytes) override;
  Result<Bytes> read(const std::string& file, uint64_t pos, uint64_t len) override;
  Status truncate(const std::string& file, uint64_t size_bytes) override;
  Status remove(const std::string& file) override;
  Status rename(const std::string& from, const std::string& to) override;
  Result<std::vector<FileInfo>> list_files() override;
  void send(uint64_t to_node, Bytes message) override;
  void forward(uint64_t to_node, uint64_t forward_id,
               std::shared_ptr<const CommandEnvelope> command, int64_t remaining_ms) override;
  void reply(ReplyHandle handle, Reply reply) override;
  void fatal(std::string_view reason) override;
  void log(LogLevel level, std::string_view message) override;
  // A deterministic stand-in for the server's cipher (io/sim/payload_seal.h).
  Result<std::string> seal_payload(std::string_view plain) override;
  Result<std::string> open_payload(std::string_view sealed) override;

 private:
  SimWorld& world_;
  int node_;
  Rng rng_;
};

}  // namespace queen::sim
