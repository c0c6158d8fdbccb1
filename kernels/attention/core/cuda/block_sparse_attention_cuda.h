#pragma once
// The fused block-sparse attention as a differentiable op (docs/block_sparse_attention.md):
// the forward and backward kernels of block_sparse_attention_kernels.h behind an autograd
// function. The backward builds the inverted lists on the device and waits for nothing.

#include <ATen/core/Tensor.h>

#include <utility>

#include "kernels/attention/core/block_sparse_plan.h"

namespace sb {

// q [Tq, Hq, D], k, v [Tk, Hkv, D] on one CUDA device (bfloat16 / float16, D 64 or 128).
// Returns out [Tq, Hq, D] (differentiable with respect to q, k, v) and lse [Tq, Hq]
// float32 (not differentiable).
// x contiguous and starting on a 16-byte boundary (the kernels read rows with 16-byte
// loads): x itself when it already is, else a copy.
at::Tensor block_sparse_aligned(const at::Tensor& x);

// For calls that run every head as one (each (head, query block) its own block, as
// a pattern's single key columns do): x [T, H, D] as [H x T, 1, D], head h's token t at row
// h x T + t (a copy), and back: [H x T, 1, D] -> [T, H, D] (a view).
at::Tensor block_sparse_head_major(const at::Tensor& x);
at::Tensor block_sparse_token_major(const at::Tensor& x, int64_t heads);

// A table built on the host, on `device`: copied through pinned memory asynchronously, so
// the host does not wait for the device's queue (the caching host allocator keeps the
// pinned buffer until the copy has run).
at::Tensor block_sparse_table_to_device(const at::Tensor& host, const at::Device& device);

std::pair<at::Tensor, at::Tensor> block_sparse_attention_cuda(const at::Tensor& q, const at::Tensor& k,
                                                              const at::Tensor& v,
                                                              const BlockSparseTables& tables);

}  // namespace sb
