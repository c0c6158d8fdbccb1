#include "harness/balance/sequential_batching.h"

#include <stdexcept>
#include <string>

namespace sb {

MicroBatchPlan SequentialBatching::plan(const std::vector<int64_t>& sample_lengths,
                                        int64_t max_tokens) {
  MicroBatchPlan plan;
  int64_t current_tokens = 0;
  for (size_t i = 0; i < sample_lengths.size(); ++i) {
    const int64_t length = sample_lengths[i];
    if (length > max_tokens) {
      throw std::invalid_argument("sample " + std::to_string(i) + " has " +
                                  std::to_string(length) + " tokens, more than max_tokens " +
                                  std::to_string(max_tokens));
    }
    if (plan.empty() || current_tokens + length > max_tokens) {
      plan.emplace_back();
      current_tokens = 0;
    }
    plan.back().push_back(static_cast<int64_t>(i));
    current_tokens += length;
  }
  return plan;
}

}  // namespace sb
