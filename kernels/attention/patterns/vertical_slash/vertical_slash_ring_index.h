#pragma once
// Vertical-slash's index under context parallelism: every CP rank ends with the same
// index (the all-reduces give every rank the same bits), the one the single-rank rule
// (vertical_slash_index.h) gives on the whole micro-batch up to float64 rounding of the
// sums, with no rank gathering the scores (docs/context_parallel.md, "Vertical-slash
// under CP"):
//   1. the last n queries of every sequence: each rank fills the rows it holds into a
//      zero tensor, one all-reduce (sum) gives every rank all of them;
//   2. each rank scores them against its own keys; two all-reduces (max, then the sum of
//      exponentials) give every rank each query's softmax denominator;
//   3. each rank adds its keys' share of the column and diagonal sums; one all-reduce
//      (sum) completes them, and every rank selects the lists from the same numbers;
//   4. each rank adds the attention mass on its kept entries; one all-reduce (sum) gives
//      the coverage.
// Steps 1-3 and the coverage's all-reduce: vertical_slash_ring_sums.h.
// Five all-reduces per attention call; the score vectors are Hq x 2 x L float64 per
// sequence of L tokens. Every step runs on q's device (CPU or GPU).

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "kernels/attention/ring/ring_attention.h"
#include "kernels/attention/patterns/vertical_slash/vertical_slash_index.h"

namespace sb {

// q [n, Hq, D], k [n, Hkv, D]: this rank's tokens of the geometry's micro-batch (any
// float type, CPU or GPU). Every rank of the group calls it in the same order as its other
// ring calls. Returns [sequence][query head]. Records one kRingSelectionStep event: the
// local work as compute, the all-reduces as wait.
std::vector<std::vector<VerticalSlashHeadIndex>> vertical_slash_ring_index(
    const at::Tensor& q, const at::Tensor& k, const RingGeometry& geometry, const VerticalSlashParams& params,
    double scale, RingContext& context, int64_t call);

}  // namespace sb
