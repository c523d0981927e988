// The node returns its work (io/outputs.h): an event changes nothing outside the node until
// its outputs are carried out, and carrying them out is what writes, syncs and answers.
#include <gtest/gtest.h>

#include "tests/core/mem_env.h"

namespace queen::testing {
namespace {

template <class T>
size_t count_of(const std::vector<Outputs>& all) {
  size_t n = 0;
  for (const Outputs& o : all)
    for (const Output& item : o.items()) n += std::holds_alternative<T>(item) ? 1 : 0;
  return n;
}

TEST(Outputs, AnEventsWorkReachesTheEnvironmentOnlyWhenCarriedOut) {
  Harness h;
  h.env.hold_syncs = true;
  ReplyHandle hd = h.send(h.push_cmd("q", "p", {"a", "b"}));
  ASSERT_FALSE(h.env.timers.empty());  // the flush, armed by the carried-out command

  // Every armed timer fires by hand; what the node returns is kept, not carried out.
  std::map<std::string, Bytes> files_before = h.env.files;
  std::vector<Outputs> fired;
  while (!h.env.timers.empty()) {
    TimerId id = h.env.timers.begin()->first;
    h.env.timers.erase(h.env.timers.begin());
    fired.push_back(h.node().on_timer(id));
  }
  EXPECT_GT(count_of<output::Append>(fired), 0u);
  EXPECT_GT(count_of<output::Sync>(fired), 0u);
  EXPECT_EQ(h.env.files, files_before);
  EXPECT_TRUE(h.env.pending_syncs.empty());

  for (Outputs& o : fired) h.env.perform(std::move(o));
  EXPECT_NE(h.env.files, files_before);
  ASSERT_FALSE(h.env.pending_syncs.empty());

  // The syncs complete: the answer is returned, and the client has it once carried out.
  std::vector<Outputs> synced;
  for (auto [file, token] : h.env.pending_syncs)
    synced.push_back(h.node().on_sync_done(token, true));
  h.env.pending_syncs.clear();
  EXPECT_EQ(count_of<output::Answer>(synced), 1u);
  EXPECT_FALSE(h.take(hd).has_value());
  for (Outputs& o : synced) h.env.perform(std::move(o));
  auto reply = h.take(hd);
  ASSERT_TRUE(reply.has_value());
  EXPECT_EQ(std::get<PushReply>(reply->body).results.size(), 2u);
}

TEST(Outputs, AFailedRemovalStopsTheNodeWhenCarriedOut) {
  MemEnv env;
  Outputs out;
  out.remove("qlog/none/r00000001.qlog");
  carry_out(env, std::move(out));
  EXPECT_TRUE(env.fatal_called);

  MemEnv tolerant;
  Outputs absent;
  absent.remove("snap/none", /*absent_ok=*/true);
  carry_out(tolerant, std::move(absent));
  EXPECT_FALSE(tolerant.fatal_called);
}

}  // namespace
}  // namespace queen::testing
