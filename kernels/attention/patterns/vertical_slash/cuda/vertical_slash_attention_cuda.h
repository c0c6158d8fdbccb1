#pragma once
// Vertical-slash attention on CUDA (docs/vertical_slash.md, "On GPUs"): the pattern's two
// block-sparse calls (vertical_slash_block_sparse_plan.h) on the fused kernels
// (block_sparse_attention_kernels.h), merged by log-sum-exp, as one differentiable op.
// The slash part reads q, k and v in place; the vertical part reads q head-major and its
// verticals' key and value rows gathered into copies (one row per (query head, query
// block, vertical): memory Hq x query blocks x verticals x D per call).

#include <ATen/core/Tensor.h>

#include <vector>

#include "kernels/attention/core/packed_sequences.h"
#include "kernels/attention/patterns/vertical_slash/vertical_slash_attention_cpu.h"
#include "kernels/attention/patterns/vertical_slash/vertical_slash_index.h"

namespace sb {

// q [T, Hq, D], k, v [T, Hkv, D] on one CUDA device, bfloat16 or float16, D 64 or 128,
// packed by `sequences`; index [sequence][query head], one block_size, every head keeping
// offset 0. Returns out (differentiable with respect to q, k, v; q's dtype), lse float32
// and the mask's kept pairs.
VerticalSlashAttentionResult vertical_slash_attention_cuda(
    const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const PackedSequences& sequences,
    const std::vector<std::vector<VerticalSlashHeadIndex>>& index, double scale);

}  // namespace sb
