#pragma once
// Small helpers shared by the Qwen2 unit tests (header-only): seeded models of the
// small presets, a packed batch of random tokens, its summed cross-entropy, and
// comparisons.

#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/attention/core/attention_backend.h"
#include "models/qwen2/qwen2_model.h"
#include "kernels/attention/patterns/dense/dense_pattern.h"

namespace sb::test {

inline Qwen2ForCausalLM make_test_model(const std::string& preset, uint64_t seed) {
  at::manual_seed(seed);
  return Qwen2ForCausalLM(qwen2_preset(preset),
                          std::shared_ptr<AttentionBackend>(dense_attention_options().make_backend()));
}

// Positions restarting at 0 in every sequence: [T] int64.
inline at::Tensor positions_for(const std::vector<int64_t>& lengths) {
  std::vector<at::Tensor> parts;
  for (int64_t n : lengths) parts.push_back(at::arange(n, at::kLong));
  return at::cat(parts);
}

inline double max_abs_diff(const at::Tensor& a, const at::Tensor& b) {
  return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>();
}

// A packed micro-batch of random tokens with random targets (all positions carry loss).
struct TestBatch {
  at::Tensor tokens;     // [T] int64
  at::Tensor positions;  // [T] int64
  at::Tensor targets;    // [T] int64
  PackedSequences sequences;
};

inline TestBatch make_test_batch(const std::vector<int64_t>& lengths, int64_t vocab,
                                 uint64_t seed) {
  at::manual_seed(seed);
  TestBatch batch;
  int64_t total = 0;
  for (int64_t n : lengths) total += n;
  batch.tokens = at::randint(vocab, {total}, at::kLong);
  batch.targets = at::randint(vocab, {total}, at::kLong);
  batch.positions = positions_for(lengths);
  batch.sequences = PackedSequences::from_lengths(lengths);
  return batch;
}

// Summed cross-entropy of the batch's targets; scalar float32.
inline at::Tensor summed_loss(Qwen2ForCausalLM& model, const TestBatch& batch) {
  const at::Tensor logits = model->forward(batch.tokens, batch.positions, batch.sequences);
  return at::cross_entropy_loss(logits, batch.targets, /*weight=*/{}, at::Reduction::Sum);
}

}  // namespace sb::test
