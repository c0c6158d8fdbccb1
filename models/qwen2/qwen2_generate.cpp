#include "models/qwen2/qwen2_generate.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>

namespace sb {
namespace {

void check_request(const Qwen2Config& config, const std::vector<int64_t>& prompt_ids, const GreedyOptions& options) {
  if (prompt_ids.empty()) throw std::invalid_argument("generate: the prompt is empty");
  if (options.max_new_tokens < 0) throw std::invalid_argument("generate: max_new_tokens must be >= 0");
  if (!(options.repetition_penalty > 0)) throw std::invalid_argument("generate: repetition_penalty must be > 0");
  if (static_cast<int64_t>(prompt_ids.size()) + options.max_new_tokens > qwen2_position_limit(config)) {
    throw std::invalid_argument("generate: " + std::to_string(prompt_ids.size()) + " prompt tokens + " +
                                std::to_string(options.max_new_tokens) + " new tokens exceed the model's " +
                                std::to_string(qwen2_position_limit(config)) + " positions");
  }
  for (int64_t id : prompt_ids) {
    if (id < 0 || id >= config.vocab_size) {
      throw std::invalid_argument("generate: prompt token id " + std::to_string(id) +
                                  " is outside the vocabulary [0, " + std::to_string(config.vocab_size) + ")");
    }
  }
}

}  // namespace

std::vector<int64_t> qwen2_generate_greedy(Qwen2ForCausalLM& model, const std::vector<int64_t>& prompt_ids,
                                           const GreedyOptions& options) {
  check_request(model->config(), prompt_ids, options);
  c10::NoGradGuard no_grad;
  const bool was_training = model->is_training();
  model->eval();
  const auto device = model->parameters().front().device();
  Qwen2KVCache cache;
  at::Tensor input = at::tensor(prompt_ids, at::kLong).to(device);  // [n] prefill, then [1]
  at::Tensor seen = input;                                            // [n + step] for the penalty
  const bool penalize = options.repetition_penalty != 1.0;
  std::vector<int64_t> generated;
  for (int64_t step = 0; step < options.max_new_tokens; ++step) {
    at::Tensor last = model->forward_cached(input, cache, /*last_only=*/true)[0];  // [V] float32
    if (penalize) {
      last = last.clone();
      const at::Tensor score = last.index_select(0, seen);
      last.index_put_({seen}, at::where(score < 0, score * options.repetition_penalty,
                                        score / options.repetition_penalty));
    }
    if (step < options.min_new_tokens) {
      last = last.clone();
      for (int64_t id : options.stop_ids) {
        if (id >= 0 && id < last.size(0)) last[id] = -std::numeric_limits<float>::infinity();
      }
    }
    const int64_t next = last.argmax().item<int64_t>();
    generated.push_back(next);
    if (std::find(options.stop_ids.begin(), options.stop_ids.end(), next) != options.stop_ids.end()) break;
    input = at::full({1}, next, at::TensorOptions().dtype(at::kLong).device(device));
    if (penalize) seen = at::cat({seen, input});
  }
  if (was_training) model->train();
  return generated;
}

}  // namespace sb
