// The interleaved order of a comparison's runs (harness/runner/interleave_schedule.h),
// against schedules written out by hand: ABBA block order, runs that resume at other
// iterations or train longer, and the arguments refused.
#include <gtest/gtest.h>

#include <stdexcept>

#include "harness/runner/interleave_schedule.h"

namespace sb {
namespace {

// "run:block:position:begin-end" per step, for messages that show the whole order.
std::string text_of(const std::vector<InterleaveStep>& steps) {
  std::string text;
  for (const InterleaveStep& s : steps) {
    text += (text.empty() ? "" : " ") + std::to_string(s.run) + ":" + std::to_string(s.block) + ":" +
            std::to_string(s.position) + ":" + std::to_string(s.begin) + "-" + std::to_string(s.end);
  }
  return text;
}

TEST(InterleaveSchedule, BlocksAlternateTheirOrder) {
  // Two runs of 7 iterations in blocks of 3: A B, B A, A B (the last block short).
  EXPECT_EQ(text_of(interleave_schedule({0, 0}, {7, 7}, 3)),
            "0:0:0:0-3 1:0:1:0-3 1:1:0:3-6 0:1:1:3-6 0:2:0:6-7 1:2:1:6-7");
  // Three runs: A B C, C B A, ...
  EXPECT_EQ(text_of(interleave_schedule({0, 0, 0}, {4, 4, 4}, 2)),
            "0:0:0:0-2 1:0:1:0-2 2:0:2:0-2 2:1:0:2-4 1:1:1:2-4 0:1:2:2-4");
  // Blocks of one iteration: A B B A A B ...
  EXPECT_EQ(text_of(interleave_schedule({0, 0}, {3, 3}, 1)), "0:0:0:0-1 1:0:1:0-1 1:1:0:1-2 0:1:1:1-2 0:2:0:2-3 1:2:1:2-3");
}

TEST(InterleaveSchedule, EveryIterationOfEveryRunOnceInOrder) {
  const std::vector<int64_t> first{0, 5, 2}, end{23, 17, 30};
  const std::vector<InterleaveStep> steps = interleave_schedule(first, end, 4);
  std::vector<int64_t> next = first;
  int64_t block = -1;
  for (const InterleaveStep& s : steps) {
    EXPECT_EQ(s.begin, next[s.run]) << text_of(steps);
    EXPECT_LT(s.begin, s.end);
    EXPECT_EQ(s.begin / 4, s.block);
    EXPECT_EQ((s.end - 1) / 4, s.block) << "a step stays inside its block";
    EXPECT_GE(s.block, block) << "blocks in order";
    block = s.block;
    next[s.run] = s.end;
  }
  EXPECT_EQ(next, end);
}

TEST(InterleaveSchedule, RunsThatResumeOrEndElsewhereJoinTheirBlocks) {
  // Run 0 resumes at iteration 4 (its checkpoint), run 1 starts afresh, run 2 is done:
  // blocks 0 and 1 hold run 1 alone (position 0), then both alternate from block 2.
  EXPECT_EQ(text_of(interleave_schedule({4, 0, 6}, {6, 6, 6}, 2)),
            "1:0:0:0-2 1:1:0:2-4 0:2:0:4-6 1:2:1:4-6");
  // Run 1 trains longer: it goes on alone. Resumed mid-block, run 0 finishes that block.
  EXPECT_EQ(text_of(interleave_schedule({3, 0}, {4, 8}, 2)), "1:0:0:0-2 1:1:0:2-4 0:1:1:3-4 1:2:0:4-6 1:3:0:6-8");
  EXPECT_TRUE(interleave_schedule({5, 5}, {5, 5}, 2).empty()) << "nothing left to train";
}

TEST(InterleaveSchedule, RefusesWhatIsNotASchedule) {
  EXPECT_THROW(interleave_schedule({0}, {4}, 0), std::invalid_argument);
  EXPECT_THROW(interleave_schedule({0, 0}, {4}, 2), std::invalid_argument);
  EXPECT_THROW(interleave_schedule({5}, {4}, 2), std::invalid_argument);
}

}  // namespace
}  // namespace sb
