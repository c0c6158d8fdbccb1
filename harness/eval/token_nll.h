#pragma once
// Negative log-likelihood of a token sequence under a model: the mean over the n - 1
// predicted tokens of -log p(token_{t+1} | tokens_{<=t}), natural log, computed from
// float32 logits (as transformers' loss for labels = input_ids).

#include <cstdint>
#include <vector>

#include "models/qwen2/qwen2_model.h"

namespace sb {

struct TokenNll {
  double nll = 0;      // mean over predicted tokens
  int64_t tokens = 0;  // predicted tokens (sequence length - 1)
  // per_token[t] = -log p(token_{t+1} | tokens_{<=t}), t = 0 .. n - 2
  std::vector<double> per_token;
};

// Throws std::invalid_argument for fewer than 2 tokens, ids outside the vocabulary or
// sequences longer than the model's positions.
TokenNll token_nll(Qwen2ForCausalLM& model, const std::vector<int64_t>& ids);

}  // namespace sb
