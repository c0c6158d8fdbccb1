#pragma once
// Greedy decoding with a key/value cache: the prompt is run once (prefill), then one
// token per step, each the argmax of the last logits, until max_new_tokens or a stop
// token (which is included in the output, as transformers' generate does).

#include <cstdint>
#include <vector>

#include "models/qwen2/qwen2_model.h"

namespace sb {

std::vector<int64_t> qwen2_generate_greedy(Qwen2ForCausalLM& model,
                                           const std::vector<int64_t>& prompt_ids,
                                           int64_t max_new_tokens,
                                           const std::vector<int64_t>& stop_ids);

}  // namespace sb
