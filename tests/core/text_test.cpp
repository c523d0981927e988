// The shared text forms: disk ids as the membership API and the logs print them, and the
// "host:port" split that QUEEN_RAFT_PEERS, the peer transport and the HTTP forwarder rely on;
// a UUID read back from its text (leaseId, message ids in the API).
#include "core/common/text.h"
#include "core/common/types.h"

#include <gtest/gtest.h>

#include <cctype>

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

TEST(TextTest, AUuidReadsBackFromItsTextInEitherCase) {
  Uuid u = make_uuid_v7(1700000000000, 0xabcdef, 0x0123456789abcdefULL);
  std::string text = uuid_to_string(u);
  Uuid back;
  ASSERT_TRUE(uuid_from_string(text, &back));
  EXPECT_EQ(back, u);
  std::string upper = text;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  ASSERT_NE(upper, text);
  Uuid from_upper;
  ASSERT_TRUE(uuid_from_string(upper, &from_upper));
  EXPECT_EQ(from_upper, u);
}

TEST(TextTest, AUuidRefusesAnyOtherText) {
  std::string good = "0190a0b0-c0d0-7e0f-8a0b-0c0d0e0f1011";
  Uuid out;
  ASSERT_TRUE(uuid_from_string(good, &out));
  // Every position: a character that is neither a hex digit nor, there, a dash.
  for (size_t i = 0; i < good.size(); ++i) {
    for (char bad : {'g', 'G', ' ', '-', '\0', '\xff', '/', ':', '@', '`'}) {
      bool dash_here = i == 8 || i == 13 || i == 18 || i == 23;
      if (bad == '-' && dash_here) continue;
      std::string text = good;
      text[i] = bad;
      EXPECT_FALSE(uuid_from_string(text, &out)) << text;
    }
  }
  EXPECT_FALSE(uuid_from_string(good.substr(1), &out));
  EXPECT_FALSE(uuid_from_string(good + "0", &out));
  EXPECT_FALSE(uuid_from_string("", &out));
  EXPECT_FALSE(uuid_from_string("0190a0b0c0d07e0f8a0b0c0d0e0f101100ab", &out));  // no dashes
}

}  // namespace
}  // namespace queen
