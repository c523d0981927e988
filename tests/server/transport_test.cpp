// The raft port's transport (io/real/transport.h): Raft messages and forwarded messages
// arrive apart and in order, and a forward stream whose peer goes away reports it lost at
// once, so a command forwarded there is retried instead of waiting for its deadline.
#include "io/real/transport.h"

#include <gtest/gtest.h>

#include <mutex>
#include <vector>

#include "tests/server/harness.h"

namespace queen::test {
namespace {

using namespace std::chrono_literals;

// What one transport received, from any thread.
struct Inbox {
  std::mutex mutex;
  std::vector<std::string> raft, forwarded;
  std::vector<uint64_t> lost;

  void add(std::vector<std::string>* to, const Bytes& m) {
    std::lock_guard lock(mutex);
    to->emplace_back(m.begin(), m.end());
  }
  size_t count(const std::vector<std::string>& of) {
    std::lock_guard lock(mutex);
    return of.size();
  }
};

Bytes bytes(const std::string& s) {
  return Bytes(s.begin(), s.end());
}

class TransportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    port_[0] = free_loopback_port();
    port_[1] = free_loopback_port();
    for (int i = 0; i < 2; ++i) start(i);
  }

  void start(int i) {
    real::TransportOptions o;
    o.self_id = i + 1;
    o.listen_host = "127.0.0.1";
    o.listen_port = port_[i];
    o.token = "t";
    o.forward_streams = 2;
    o.peers.push_back({static_cast<uint64_t>(2 - i), "127.0.0.1", port_[1 - i]});
    Inbox& in = inbox_[i];
    {
      std::lock_guard lock(in.mutex);
      in.raft.clear();
      in.forwarded.clear();
    }
    node_[i] =
        std::make_unique<real::Transport>(o, [&in](uint64_t, Bytes m) { in.add(&in.raft, m); });
    node_[i]->set_forward_handler(
        {.deliver = [&in](uint64_t, Bytes m) { in.add(&in.forwarded, m); },
         .lost =
             [&in](uint64_t peer) {
               std::lock_guard lock(in.mutex);
               in.lost.push_back(peer);
             }});
    ASSERT_TRUE(node_[i]->start().ok());
  }

  uint16_t port_[2] = {};
  Inbox inbox_[2];
  std::unique_ptr<real::Transport> node_[2];
};

TEST_F(TransportTest, ForwardedMessagesArriveApartFromRaftAndInOrderPerKey) {
  for (int n = 0; n < 50; ++n) node_[0]->send_forward(2, 7, bytes("f" + std::to_string(n)));
  node_[0]->send(2, bytes("raft"));
  ASSERT_TRUE(eventually(5s, [&] {
    return inbox_[1].count(inbox_[1].forwarded) == 50 && inbox_[1].count(inbox_[1].raft) == 1;
  }));
  for (int n = 0; n < 50; ++n) EXPECT_EQ(inbox_[1].forwarded[n], "f" + std::to_string(n));
  EXPECT_EQ(inbox_[1].raft[0], "raft");
  std::lock_guard lock(inbox_[0].mutex);
  EXPECT_TRUE(inbox_[0].lost.empty());
}

// Messages larger than one read of the socket (the receiver reads 64 KiB at a time) arrive
// whole and in order with the small ones between them.
TEST_F(TransportTest, LargeMessagesArriveWholeAndInOrder) {
  std::vector<std::string> sent;
  for (int n = 0; n < 6; ++n) {
    std::string big(100'000 * (n + 1), static_cast<char>('a' + n));
    big += std::to_string(n);
    sent.push_back(big);
    sent.push_back("small" + std::to_string(n));
  }
  for (const std::string& m : sent) node_[0]->send(2, bytes(m));
  ASSERT_TRUE(eventually(10s, [&] { return inbox_[1].count(inbox_[1].raft) == sent.size(); }));
  std::lock_guard lock(inbox_[1].mutex);
  for (size_t n = 0; n < sent.size(); ++n) EXPECT_TRUE(inbox_[1].raft[n] == sent[n]) << n;
}

TEST_F(TransportTest, AForwardStreamReportsItsPeerLostWhenThePeerGoesAway) {
  node_[0]->send_forward(2, 1, bytes("hello"));
  ASSERT_TRUE(eventually(5s, [&] { return inbox_[1].count(inbox_[1].forwarded) == 1; }));
  node_[1].reset();  // the peer's process ends: its connections close
  auto gone = std::chrono::steady_clock::now();
  ASSERT_TRUE(eventually(5s, [&] {
    std::lock_guard lock(inbox_[0].mutex);
    return !inbox_[0].lost.empty();
  }));
  EXPECT_LT(std::chrono::steady_clock::now() - gone, 2s);  // not at a timeout
  EXPECT_EQ(inbox_[0].lost[0], 2u);
  // The peer comes back: the stream connects again.
  start(1);
  node_[0]->send_forward(2, 1, bytes("again"));
  ASSERT_TRUE(eventually(5s, [&] { return inbox_[1].count(inbox_[1].forwarded) == 1; }));
  EXPECT_EQ(inbox_[1].forwarded[0], "again");
}

TEST_F(TransportTest, AForwardToAPeerThatIsNotListeningIsReportedLost) {
  node_[1].reset();
  node_[0]->send_forward(2, 3, bytes("nobody"));
  EXPECT_TRUE(eventually(5s, [&] {
    std::lock_guard lock(inbox_[0].mutex);
    return !inbox_[0].lost.empty();
  }));
}

}  // namespace
}  // namespace queen::test
