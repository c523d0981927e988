// ShortString: holds the bytes it was given, inline up to 15 and in an allocation beyond, and
// compares, copies, moves and assigns as std::string does (values around the inline bound and
// with zero bytes; a leak or a double free shows under the sanitizers).
#include "core/common/short_string.h"

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace queen::testing {
namespace {

// Any bytes, most around the inline bound of 15.
rc::Gen<std::string> any_bytes() {
  return rc::gen::mapcat(rc::gen::inRange<size_t>(0, 40), [](size_t n) {
    return rc::gen::container<std::string>(n, rc::gen::elementOf(std::string("ab\0z", 4)));
  });
}

RC_GTEST_PROP(ShortString, HoldsAndOrdersWhatAStringDoes, ()) {
  const std::string a = *any_bytes();
  const std::string b = *any_bytes();
  ShortString sa(a), sb(b);
  RC_ASSERT(sa.view() == a);
  RC_ASSERT(sa.size() == a.size());
  RC_ASSERT(sa.empty() == a.empty());
  RC_ASSERT(sa.str() == a);
  RC_ASSERT((sa == sb) == (a == b));
  RC_ASSERT((sa <=> sb) == (a <=> b));
  RC_ASSERT((sa == b) == (a == b));
}

RC_GTEST_PROP(ShortString, CopiesMovesAndAssignmentsKeepTheBytes, ()) {
  std::vector<std::string> model;
  std::vector<ShortString> held;
  const auto steps = *rc::gen::inRange<int>(1, 60);
  for (int s = 0; s < steps; ++s) {
    const std::string x = *any_bytes();
    size_t at = held.empty() ? 0 : *rc::gen::inRange<size_t>(0, held.size());
    switch (*rc::gen::inRange<int>(0, 5)) {
      case 0:  // a new one (the vector's growth moves the others)
        held.emplace_back(x);
        model.push_back(x);
        break;
      case 1:  // assigned a string
        if (held.empty()) break;
        held[at] = x;
        model[at] = x;
        break;
      case 2: {  // assigned a copy of another
        if (held.empty()) break;
        size_t from = *rc::gen::inRange<size_t>(0, held.size());
        held[at] = held[from];
        model[at] = model[from];
        break;
      }
      case 3: {  // moved from another, which is left empty
        if (held.empty()) break;
        size_t from = *rc::gen::inRange<size_t>(0, held.size());
        if (from == at) break;
        held[at] = std::move(held[from]);
        model[at] = std::move(model[from]);
        RC_ASSERT(held[from].empty());
        model[from].clear();
        break;
      }
      case 4:  // one removed from the front (the others move down)
        if (held.empty()) break;
        held.erase(held.begin());
        model.erase(model.begin());
        break;
    }
    RC_ASSERT(held.size() == model.size());
    for (size_t i = 0; i < held.size(); ++i) RC_ASSERT(held[i].view() == model[i]);
  }
}

TEST(ShortString, IsSixteenBytesAndKeepsFifteenInline) {
  EXPECT_EQ(sizeof(ShortString), 16u);
  ShortString fifteen(std::string(15, 'x'));
  ShortString sixteen(std::string(16, 'y'));
  // Inline bytes lie inside the object; a longer string's lie elsewhere.
  auto inside = [](const ShortString& s) {
    auto* p = reinterpret_cast<const char*>(&s);
    return s.data() >= p && s.data() < p + sizeof(s);
  };
  EXPECT_TRUE(inside(fifteen));
  EXPECT_FALSE(inside(sixteen));
  EXPECT_EQ(fifteen.view(), std::string(15, 'x'));
  EXPECT_EQ(sixteen.view(), std::string(16, 'y'));
  EXPECT_TRUE(ShortString().empty());
}

}  // namespace
}  // namespace queen::testing
