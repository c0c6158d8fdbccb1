#include "models/qwen2/qwen2_generate.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <algorithm>
#include <stdexcept>
#include <string>

namespace sb {

std::vector<int64_t> qwen2_generate_greedy(Qwen2ForCausalLM& model,
                                           const std::vector<int64_t>& prompt_ids,
                                           int64_t max_new_tokens,
                                           const std::vector<int64_t>& stop_ids) {
  if (prompt_ids.empty()) throw std::invalid_argument("generate: the prompt is empty");
  if (max_new_tokens < 0) throw std::invalid_argument("generate: max_new_tokens must be >= 0");
  const int64_t limit = model->config().max_position_embeddings;
  if (static_cast<int64_t>(prompt_ids.size()) + max_new_tokens > limit) {
    throw std::invalid_argument("generate: prompt + max_new_tokens exceeds the model's " +
                                std::to_string(limit) + " positions");
  }
  for (int64_t id : prompt_ids) {
    if (id < 0 || id >= model->config().vocab_size) {
      throw std::invalid_argument("generate: prompt token id " + std::to_string(id) +
                                  " is outside the vocabulary [0, " +
                                  std::to_string(model->config().vocab_size) + ")");
    }
  }
  c10::NoGradGuard no_grad;
  const bool was_training = model->is_training();
  model->eval();
  const auto device = model->parameters().front().device();
  const auto long_options = at::TensorOptions().dtype(at::kLong).device(device);
  Qwen2KVCache cache;
  at::Tensor input = at::tensor(prompt_ids, at::kLong).to(device);  // [n] prefill
  std::vector<int64_t> generated;
  for (int64_t step = 0; step < max_new_tokens; ++step) {
    const at::Tensor logits = model->forward_cached(input, cache);  // [n, V]
    const int64_t next = logits[-1].argmax().item<int64_t>();
    generated.push_back(next);
    if (std::find(stop_ids.begin(), stop_ids.end(), next) != stop_ids.end()) break;
    input = at::full({1}, next, long_options);
  }
  if (was_training) model->train();
  return generated;
}

}  // namespace sb
