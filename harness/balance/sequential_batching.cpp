#include "harness/balance/sequential_batching.h"

namespace sb {

GlobalBatchPlan SequentialBatching::plan(const BatchingInput& input) {
  check_batching_input(input);
  GlobalBatchPlan plan;
  plan.ranks.resize(static_cast<size_t>(input.dp));
  for (size_t i = 0; i < input.sample_lengths.size(); ++i) {
    const int64_t length = input.sample_lengths[i];
    auto& rank = plan.ranks[i % static_cast<size_t>(input.dp)];
    if (rank.empty() || rank.back().tokens + length > input.max_tokens ||
        (input.max_samples > 0 &&
         static_cast<int64_t>(rank.back().samples.size()) >= input.max_samples)) {
      rank.emplace_back();
    }
    rank.back().samples.push_back(static_cast<int64_t>(i));
    rank.back().tokens += length;
  }
  return plan;
}

}  // namespace sb
