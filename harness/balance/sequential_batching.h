#pragma once
// The unbalanced baseline: samples in data order, a new micro-batch whenever the next
// sample would overflow max_tokens.

#include "harness/balance/batching_policy.h"

namespace sb {

class SequentialBatching : public BatchingPolicy {
 public:
  std::string name() const override { return "sequential"; }
  MicroBatchPlan plan(const std::vector<int64_t>& sample_lengths, int64_t max_tokens) override;
};

}  // namespace sb
