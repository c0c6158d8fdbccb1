#pragma once
// The order in which the runs of one comparison (the methods at one sweep point) train
// when the manifest says "interleave": {"block_iterations": L} (docs/manifest.md,
// "Interleaving"). [our rule] Block b holds iterations [b L, (b + 1) L); in block b every
// run trains its iterations of the block, one run after another, in the plan's order when
// b is even and in reverse order when b is odd (A B, B A, A B, ...: ABBA over two blocks).
// A drift of the machine's speed that is linear over two blocks then adds the same time to
// every run; run one after another, it lands wholly in the ratio.
//
// Runs may start at different iterations (one resumes from a checkpoint, another starts
// afresh) and end at different ones (a method that trains longer): a run takes part in
// the blocks that hold its remaining iterations, and its position counts only the runs
// that train in that block.

#include <cstdint>
#include <vector>

namespace sb {

struct InterleaveStep {
  size_t run = 0;         // index into the runs given to interleave_schedule
  int64_t block = 0;      // b: the step's iterations lie in [b L, (b + 1) L)
  int64_t position = 0;   // 0 for the first run to train in the block, 1 for the next, ...
  int64_t begin = 0;      // the iterations [begin, end) this step trains
  int64_t end = 0;
};

// Run i trains iterations [first[i], end[i]) (first == end: nothing left). Returns the
// steps in execution order. std::invalid_argument for block_iterations < 1, sizes that
// differ, or first > end.
std::vector<InterleaveStep> interleave_schedule(const std::vector<int64_t>& first, const std::vector<int64_t>& end,
                                                int64_t block_iterations);

}  // namespace sb
