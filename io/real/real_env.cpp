#include "io/real/real_env.h"

#include <boost/asio/post.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/api/replies.h"
#include "core/node/node.h"
#include "io/carry_out.h"
#include "io/real/log.h"

namespace queen::real {

int64_t wall_clock_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

RealEnv::RealEnv(boost::asio::io_context& node_context, Disk& disk, ReplySink& sink, uint64_t seed)
    : context_(node_context), disk_(disk), sink_(sink), rng_(seed) {}

RealEnv::~RealEnv() = default;

int64_t RealEnv::now_us() {
  return wall_clock_us();
}

void RealEnv::set_timer(TimerId id, int64_t delay_ms) {
  TimerSlot& slot = timers_[id];
  uint64_t generation = ++slot.generation;
  auto fire = [this, id, generation] {
    auto it = timers_.find(id);
    if (it == timers_.end() || it->second.generation != generation) return;  // replaced
    if (node_ != nullptr) carry_out(*this, *node_, node_->on_timer(id));
  };
  if (delay_ms <= 0) {
    // Due now (the node's flush after each event): posted, which spares the reactor a
    // timerfd_settime per arming. A wait still armed for the slot fires later as stale.
    boost::asio::post(context_, fire);
    return;
  }
  if (!slot.timer) slot.timer = std::make_unique<boost::asio::steady_timer>(context_);
  slot.timer->expires_after(std::chrono::milliseconds(delay_ms));
  slot.timer->async_wait([fire](const boost::system::error_code& ec) {
    if (!ec) fire();  // else: re-armed or shut down
  });
}

void RealEnv::append(const std::string& file, Bytes data) {
  disk_.append(file, std::move(data));
}

void RealEnv::sync(const std::string& file, uint64_t token) {
  disk_.sync(file, token);
}

Result<Bytes> RealEnv::read(const std::string& file, uint64_t pos, uint64_t len) {
  return disk_.read(file, pos, len);
}

Status RealEnv::read_into(const std::string& file, uint64_t pos, uint64_t len, Bytes* out) {
  return disk_.read_into(file, pos, len, out);
}

Status RealEnv::truncate(const std::string& file, uint64_t size_bytes) {
  return disk_.truncate(file, size_bytes);
}

Status RealEnv::remove(const std::string& file) {
  return disk_.remove(file);
}

Status RealEnv::rename(const std::string& from, const std::string& to) {
  return disk_.rename(from, to);
}

void RealEnv::reply(ReplyHandle handle, Reply reply) {
  sink_.deliver(handle, std::move(reply));
}

void RealEnv::fatal(std::string_view reason) {
  log_line(LogLevel::error, "node", "fatal: " + std::string(reason) + "; stopping the node");
  std::fflush(stderr);
  std::_Exit(1);
}

void RealEnv::log(LogLevel level, std::string_view message) {
  log_line(level, "node", message);
}

Result<std::string> RealEnv::seal_payload(std::string_view plain) {
  if (!cipher_) return Env::seal_payload(plain);
  return cipher_->seal(plain);
}

Result<std::string> RealEnv::open_payload(std::string_view sealed) {
  if (!cipher_) return Env::open_payload(sealed);
  return cipher_->open(sealed);
}

}  // namespace queen::real
