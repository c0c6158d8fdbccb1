#include "kernels/attention/patterns/dense/dense_causal_attention.h"

#include "kernels/attention/core/dense_attention.h"

namespace sb {

at::Tensor DenseCausalAttention::forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                         const PackedSequences& sequences, double scale, int64_t /*layer*/) {
  return dense_causal_attention(q, k, v, sequences, scale);
}

at::Tensor DenseCausalAttention::forward_cached(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                                double scale) {
  return dense_causal_attention_cached(q, k, v, scale);
}

}  // namespace sb
