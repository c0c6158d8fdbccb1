#pragma once
// Vertical-slash attention on the CPU, forward and backward, with work and memory that
// follow the kept entries: each query row gathers only its kept keys (the verticals up to
// it and the keys its slashes reach, vertical_slash_index.h), so a row costs
// O((verticals + slashes) x D) and no [L, L] matrix is formed.
//
// Shapes: q [T, Hq, D], k, v [T, Hkv, D] packed by `sequences`, float32 or float64,
// Hq % Hkv == 0; index [sequence][query head]. Softmax sums and the output accumulate
// in float64 whatever the input type. Threads: one task per (sequence, key/value head),
// which owns that head's dK and dV rows, so the backward needs no atomics and is
// deterministic for any thread count.

#include <ATen/ATen.h>

#include <vector>

#include "kernels/attention/packed_sequences.h"
#include "kernels/attention/vertical_slash/vertical_slash_index.h"

namespace sb {

struct VerticalSlashAttentionResult {
  at::Tensor out;  // [T, Hq, D], differentiable with respect to q, k, v
  at::Tensor lse;  // [T, Hq] float32 / float64 as q, not differentiable
  int64_t kept_pairs = 0;  // (query, key) pairs computed, summed over query heads
  std::vector<int64_t> kept_pairs_per_sequence;  // the same per sequence
};

VerticalSlashAttentionResult vertical_slash_attention_cpu(
    const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const PackedSequences& sequences,
    const std::vector<std::vector<VerticalSlashHeadIndex>>& index, double scale);

}  // namespace sb
