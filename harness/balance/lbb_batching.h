#pragma once
// LBB, length-based batching (the baseline of docs/sparsebalance.md 1.3): balances
// token counts, first across DP ranks, then across each rank's micro-batches, with the
// two-stage LPT of two_stage_lpt.h on the cost "tokens of the sample".

#include "harness/balance/batching_policy.h"

namespace sb {

class LbbBatching : public BatchingPolicy {
 public:
  std::string name() const override { return "lbb"; }
  GlobalBatchPlan plan(const BatchingInput& input) override;
};

}  // namespace sb
