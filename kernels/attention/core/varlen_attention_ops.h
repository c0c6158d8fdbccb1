#pragma once
// Variable-length attention as an interface (part of the block-sparse core,
// docs/attention_patterns.md): a batch of independent segments, each a run of queries
// against a run of keys, optionally causal (bottom-right aligned). LibTorch's
// flash-attention implements it on CUDA (cuda/flash_varlen_attention.h); the CPU tests
// give a float64 oracle, which checks every pipeline built on it without a GPU.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <tuple>

namespace sb {

struct VarlenAttentionForward {
  at::Tensor out;        // [Nq, H, D] in q's dtype
  at::Tensor lse;        // [H, Nq] float32 (float64 for float64 inputs)
  at::Tensor rng_state;  // whatever the op needs back in its backward (may be undefined)
  at::Tensor unused;
};

class VarlenAttentionOps {
 public:
  virtual ~VarlenAttentionOps() = default;
  // q [Nq, H, D], k, v [Nk, Hk, D] (H % Hk == 0); cu_q, cu_k int32 [n + 1] on q's
  // device: segment i of q attends to segment i of k. causal: query r of a segment of
  // lq queries and lk keys sees keys 0 .. r + lk - lq. Every segment has lk >= 1.
  virtual VarlenAttentionForward forward(const at::Tensor& q, const at::Tensor& k,
                                         const at::Tensor& v, const at::Tensor& cu_q,
                                         const at::Tensor& cu_k, int64_t max_q, int64_t max_k,
                                         bool causal, double scale) const = 0;
  // dq [Nq, H, D], dk, dv [Nk, Hk, D] for the given out and lse.
  virtual std::tuple<at::Tensor, at::Tensor, at::Tensor> backward(
      const at::Tensor& grad_out, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
      const at::Tensor& out, const at::Tensor& lse, const at::Tensor& cu_q, const at::Tensor& cu_k,
      int64_t max_q, int64_t max_k, bool causal, double scale,
      const VarlenAttentionForward& forward_state) const = 0;
};

}  // namespace sb
