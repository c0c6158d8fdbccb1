#pragma once
// MoBA's attention over the selected blocks on the CPU: a custom autograd function
// with O(T * k * B * D) work and memory (no T x T matrix), in the style of
// flash-attention: the forward keeps the log-sum-exp per (query, head), the backward
// recomputes the probabilities block-row by block-row. Rows (query head, query block)
// run in parallel on LibTorch's intra-op threads; key/value gradients are reduced per
// key block in a fixed order (no atomics), so a rerun is bitwise equal.

#include <ATen/core/Tensor.h>

#include <utility>

#include "kernels/attention/patterns/moba/moba_attention.h"
#include "kernels/attention/core/block_layout.h"

namespace sb {

// q [Tq, Hq, D], k, v [Tk, Hkv, D], contiguous float32 or float64 on the CPU; routing
// from moba_route_cpu. Returns out [Tq, Hq, D] (differentiable) and lse [Tq, Hq].
std::pair<at::Tensor, at::Tensor> moba_attention_cpu(const at::Tensor& q, const at::Tensor& k,
                                                     const at::Tensor& v, const BlockLayout& layout,
                                                     const MobaRouting& routing, double scale);

// What both CPU kernels (this one and moba_token_attention_cpu.h) take: contiguous float32
// or float64 q, k, v; an error naming `kernel` otherwise.
void moba_check_cpu_inputs(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const char* kernel);

}  // namespace sb
