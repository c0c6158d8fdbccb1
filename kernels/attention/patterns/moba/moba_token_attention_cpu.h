#pragma once
// MoBA under the token gate on the CPU: one fused kernel (custom autograd), float32 or
// float64. Each key block j of a sequence is visited once per query head, with the
// queries that read it (those of block j, causal inside, and every later query that chose
// j) gathered into one matrix: scores, an online-softmax update of their running output,
// and in the backward their gradients, by BLAS on the calling thread. Work follows the
// selected (query, block) pairs; memory is the output and one block's gathered rows.
// Units (query head or key/value head, sequence) run in parallel; inside a unit the blocks
// go in ascending order and every sum has one owner, so results repeat bit for bit at a
// given thread count.

#include <ATen/core/Tensor.h>

#include <utility>

#include "kernels/attention/core/block_layout.h"
#include "kernels/attention/patterns/moba/moba_attention.h"

namespace sb {

// q [Tq, Hq, D], k, v [Tk, Hkv, D] contiguous on the CPU; routing from moba_route_tokens.
// Returns out [Tq, Hq, D] (differentiable with respect to q, k, v) and lse [Tq, Hq].
std::pair<at::Tensor, at::Tensor> moba_token_attention_cpu(const at::Tensor& q, const at::Tensor& k,
                                                           const at::Tensor& v, const BlockLayout& layout,
                                                           const MobaRouting& routing, double scale);

}  // namespace sb
