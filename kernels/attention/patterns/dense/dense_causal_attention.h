#pragma once
// Dense causal attention over packed sequences: every query attends to all earlier
// keys (and itself) of its own sequence. The baseline every sparse backend is
// compared against, built on at::scaled_dot_product_attention per sequence.

#include "kernels/attention/core/attention_backend.h"

namespace sb {

class DenseCausalAttention : public AttentionBackend {
 public:
  std::string name() const override { return "dense"; }
  at::Tensor forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                     const PackedSequences& sequences, double scale,
                     int64_t layer) override;
  at::Tensor forward_cached(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            double scale) override;
};

}  // namespace sb
