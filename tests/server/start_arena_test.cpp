// The start-up arena (io/real/start_arena.h): a helper thread faults in the memory a large
// load will use, never more than its lead ahead of the checkpoint bytes read, and stops at
// finish(); a small checkpoint, or an allocator that refuses the arena, leaves the start as
// it was.
#include "io/real/start_arena.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "tests/server/harness.h"

namespace queen::test {
namespace {

using namespace std::chrono_literals;
using real::StartArena;
using real::StartArenaOptions;

constexpr uint64_t kMiB = 1ull << 20;

StartArenaOptions small_options() {
  return {.checkpoint_bytes_min = 16 * kMiB,
          .bytes_per_checkpoint_byte = 1.5,
          .lead_bytes = 8 * kMiB,
          .step_bytes = 4 * kMiB,
          .poll_ms = 1};
}

TEST(StartArena, TheTargetIsTheLeadPastWhatTheReadBytesNeedInWholeSteps) {
  StartArenaOptions o = small_options();
  uint64_t arena = 256 * kMiB;
  EXPECT_EQ(StartArena::target_bytes(o, 0, arena), 8 * kMiB);
  EXPECT_EQ(StartArena::target_bytes(o, 10 * kMiB, arena), 24 * kMiB);  // 15 + 8, to 24
  EXPECT_EQ(StartArena::target_bytes(o, 1, arena), 12 * kMiB);          // just past the lead
  EXPECT_EQ(StartArena::target_bytes(o, 1000 * kMiB, arena), arena);
  uint64_t last = 0;
  for (uint64_t read = 0; read <= 200 * kMiB; read += 3 * kMiB + 17) {
    uint64_t t = StartArena::target_bytes(o, read, arena);
    EXPECT_EQ(t % o.step_bytes == 0 || t == arena, true) << read;
    EXPECT_GE(t, last) << read;
    EXPECT_GE(t, std::min(arena, static_cast<uint64_t>(1.5 * static_cast<double>(read))));
    last = t;
  }
}

TEST(StartArena, TheHelperFollowsTheLoadAndStopsAtFinish) {
  std::atomic<uint64_t> read{0};
  void* adopted = nullptr;
  uint64_t adopted_bytes = 0;
  StartArena arena(
      small_options(), 64 * kMiB,
      [&](void* start, uint64_t bytes) {
        adopted = start;
        adopted_bytes = bytes;
        return true;
      },
      [&] { return read.load(); });
  ASSERT_TRUE(arena.active());
  ASSERT_NE(adopted, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(adopted) % (64 * kMiB), 0u) << "aligned for the allocator";
  EXPECT_EQ(adopted_bytes, arena.bytes());
  EXPECT_GE(arena.bytes(), 96 * kMiB);  // 1.5 x 64 MiB

  ASSERT_TRUE(eventually(10s, [&] { return arena.populated_bytes() == 8 * kMiB; }));
  read = 20 * kMiB;
  uint64_t target = StartArena::target_bytes(small_options(), 20 * kMiB, arena.bytes());
  ASSERT_TRUE(eventually(10s, [&] { return arena.populated_bytes() == target; }));
  // The arena's memory is the process's: written and read back whole.
  auto* bytes = static_cast<unsigned char*>(adopted);
  for (uint64_t at = 0; at < target; at += 4096) bytes[at] = static_cast<unsigned char>(at >> 12);
  for (uint64_t at = 0; at < target; at += 4096)
    ASSERT_EQ(bytes[at], static_cast<unsigned char>(at >> 12));

  arena.finish();
  read = 60 * kMiB;  // read after the end: nothing more is faulted in
  EXPECT_EQ(arena.populated_bytes(), target);
}

TEST(StartArena, ASmallCheckpointOrARefusingAllocatorLeavesTheStartAlone) {
  int asked = 0;
  auto adopt = [&](void*, uint64_t) {
    ++asked;
    return true;
  };
  StartArena small(small_options(), 15 * kMiB, adopt, [] { return uint64_t{0}; });
  EXPECT_FALSE(small.active());
  EXPECT_EQ(asked, 0);

  StartArena refused(
      small_options(), 64 * kMiB, [](void*, uint64_t) { return false; },
      [] { return uint64_t{0}; });
  EXPECT_FALSE(refused.active());
  EXPECT_EQ(refused.populated_bytes(), 0u);

  StartArena none(small_options(), 64 * kMiB, StartArena::Adopt{}, [] { return uint64_t{0}; });
  EXPECT_FALSE(none.active());
}

}  // namespace
}  // namespace queen::test
