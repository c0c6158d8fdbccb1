// Needle in a haystack: the scorer, where the needle lands in a context of exactly L
// tokens, and the synthetic haystack.
#include <gtest/gtest.h>

#include <numeric>

#include "harness/eval/niah.h"

namespace sb {
namespace {

TEST(Niah, ScoreNeedsTheNumberAsAWholeDigitRun) {
  EXPECT_EQ(niah_score("The number is 4720193.", "4720193"), 1.0);
  EXPECT_EQ(niah_score("4720193", "4720193"), 1.0);
  EXPECT_EQ(niah_score("47201934", "4720193"), 0.0);  // a longer number is not the needle
  EXPECT_EQ(niah_score("4720 193", "4720193"), 0.0);
  EXPECT_EQ(niah_score("", "4720193"), 0.0);
  EXPECT_EQ(niah_score("12 4720193 9", "4720193"), 1.0);
}

TEST(Niah, ContextHasExactlyLTokensWithTheNeedleAtASentenceStart) {
  std::vector<int64_t> hay(100);
  std::iota(hay.begin(), hay.end(), 1000);
  std::vector<bool> ends(100, false);
  for (size_t i = 9; i < ends.size(); i += 10) ends[i] = true;  // tokens 9, 19, ... end sentences
  const std::vector<int64_t> needle = {1, 2, 3};
  for (double depth : {0.0, 33.0, 50.0, 100.0}) {
    int64_t position = -1;
    const auto ids = niah_context_ids(hay, needle, ends, 63, depth, &position);
    ASSERT_EQ(ids.size(), 63u);
    EXPECT_EQ(position % 10, 0) << depth;  // just after a sentence end (or at 0)
    EXPECT_LE(position, static_cast<int64_t>(depth / 100 * 60 + 0.5));
    EXPECT_EQ(std::vector<int64_t>(ids.begin() + position, ids.begin() + position + 3), needle);
    // The rest is the haystack's first 60 tokens in order.
    std::vector<int64_t> rest(ids.begin(), ids.begin() + position);
    rest.insert(rest.end(), ids.begin() + position + 3, ids.end());
    EXPECT_EQ(rest, std::vector<int64_t>(hay.begin(), hay.begin() + 60));
  }
  int64_t position = -1;
  niah_context_ids(hay, needle, ends, 63, 50.0, &position);
  EXPECT_EQ(position, 30);  // round(0.5 * 60) = 30, and token 29 ends a sentence
  EXPECT_THROW(niah_context_ids(hay, needle, ends, 3, 0.0, nullptr), std::invalid_argument);
  EXPECT_THROW(niah_context_ids(hay, needle, ends, 200, 0.0, nullptr), std::invalid_argument);
}

TEST(Niah, SyntheticHaystackIsDeterministicPerSeed) {
  const std::string a = niah_synthetic_haystack(1, 50);
  EXPECT_EQ(a, niah_synthetic_haystack(1, 50));
  EXPECT_NE(a, niah_synthetic_haystack(2, 50));
  EXPECT_EQ(std::count(a.begin(), a.end(), '.'), 50);
}

}  // namespace
}  // namespace sb
