#include "harness/runner/interleave_schedule.h"

#include <algorithm>
#include <stdexcept>

namespace sb {

std::vector<InterleaveStep> interleave_schedule(const std::vector<int64_t>& first, const std::vector<int64_t>& end,
                                                int64_t block_iterations) {
  if (block_iterations < 1) throw std::invalid_argument("interleave_schedule: block_iterations must be >= 1");
  if (first.size() != end.size()) throw std::invalid_argument("interleave_schedule: first and end differ in size");
  int64_t lowest = INT64_MAX, highest = 0;
  for (size_t i = 0; i < first.size(); ++i) {
    if (first[i] < 0 || first[i] > end[i]) throw std::invalid_argument("interleave_schedule: first > end");
    if (first[i] == end[i]) continue;
    lowest = std::min(lowest, first[i]);
    highest = std::max(highest, end[i]);
  }
  std::vector<InterleaveStep> steps;
  if (highest == 0) return steps;
  const size_t runs = first.size();
  for (int64_t block = lowest / block_iterations; block * block_iterations < highest; ++block) {
    const int64_t block_begin = block * block_iterations, block_end = block_begin + block_iterations;
    int64_t position = 0;
    for (size_t k = 0; k < runs; ++k) {
      const size_t run = block % 2 == 0 ? k : runs - 1 - k;
      const int64_t begin = std::max(block_begin, first[run]), stop = std::min(block_end, end[run]);
      if (begin >= stop) continue;
      steps.push_back({run, block, position++, begin, stop});
    }
  }
  return steps;
}

}  // namespace sb
