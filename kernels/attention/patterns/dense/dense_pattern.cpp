#include "kernels/attention/patterns/dense/dense_pattern.h"

#include "kernels/attention/core/dense_attention.h"
#include "kernels/attention/patterns/dense/dense_causal_attention.h"
#include "kernels/attention/patterns/dense/dense_ring_selector.h"

namespace sb {

std::unique_ptr<AttentionBackend> DensePattern::make_backend() const { return std::make_unique<DenseCausalAttention>(); }

std::shared_ptr<RingPatternSelector> DensePattern::make_ring_selector() const {
  return std::make_shared<DenseRingSelector>(kDenseRingBlock);
}

double DensePattern::attended_pairs(int64_t length, int64_t /*budget*/) const {
  const auto l = static_cast<double>(length);
  return l * (l + 1) / 2;
}

double DensePattern::kept_pairs(const at::Tensor& q, const at::Tensor& /*k*/, const PackedSequences& sequences,
                                double /*scale*/) const {
  double pairs = 0;
  for (int64_t s = 0; s < sequences.num_sequences(); ++s) pairs += attended_pairs(sequences.length(s), 0);
  return static_cast<double>(q.size(1)) * pairs;
}

at::Tensor DensePattern::reference_rows(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                        const PackedSequences& /*sequences*/, double scale, int64_t first_row) const {
  return dense_causal_reference_rows(q, k, v, scale, first_row);
}

double dense_causal_attended_pairs(int64_t q_heads, int64_t length) {
  return static_cast<double>(q_heads) * static_cast<double>(length) * static_cast<double>(length + 1) / 2.0;
}

AttentionOptions dense_attention_options() { return AttentionOptions(std::make_shared<const DensePattern>()); }

}  // namespace sb
