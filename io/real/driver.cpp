#include "io/real/driver.h"

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include <algorithm>
#include <chrono>
#include <future>
#include <random>
#include <string>
#include <thread>

#include "core/common/text.h"
#include "core/node/node.h"
#include "core/state/checkpoint.h"
#include "core/state/entry.h"
#include "io/carry_out.h"
#include "io/real/latency.h"
#include "io/real/log.h"
#include "io/real/thread_name.h"

namespace queen::real {

namespace {

// The raft addresses of a membership ("host:port"); a member without a valid one is left out
// (a peer of QUEEN_RAFT_PEERS always has one).
std::vector<PeerAddress> peer_addresses(const std::vector<Member>& members) {
  std::vector<PeerAddress> out;
  for (const Member& m : members) {
    PeerAddress address{m.id.value, {}, 0};
    if (split_host_port(m.raft_addr, &address.host, &address.port))
      out.push_back(std::move(address));
  }
  return out;
}

}  // namespace

namespace asio = boost::asio;

namespace {

uint64_t seed_from_device() {
  std::random_device device;
  return (static_cast<uint64_t>(device()) << 32) ^ device();
}

}  // namespace

NodeDriver::NodeDriver(DriverOptions options, ReplySink& sink)
    : options_(std::move(options)),
      sink_(sink),
      disk_(DiskOptions{.root = options_.data_dir, .open_files_max = options_.open_files_max},
            [this](uint64_t token, bool ok) {
              asio::post(context_, [this, token, ok, since = HandoffClock::now()] {
                record_handoff(Handoff::sync, since);
                run(node_->on_sync_done(token, ok));
              });
            }) {}

NodeDriver::~NodeDriver() {
  stop();
}

Status NodeDriver::start() {
  Status opened = disk_.open();
  if (!opened) return opened;
  auto files = disk_.list_files();
  if (!files) return files.error();
  log_line(
      LogLevel::info, "main",
      "data folder " + options_.data_dir + ": " + std::to_string(files.value().size()) + " files");

  env_ = std::make_unique<RealEnv>(context_, disk_, sink_, seed_from_device());
  if (options_.payload_key) env_->set_payload_key(*options_.payload_key);
  node_ = std::make_unique<Node>(*env_, options_.node);
  env_->attach(node_.get());
  if (options_.transport) {
    transport_ = std::make_unique<Transport>(*options_.transport, [this](uint64_t from, Bytes m) {
      asio::post(context_, [this, from, m = std::move(m)] {
        run(node_->on_message(from, m));
        known_leader_.store(node_->raft_view().leader, std::memory_order_relaxed);
      });
    });
    if (forward_handler_.deliver) transport_->set_forward_handler(forward_handler_);
    Status listening = transport_->start();
    if (!listening) return listening;
    env_->set_peer_sender([this](uint64_t to, Bytes m) { transport_->send(to, std::move(m)); });
    env_->set_members_handler([this](const std::vector<Member>& members) {
      transport_->set_peers(peer_addresses(members));
      if (members_listener_) members_listener_(members);
    });
    if (command_forwarder_) env_->set_command_forwarder(command_forwarder_);
  }
  work_.emplace(asio::make_work_guard(context_));
  thread_ = std::thread([this] {
    name_this_thread("queen-node");
    context_.run();
  });

  uint64_t checkpoint_bytes = 0;
  for (const FileInfo& f : files.value()) {
    LogIndex at;
    if (parse_checkpoint_file(f.name, &at))
      checkpoint_bytes = std::max(checkpoint_bytes, f.size_bytes);
  }
  StartArena arena(options_.start_arena, checkpoint_bytes, options_.adopt_start_memory,
                   [this] { return disk_.checkpoint_bytes_read(); });
  std::promise<Status> started;
  auto result = started.get_future();
  asio::post(context_, [this, &started, &files] {
    auto outputs = node_->start(files.value());
    if (!outputs.ok()) return started.set_value(outputs.error());
    run(std::move(outputs.value()));
    started.set_value(ok_status());
  });
  Status status = result.get();
  arena.finish();
  if (arena.active()) {
    log_line(LogLevel::info, "start",
             "the helper faulted in " + std::to_string(arena.populated_bytes() >> 20) + " of " +
                 std::to_string(arena.bytes() >> 20) + " MiB for the load");
  }
  return status;
}

bool NodeDriver::submit(ReplyHandle handle, CommandEnvelope command) {
  if (commands_queued_.fetch_add(1) >= options_.commands_queued_max) {
    commands_queued_.fetch_sub(1);
    return false;
  }
  bool delayed =
      options_.test_push_delay_ms > 0 && std::holds_alternative<PushCmd>(command.command);
  auto hand_over = [this, handle, command = std::move(command),
                    since = HandoffClock::now()]() mutable {
    commands_queued_.fetch_sub(1);
    record_handoff(Handoff::command, since);
    run(node_->on_command(handle, std::move(command)));
  };
  if (delayed) {
    auto timer = std::make_shared<asio::steady_timer>(context_);
    timer->expires_after(std::chrono::milliseconds(options_.test_push_delay_ms));
    timer->async_wait(
        [timer, hand_over = std::move(hand_over)](const auto&) mutable { hand_over(); });
    return true;
  }
  asio::post(context_, std::move(hand_over));
  return true;
}

void NodeDriver::send_forward(uint64_t to, uint64_t key, Bytes message) {
  if (transport_) transport_->send_forward(to, key, std::move(message));
}

void NodeDriver::forward_reply(uint64_t forward_id, std::optional<Reply> reply) {
  asio::post(context_, [this, forward_id, reply = std::move(reply)]() mutable {
    run(node_->on_forward_reply(forward_id, std::move(reply)));
  });
}

void NodeDriver::cancel(ReplyHandle handle) {
  asio::post(context_, [this, handle] { run(node_->on_cancel(handle)); });
}

void NodeDriver::run(Outputs outputs) {
  carry_out(*env_, *node_, std::move(outputs));
}

bool NodeDriver::hand_over() {
  bool leading = false;
  run_on_node([&](Node& node) { run(node.hand_over(&leading)); });
  return leading;
}

bool NodeDriver::checkpoint_before_stop(int64_t wait_ms) {
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms);
  for (;;) {
    bool current = false;
    run_on_node([&](Node& node) { run(node.checkpoint_before_stop(&current)); });
    if (current || !thread_.joinable()) return current;
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));  // the disk thread writes it
  }
}

void NodeDriver::run_on_node(const std::function<void(Node&)>& fn) {
  if (!thread_.joinable()) return;
  std::promise<void> done;
  auto finished = done.get_future();
  asio::post(context_, [&] {
    fn(*node_);
    done.set_value();
  });
  finished.wait();
}

void NodeDriver::stop() {
  if (transport_) transport_->stop();
  work_.reset();
  context_.stop();
  if (thread_.joinable()) thread_.join();
  disk_.stop();
}

}  // namespace queen::real
