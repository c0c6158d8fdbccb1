#pragma once
// Greedy decoding with a key/value cache, as transformers' generate(do_sample=False,
// num_beams=1) does it: the prompt is run once (prefill), then one token per step, each
// the argmax of the last logits, until max_new_tokens or a stop token (which is kept in
// the output).
//   min_new_tokens > 0 bans the stop tokens for the first steps (transformers'
//   MinLengthLogitsProcessor; LongBench's samsum call reaches it through min_length).
//   repetition_penalty != 1 is transformers' RepetitionPenaltyLogitsProcessor: the logit
//   of every token already in the sequence (prompt included) is multiplied by the
//   penalty when negative, divided by it otherwise. transformers applies
//   generation_config.json's value even to greedy calls (Qwen2.5-Instruct ships 1.05);
//   here it is off unless asked for.

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

// Runs the model in eval mode (restoring its mode after). Throws std::invalid_argument
// for an empty prompt, ids outside the vocabulary, a negative max_new_tokens, a
// repetition_penalty <= 0, or prompt + max_new_tokens beyond the model's positions.
std::vector<int64_t> qwen2_generate_greedy(Qwen2ForCausalLM& model, const std::vector<int64_t>& prompt_ids,
                                           const GreedyOptions& options);

}  // namespace sb
