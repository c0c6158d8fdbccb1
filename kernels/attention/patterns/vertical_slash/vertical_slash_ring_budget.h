#pragma once
// Vertical-slash under a budget request (DST) with context parallelism: the one-rank
// search of vertical_slash_budget.h on the index every CP rank builds alike
// (vertical_slash_ring_sums.h), so every rank ends with the same lists (docs/
// vertical_slash.md, "Budgets"; docs/context_parallel.md, "Vertical-slash under CP").
//   - Ladders, reference lists, level thresholds, kept pairs and the budget level depend
//     on the column and diagonal sums only, which every rank holds whole: each rank
//     computes them alone, with the one-rank code.
//   - Coverage needs the attention, whose keys are spread over the ranks: each coverage is
//     the ranks' kept masses summed by an all-reduce (VerticalSlashRingSums::kept_coverage),
//     batched over every (sequence, head) of the call: one for the references; with a
//     floor, one per step of the floor's binary search, all heads searching in lockstep
//     (about log2 of a head's thresholds, under 14 with 4096-entry caps), and one for the
//     floor levels' lists; with a budget, one for the lists the budgeted heads run.
// Under TP as well, the budget level is searched over the TP ranks' heads
// (vertical_slash_sharded_budget.h): its sums run over the TP group, after the CP ones.
// The result equals the one-rank search up to float64 rounding of the coverage sums
// (summed in another order; a floor comparison within rounding of its target could go
// the other way).

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "kernels/attention/ring/ring_attention.h"
#include "kernels/attention/patterns/vertical_slash/vertical_slash_budget.h"

namespace sb {

// As vertical_slash_ring_index (q, k: this rank's tokens; every rank calls it in the same
// order), for `request` over the geometry's sequences. Records one kRingSelectionStep
// event. Throws std::invalid_argument for a malformed request (as the one-rank search).
// sum_over_head_shards (TP beside CP: q and k hold this TP rank's heads): the budget
// levels are searched with the other TP ranks' heads (vertical_slash_sharded_budget.h).
VerticalSlashBudgetedIndex vertical_slash_ring_budgeted_index(
    const at::Tensor& q, const at::Tensor& k, const RingGeometry& geometry, const VerticalSlashParams& params,
    double scale, const VerticalSlashBudgetRequest& request, RingContext& context, int64_t call,
    const std::function<void(std::vector<double>&)>& sum_over_head_shards = {});

}  // namespace sb
