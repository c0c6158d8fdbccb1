#pragma once
// Greedy decoding as transformers' generate(do_sample=False, num_beams=1) does it for
// LongBench: stop tokens end the output (and are kept in it), and min_new_tokens > 0
// bans the stop tokens for the first steps (transformers' MinLengthLogitsProcessor, which
// upstream's samsum call gets through min_length = context length + 1).
// repetition_penalty != 1 is transformers' RepetitionPenaltyLogitsProcessor: the logit of
// every token already in the sequence (prompt included) is multiplied by the penalty when
// negative, divided by it otherwise. transformers applies generation_config.json's value
// even to greedy generate() calls (Qwen2.5-Instruct ships 1.05); here it is off unless
// asked for.

#include <cstdint>
#include <vector>

#include "models/qwen2/qwen2_model.h"

namespace sb {

struct GreedyOptions {
  int64_t max_new_tokens = 0;
  std::vector<int64_t> stop_ids;
  int64_t min_new_tokens = 0;
  double repetition_penalty = 1.0;
};

// Throws std::invalid_argument for an empty prompt, ids outside the vocabulary, or a
// prompt + max_new_tokens beyond the model's positions.
std::vector<int64_t> greedy_decode(Qwen2ForCausalLM& model, const std::vector<int64_t>& prompt_ids,
                                   const GreedyOptions& options);

}  // namespace sb
