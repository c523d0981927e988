// A test suite that shares one real node: it starts before the suite's first test and stops
// after its last; each test gets a fresh client and fails if the node exited under it.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "tests/server/harness.h"

namespace queen::test {

class SharedNodeTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    server_ = new ServerProcess(dir_->path() + "/data", dir_->path() + "/server.log");
    std::string error;
    if (!server_->start(&error)) {
      delete server_;
      server_ = nullptr;
      FAIL() << error;
    }
  }
  static void TearDownTestSuite() {
    delete server_;
    delete dir_;
    server_ = nullptr;
    dir_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(server_, nullptr) << "the server did not start";
    client_ = std::make_unique<HttpClient>(server_->port());
  }
  void TearDown() override {
    ASSERT_TRUE(server_->running()) << "queen exited; log tail:\n" << server_->log_tail();
  }
  // A name unique to the running test (tests share the node, not their queues).
  static std::string unique_name(const std::string& suffix = "") {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    return std::string(info->name()) + suffix;
  }

  static inline TempDir* dir_ = nullptr;
  static inline ServerProcess* server_ = nullptr;
  std::unique_ptr<HttpClient> client_;
};

}  // namespace queen::test
