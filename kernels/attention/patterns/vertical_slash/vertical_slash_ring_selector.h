#pragma once
// Vertical-slash under context parallelism (docs/context_parallel.md, "Vertical-slash
// under CP"): every CP rank builds the same index from the CP group's all-reduces
// (vertical_slash_ring_index.h; under a budget request vertical_slash_ring_budget.h), its
// slash blocks become the call's blocks and its columns outside them the call's columns
// (vertical_slash_ring_pattern.h); the layer's statistics are the one-rank backend's,
// counted from the index every rank shares.

#include <string>
#include <vector>

#include "kernels/attention/patterns/vertical_slash/vertical_slash_index.h"
#include "kernels/attention/ring/ring_pattern_selector.h"

namespace sb {

class VerticalSlashRingSelector : public RingPatternSelector {
 public:
  // Throws std::invalid_argument for params that do not validate.
  explicit VerticalSlashRingSelector(VerticalSlashParams params);
  std::string name() const override { return "vertical_slash"; }
  int64_t block_size() const override { return params_.block_size; }
  RingCallPattern select(const RingSelectionInputs& in) override;

  // The last call's index [sequence][query head], the same on every CP rank.
  const std::vector<std::vector<VerticalSlashHeadIndex>>& last_index() const { return index_; }

 private:
  VerticalSlashParams params_;
  std::vector<std::vector<VerticalSlashHeadIndex>> index_;
};

}  // namespace sb
