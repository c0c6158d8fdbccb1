#pragma once
// Vertical-slash attention on the CPU, forward and backward, in the block form of the
// pattern (vertical_slash_blocks.h): per (sequence, query head, query block) the kernel
// gathers the block's kept keys (whole key blocks its slashes reach, then the verticals
// outside them) into one tile and runs the block's queries against it with matrix
// products, flash-attention style: the forward keeps the log-sum-exp, the backward
// recomputes the probabilities tile by tile. Work O(T x kept keys per query block x D);
// memory: scratch for one tile of the longest possible key list (block x L scores,
// L x D keys) per (sequence, key/value head) task; no [L, L] matrix.
//
// Shapes: q [T, Hq, D], k, v [T, Hkv, D] packed by `sequences`, float32 or float64 (the
// products and sums in that type), Hq % Hkv == 0; index [sequence][query head], every
// head keeping offset 0 (each query itself). Threads: one task per (sequence, key/value
// head), which owns that head's dK and dV rows and adds to them in a fixed order, so the
// backward needs no atomics and gives the same bits for any thread count.

#include <ATen/ATen.h>

#include <vector>

#include "kernels/attention/core/packed_sequences.h"
#include "kernels/attention/patterns/vertical_slash/vertical_slash_index.h"

namespace sb {

struct VerticalSlashAttentionResult {
  at::Tensor out;  // [T, Hq, D], differentiable with respect to q, k, v
  at::Tensor lse;  // [T, Hq] float32 / float64 as q, not differentiable
  int64_t kept_pairs = 0;  // (query, key) pairs the mask keeps, summed over query heads
  std::vector<int64_t> kept_pairs_per_sequence;  // the same per sequence
};

VerticalSlashAttentionResult vertical_slash_attention_cpu(
    const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const PackedSequences& sequences,
    const std::vector<std::vector<VerticalSlashHeadIndex>>& index, double scale);

}  // namespace sb
