#pragma once
// The float64 reference of sliding-window attention (sliding_window_rule.h): every
// sequence's scores written out with the pattern's mask, [H, L, L] per sequence. The
// oracle the kernel is tested against (forward, and backward through autograd).
//
// q [T, Hq, D], k, v [T, Hkv, D] packed by `sequences`, Hq % Hkv == 0; windows: one per
// sequence.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "kernels/attention/core/packed_sequences.h"

namespace sb {

struct SlidingWindowReferenceResult {
  at::Tensor out;  // [T, Hq, D] float64, differentiable with respect to q, k, v
  at::Tensor lse;  // [T, Hq] float64
};

SlidingWindowReferenceResult sliding_window_reference(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                                      const PackedSequences& sequences,
                                                      const std::vector<int64_t>& windows, int64_t sinks,
                                                      double scale);

// One sequence (q, k, v hold exactly its tokens), rows first_row .. L - 1 only:
// [L - first_row, Hq, D] float64 on the CPU (the last rows of a long sequence).
at::Tensor sliding_window_reference_rows(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                         int64_t window, int64_t sinks, double scale, int64_t first_row);

}  // namespace sb
