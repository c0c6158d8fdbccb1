#pragma once
// The fused block-sparse attention kernels (docs/block_sparse_attention.md): tiled
// online-softmax forward over the listed key blocks, read in place; a backward of two
// kernels, dQ per query tile over its row's list and dK/dV per key tile over the
// inverted list, with no float atomics (bitwise repeatable). bf16 / fp16 in, fp32
// accumulation, head_dim 64 or 128, sm_80 and later.

#include <ATen/core/Tensor.h>

#include "kernels/attention/core/block_sparse_plan.h"

namespace sb {

// True when the kernels take this dtype and head_dim.
bool block_sparse_cuda_supports(at::ScalarType dtype, int64_t head_dim);

// q [Tq, Hq, D], k, v [Tk, Hkv, D] contiguous CUDA tensors of one dtype; writes
// out [Tq, Hq, D] (q's dtype) and lse [Tq, Hq] float32 (natural log; -inf for a query
// whose row lists no key).
void block_sparse_forward_cuda(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                               const BlockSparseTables& tables, at::Tensor& out, at::Tensor& lse);

// Gradients of the forward above for grad_out [Tq, Hq, D]; writes dq, dk, dv (shapes
// of q, k, v, their dtype). inverse: block_sparse_inverse(tables.selected).
void block_sparse_backward_cuda(const at::Tensor& grad_out, const at::Tensor& q, const at::Tensor& k,
                                const at::Tensor& v, const at::Tensor& out, const at::Tensor& lse,
                                const BlockSparseTables& tables, const BlockSparseInverse& inverse,
                                at::Tensor& dq, at::Tensor& dk, at::Tensor& dv);

}  // namespace sb
