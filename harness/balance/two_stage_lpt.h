#pragma once
// The two stages shared by LBB and SAB (docs: sparsebalance.md 1.3, 1.4), with a cost
// per sample given by the policy (tokens for LBB, predicted latency for SAB):
//   1. samples to DP ranks by LPT on their cost (lpt_assign);
//   2. each rank's samples bin-packed into micro-batches by LPT on cost with the
//      capacity max_tokens (and max_samples), starting from the fewest micro-batches
//      that can hold the rank's tokens (ceil(tokens / max_tokens), and
//      ceil(samples / max_samples)) and opening more only when nothing fits.
// Micro-batches run in the order they were opened; inside each, samples keep the LPT
// order (heaviest first).

#include <vector>

#include "harness/balance/batching_policy.h"

namespace sb {

GlobalBatchPlan plan_two_stage_lpt(const BatchingInput& input, const std::vector<double>& sample_costs);

}  // namespace sb
