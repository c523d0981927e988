// CompactVector: holds what a std::vector holds after any mix of pushes, inserts, range
// erases, erase_if, assigns, copies, moves, clears and releases, for values that own memory (so
// a leak, a double free or a value left behind shows under the sanitizers and in the
// comparison).
#include "core/common/compact_vector.h"

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <string>
#include <vector>

namespace queen::testing {
namespace {

void check_same(const CompactVector<std::string>& c, const std::vector<std::string>& v) {
  RC_ASSERT(c.size() == v.size());
  RC_ASSERT(c.empty() == v.empty());
  RC_ASSERT(c.capacity() >= c.size());
  RC_ASSERT(std::equal(c.begin(), c.end(), v.begin(), v.end()));
  RC_ASSERT(std::equal(c.rbegin(), c.rend(), v.rbegin(), v.rend()));
  if (!v.empty()) RC_ASSERT(c.front() == v.front() && c.back() == v.back());
}

RC_GTEST_PROP(CompactVector, HoldsWhatAVectorHolds, ()) {
  CompactVector<std::string> c;
  std::vector<std::string> v;
  const auto steps = *rc::gen::inRange<int>(1, 200);
  for (int s = 0; s < steps; ++s) {
    switch (*rc::gen::inRange<int>(0, 11)) {
      case 0:
      case 1:
      case 2: {  // long enough to own a heap buffer
        std::string x(*rc::gen::inRange<size_t>(0, 40), static_cast<char>('a' + s % 26));
        c.push_back(x);
        v.push_back(x);
        break;
      }
      case 3: {
        size_t from = *rc::gen::inRange<size_t>(0, v.size() + 1);
        size_t to = *rc::gen::inRange<size_t>(from, v.size() + 1);
        auto at = c.erase(c.begin() + from, c.begin() + to);
        RC_ASSERT(at == c.begin() + from);
        v.erase(v.begin() + from, v.begin() + to);
        break;
      }
      case 4: {
        CompactVector<std::string> copy = c;
        check_same(copy, v);
        c = std::move(copy);
        break;
      }
      case 5: {
        std::vector<std::string> fresh(*rc::gen::inRange<size_t>(0, 5), std::string(30, 'z'));
        c.assign(fresh.begin(), fresh.end());
        v = fresh;
        break;
      }
      case 6:
        c.reserve(*rc::gen::inRange<size_t>(0, 70));
        break;
      case 7: {
        size_t at = *rc::gen::inRange<size_t>(0, v.size() + 1);
        std::string x(*rc::gen::inRange<size_t>(0, 40), static_cast<char>('A' + s % 26));
        std::string* put = c.insert(c.begin() + at, x);
        RC_ASSERT(put == c.begin() + at);
        v.insert(v.begin() + at, x);
        break;
      }
      case 8:
        c.release();
        RC_ASSERT(c.capacity() == 0u);
        v.clear();
        break;
      case 9: {  // the odd-length values
        auto odd = [](const std::string& x) { return x.size() % 2 == 1; };
        RC_ASSERT(erase_if(c, odd) == std::erase_if(v, odd));
        break;
      }
      default:
        c.clear();
        v.clear();
    }
    check_same(c, v);
  }
  CompactVector<std::string> moved(std::move(c));
  check_same(moved, v);
  RC_ASSERT(c.empty());  // NOLINT: a moved-from vector is empty
}

TEST(CompactVector, IsOnePointer) {
  EXPECT_EQ(sizeof(CompactVector<std::string>), sizeof(void*));
  CompactVector<int> c = {1, 2, 3};
  EXPECT_EQ(c, (CompactVector<int>{1, 2, 3}));
  EXPECT_NE(c, (CompactVector<int>{1, 2}));
  EXPECT_EQ(c[1], 2);
}

}  // namespace
}  // namespace queen::testing
