#include "harness/balance/lbb_batching.h"

#include "harness/balance/two_stage_lpt.h"

namespace sb {

GlobalBatchPlan LbbBatching::plan(const BatchingInput& input) {
  std::vector<double> costs(input.sample_lengths.begin(), input.sample_lengths.end());
  return plan_two_stage_lpt(input, costs);
}

}  // namespace sb
