#pragma once
// The synthetic SFT data of a manifest (data.synthetic): variable-length sequences of
// the arithmetic or retrieval task with lengths from a mixture, a named profile or a
// file (see SyntheticDataSection in harness/data/data_spec.h). Every sample is a pure
// function of (seed, sample id).

#include <cstdint>
#include <string>
#include <vector>

#include "harness/data/data_spec.h"
#include "harness/data/dataset.h"

namespace sb {

class DeterministicRng;

// The shortest sequence the task can hold: prompt + 1 (arithmetic) or the retrieval
// layout's minimum.
int64_t synthetic_min_length(const SyntheticDataSection& config);
// The length distribution as scaled mixture components (for lengths = "file": none).
std::vector<LengthComponent> synthetic_length_components(const SyntheticDataSection& config);
// Lengths listed in length_file, scaled (lengths = "file"). ConfigError naming the file
// and line for anything that is not a positive integer.
std::vector<int64_t> synthetic_file_lengths(const SyntheticDataSection& config);
// The longest sequence the section can produce.
int64_t synthetic_longest_length(const SyntheticDataSection& config);

class SyntheticDataset : public Dataset {
 public:
  SyntheticDataset(SyntheticDataSection config, int64_t seed);

  Sample sample(int64_t id) const override;
  // Draws the length only (the same draw sample() starts with).
  SampleShape shape(int64_t id) const override;
  int64_t max_length() const override;
  std::string describe() const override;

  const SyntheticDataSection& config() const { return config_; }

 private:
  // The sample's random stream; its first draw is the length.
  DeterministicRng stream(int64_t id) const;
  int64_t draw_length(DeterministicRng& rng) const;
  // The task's prompt in a sample of `length` tokens.
  int64_t prompt_tokens(int64_t length) const;

  SyntheticDataSection config_;
  int64_t seed_;
  std::vector<LengthComponent> components_;
  std::vector<int64_t> file_lengths_;
  double total_weight_ = 0;
};

}  // namespace sb
