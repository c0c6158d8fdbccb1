#pragma once
// The synthetic SFT data of a manifest (data.synthetic): variable-length sequences of
// a learnable arithmetic task. Every sample is a pure function of (seed, sample id),
// so any rank can produce any sample without coordination and a rerun sees the same data.

#include <cstdint>
#include <vector>

#include "harness/config/manifest.h"
#include "harness/data/sample.h"

namespace sb {

class SyntheticDataset {
 public:
  SyntheticDataset(SyntheticDataSection config, int64_t seed);

  Sample sample(int64_t id) const;
  // The samples of one optimizer step: ids iteration * size ... + size - 1.
  std::vector<Sample> global_batch(int64_t iteration, int64_t global_batch_size) const;

  const SyntheticDataSection& config() const { return config_; }

 private:
  int64_t draw_length(class DeterministicRng& rng) const;

  SyntheticDataSection config_;
  int64_t seed_;
  double total_weight_ = 0;
};

}  // namespace sb
