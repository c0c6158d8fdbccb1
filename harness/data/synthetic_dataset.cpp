#include "harness/data/synthetic_dataset.h"

#include <stdexcept>

#include "harness/data/deterministic_rng.h"

namespace sb {

SyntheticDataset::SyntheticDataset(SyntheticDataSection config, int64_t seed)
    : config_(std::move(config)), seed_(seed) {
  if (config_.length_mixture.empty()) {
    throw std::invalid_argument("SyntheticDataset: length_mixture is empty");
  }
  for (const auto& c : config_.length_mixture) total_weight_ += c.weight;
}

int64_t SyntheticDataset::draw_length(DeterministicRng& rng) const {
  // Pick a mixture component by weight, then a length uniformly inside it.
  double u = rng.uniform_unit() * total_weight_;
  const LengthComponent* chosen = &config_.length_mixture.back();
  for (const auto& c : config_.length_mixture) {
    if (u < c.weight) {
      chosen = &c;
      break;
    }
    u -= c.weight;
  }
  return rng.uniform_int(chosen->min_tokens, chosen->max_tokens);
}

Sample SyntheticDataset::sample(int64_t id) const {
  if (id < 0) throw std::invalid_argument("SyntheticDataset: negative sample id");
  DeterministicRng rng = DeterministicRng::for_stream(static_cast<uint64_t>(seed_),
                                                      static_cast<uint64_t>(id));
  Sample s;
  s.id = id;
  s.prompt_tokens = config_.prompt_tokens;
  const int64_t length = draw_length(rng);
  const int64_t vocab = config_.vocab_size;
  const int64_t start = rng.uniform_int(0, vocab - 1);
  const int64_t stride = rng.uniform_int(1, config_.max_stride);
  s.tokens.resize(static_cast<size_t>(length));
  for (int64_t t = 0; t < length; ++t) s.tokens[t] = (start + t * stride) % vocab;
  return s;
}

std::vector<Sample> SyntheticDataset::global_batch(int64_t iteration,
                                                   int64_t global_batch_size) const {
  std::vector<Sample> batch;
  batch.reserve(static_cast<size_t>(global_batch_size));
  for (int64_t slot = 0; slot < global_batch_size; ++slot) {
    batch.push_back(sample(iteration * global_batch_size + slot));
  }
  return batch;
}

}  // namespace sb
