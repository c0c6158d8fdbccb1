#include "kernels/attention/patterns/dense/dense_ring_selector.h"

#include <stdexcept>

#include "kernels/attention/ring/ring_attention.h"

namespace sb {

DenseRingSelector::DenseRingSelector(int64_t block_size) : block_size_(block_size) {
  if (block_size < 1) {
    throw std::invalid_argument("dense ring attention: block_size must be >= 1, got " + std::to_string(block_size));
  }
}

RingCallPattern DenseRingSelector::select(const RingSelectionInputs& in) {
  RingCallPattern pattern;
  pattern.blocks = in.geometry.causal_pattern();
  return pattern;
}

}  // namespace sb
