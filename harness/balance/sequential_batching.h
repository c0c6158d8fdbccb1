#pragma once
// The unbalanced baseline: samples in data order, dealt round-robin to the DP ranks
// (sample i to rank i mod dp); each rank fills micro-batches in that order, opening a
// new one whenever the next sample would overflow max_tokens (or max_samples).

#include "harness/balance/batching_policy.h"

namespace sb {

class SequentialBatching : public BatchingPolicy {
 public:
  std::string name() const override { return "sequential"; }
  GlobalBatchPlan plan(const BatchingInput& input) override;
};

}  // namespace sb
