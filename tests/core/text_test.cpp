// The shared text forms: disk ids as the membership API and the logs print them, and the
// "host:port" split that QUEEN_RAFT_PEERS, the peer transport and the HTTP forwarder rely on.
#include "core/common/text.h"

#include <gtest/gtest.h>

namespace queen {
namespace {

TEST(TextTest, HexIsSixteenLowercaseDigits) {
  EXPECT_EQ(hex_u64(0), "0000000000000000");
  EXPECT_EQ(hex_u64(0xabcULL), "0000000000000abc");
  EXPECT_EQ(hex_u64(0xfedcba9876543210ULL), "fedcba9876543210");
}

TEST(TextTest, HostPortSplitsAtTheLastColon) {
  std::string host;
  uint16_t port = 0;
  ASSERT_TRUE(split_host_port("127.0.0.1:6632", &host, &port));
  EXPECT_EQ(host, "127.0.0.1");
  EXPECT_EQ(port, 6632);
  ASSERT_TRUE(split_host_port("::1:7401", &host, &port));
  EXPECT_EQ(host, "::1");
  EXPECT_EQ(port, 7401);
  ASSERT_TRUE(split_host_port("h:65535", &host, &port));
  EXPECT_EQ(port, 65535);
}

TEST(TextTest, HostPortRefusesWhatIsNotOne) {
  std::string host = "kept";
  uint16_t port = 1;
  for (const char* bad : {"", "host", ":80", "host:", "host:0", "host:65536", "host:-1",
                          "host:+80", "host:80x", "host: 80"}) {
    EXPECT_FALSE(split_host_port(bad, &host, &port)) << bad;
  }
  EXPECT_EQ(host, "kept");  // a refusal leaves the outputs alone
  EXPECT_EQ(port, 1);
}

}  // namespace
}  // namespace queen
