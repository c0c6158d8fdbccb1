#pragma once
// Held-out accuracy on the run's own synthetic task (data.source "synthetic"): samples
// drawn from the same generator and length distribution as training, with ids from
// kSyntheticHeldoutFirstId on (training ids are iteration x global batch + slot, far
// below), so no held-out sample was trained on. Per sample, one forward pass; over the
// target tokens (the answer of the retrieval task, everything after the prompt of the
// arithmetic task):
//   loss            sum of target-token cross-entropies / target tokens (natural log)
//   token_accuracy  fraction of target tokens whose argmax prediction is right
//                   (teacher forcing)
//   exact_match     fraction of samples whose target tokens are all right
// These are the CPU-scale accuracy proxies of sparse attention and of DST's budgets.

#include <nlohmann/json.hpp>

#include <cstdint>

#include "models/qwen2/qwen2_model.h"

namespace sb {

class Dataset;  // harness/data/dataset.h (which includes the manifest, which includes this)

inline constexpr int64_t kSyntheticHeldoutFirstId = int64_t{1} << 40;

struct SyntheticHeldoutOptions {
  int64_t samples = 32;
  // Also score with dense causal attention (columns prefixed synthetic_dense_): how much
  // of the loss is the sparse attention's, not the weights'.
  bool dense_reference = true;
};

// {"samples", "target_tokens", "loss", "token_accuracy", "exact_match"} with the model's
// current attention backend, in eval mode, without gradients.
nlohmann::ordered_json synthetic_heldout(Qwen2ForCausalLM& model, const Dataset& data,
                                         const SyntheticHeldoutOptions& options);

}  // namespace sb
