// Memory per dedup row and per partition, measured on the real node over an in-memory
// environment: heap in use (glibc mallinfo2) before and after N pushes, divided by N.
// Usage: queen-memory-bench [messages] [partitions]. Prints figures; it is not a test.
#include <malloc.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>

#include <xxhash.h>

#include "core/node/node.h"
#include "core/state/store.h"
#include "io/carry_out.h"

namespace {

using namespace queen;

// Files are dropped on the floor: only the node's own memory is measured.
class NullEnv : public Env {
 public:
  int64_t now = 1'700'000'000'000'000;
  std::vector<std::pair<uint64_t, bool>> syncs;
  Node* node = nullptr;
  int64_t now_us() override { return now; }
  uint64_t random_u64() override { return ++seq * 0x9e3779b97f4a7c15ull; }
  void set_timer(TimerId, int64_t) override { timers = true; }
  void append(const std::string&, Bytes) override {}
  void sync(const std::string&, uint64_t token) override { syncs.push_back({token, true}); }
  Result<Bytes> read(const std::string&, uint64_t, uint64_t) override {
    return make_error(Errc::io, "not kept");
  }
  Status truncate(const std::string&, uint64_t) override { return ok_status(); }
  Status remove(const std::string&) override { return ok_status(); }
  Status rename(const std::string&, const std::string&) override { return ok_status(); }
  Result<std::vector<FileInfo>> list_files() override { return std::vector<FileInfo>{}; }
  void reply(ReplyHandle, Reply) override {}
  void fatal(std::string_view) override { std::abort(); }
  void log(LogLevel, std::string_view) override {}
  void drain() {
    for (int i = 0; i < 4; ++i) {
      carry_out(*this, *node, node->on_timer(1));  // flush
      auto s = std::move(syncs);
      syncs.clear();
      for (auto [t, ok] : s) carry_out(*this, *node, node->on_sync_done(t, ok));
    }
  }
  uint64_t seq = 0;
  bool timers = false;
};

size_t heap_bytes() {
  struct mallinfo2 m = mallinfo2();
  return m.uordblks + m.hblkhd;  // small chunks plus mmapped large ones
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t messages = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 1'000'000;
  uint64_t partitions = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 100'000;
  NullEnv env;
  Node node(env, NodeConfig{});
  env.node = &node;
  auto started = node.start({});
  if (!started.ok()) return 1;
  carry_out(env, node, std::move(started.value()));
  const uint64_t batch = 100;
  size_t before = heap_bytes();
  for (uint64_t i = 0; i < messages; i += batch) {
    PushCmd cmd;
    for (uint64_t k = 0; k < batch; ++k) {
      PushItem it;
      it.queue = "dedup";
      it.transaction_id = "txn-" + std::to_string(i + k);
      XXH128_hash_t h = XXH3_128bits(it.transaction_id.data(), it.transaction_id.size());
      it.txn_hash = Hash128{h.low64, h.high64};
      it.payload = "{}";
      cmd.items.push_back(std::move(it));
    }
    carry_out(env, node,
              node.on_command(i + 1, CommandEnvelope{{}, env.now / 1000 + 30000, std::move(cmd)}));
    env.drain();
    env.now += 1000;
  }
  size_t after_rows = heap_bytes();
  for (uint64_t p = 0; p < partitions; ++p) {
    PushCmd cmd;
    PushItem it;
    it.queue = "wide";
    it.partition = "p" + std::to_string(p);
    it.transaction_id = "w" + std::to_string(p);
    XXH128_hash_t h = XXH3_128bits(it.transaction_id.data(), it.transaction_id.size());
    it.txn_hash = Hash128{h.low64, h.high64};
    it.payload = "{}";
    cmd.items.push_back(std::move(it));
    carry_out(env, node,
              node.on_command(messages + p + 1,
                              CommandEnvelope{{}, env.now / 1000 + 30000, std::move(cmd)}));
    if (p % 1000 == 999) env.drain();
  }
  env.drain();
  size_t after_parts = heap_bytes();
  std::printf("messages=%llu heap_per_dedup_row_bytes=%.1f (100 messages per append, hashes "
              "and append rows)\n",
              static_cast<unsigned long long>(messages),
              double(after_rows - before) / double(messages));
  std::printf("partitions=%llu heap_per_partition_with_one_message_bytes=%.1f\n",
              static_cast<unsigned long long>(partitions),
              double(after_parts - after_rows) / double(partitions));
  return 0;
}
