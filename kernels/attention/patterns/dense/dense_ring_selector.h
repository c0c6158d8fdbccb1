#pragma once
// Dense causal attention under context parallelism: every block of each sequence up to
// the diagonal, every head alike (RingGeometry::causal_pattern). Keeps no statistics.

#include <cstdint>
#include <string>

#include "kernels/attention/ring/ring_pattern_selector.h"

namespace sb {

class DenseRingSelector : public RingPatternSelector {
 public:
  // block_size: the ring's compute tiles (>= 1).
  explicit DenseRingSelector(int64_t block_size);
  std::string name() const override { return "dense"; }
  int64_t block_size() const override { return block_size_; }
  RingCallPattern select(const RingSelectionInputs& in) override;

 private:
  int64_t block_size_;
};

}  // namespace sb
