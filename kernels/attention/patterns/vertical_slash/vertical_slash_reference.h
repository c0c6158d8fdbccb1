#pragma once
// The float64 oracle for vertical-slash attention: the mask of vertical_slash_index.h
// built densely ([L, L] per sequence and query head, from vertical_slash_block_keys) and the
// attention computed plainly on the full score matrix with ATen ops. For tests; memory
// grows as Hq x L^2 per sequence.

#include <ATen/ATen.h>

#include <vector>

#include "kernels/attention/core/packed_sequences.h"
#include "kernels/attention/patterns/vertical_slash/vertical_slash_index.h"

namespace sb {

struct VerticalSlashReferenceResult {
  at::Tensor out;  // [T, Hq, D] float64, differentiable with respect to q, k, v
  at::Tensor lse;  // [T, Hq] float64
};

// q [T, Hq, D], k, v [T, Hkv, D] packed by `sequences` (any floating dtype, computed in
// float64 on the CPU); index [sequence][query head] from vertical_slash_index (or given).
VerticalSlashReferenceResult vertical_slash_reference(
    const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const PackedSequences& sequences,
    const std::vector<std::vector<VerticalSlashHeadIndex>>& index, double scale);

// The dense mask of one (sequence, query head): [L, L] bool, row i keeps column j; with
// first_row > 0 only rows first_row .. L - 1 ([L - first_row, L]).
at::Tensor vertical_slash_mask(const VerticalSlashHeadIndex& index, int64_t length, int64_t first_row = 0);

// One sequence (q, k, v hold exactly its tokens), only query rows first_row .. L - 1:
// their output [L - first_row, Hq, D] float64 (for checking the last rows of long
// sequences, whose full reference would not fit in memory).
at::Tensor vertical_slash_reference_rows(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                         const std::vector<VerticalSlashHeadIndex>& heads, double scale,
                                         int64_t first_row);

}  // namespace sb
