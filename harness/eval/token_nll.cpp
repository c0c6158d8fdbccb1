#include "harness/eval/token_nll.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <stdexcept>
#include <string>

namespace sb {

TokenNll token_nll(Qwen2ForCausalLM& model, const std::vector<int64_t>& ids) {
  const int64_t n = static_cast<int64_t>(ids.size());
  if (n < 2) throw std::invalid_argument("token_nll: need at least 2 tokens, got " + std::to_string(n));
  const Qwen2Config& config = model->config();
  if (n > qwen2_position_limit(config)) {
    throw std::invalid_argument("token_nll: " + std::to_string(n) + " tokens exceed the model's " +
                                std::to_string(qwen2_position_limit(config)) + " positions");
  }
  for (int64_t id : ids) {
    if (id < 0 || id >= config.vocab_size) {
      throw std::invalid_argument("token_nll: token id " + std::to_string(id) +
                                  " is outside the vocabulary [0, " +
                                  std::to_string(config.vocab_size) + ")");
    }
  }
  c10::NoGradGuard no_grad;
  const auto device = model->parameters().front().device();
  const at::Tensor tokens = at::tensor(ids, at::kLong).to(device);  // [n]
  // Position t predicts token t + 1; the last position predicts nothing (label -1).
  const at::Tensor labels = at::cat({tokens.narrow(0, 1, n - 1), at::full({1}, -1, tokens.options())});  // [n]
  const at::Tensor losses = model->token_losses(tokens, at::arange(n, tokens.options()),
                                                PackedSequences::from_lengths({n}), labels)
                                .narrow(0, 0, n - 1)
                                .to(at::kDouble)
                                .cpu();  // [n - 1], no [n, V] logits
  TokenNll out;
  out.tokens = n - 1;
  out.per_token.assign(losses.const_data_ptr<double>(), losses.const_data_ptr<double>() + (n - 1));
  double sum = 0;
  for (double v : out.per_token) sum += v;
  out.nll = sum / static_cast<double>(n - 1);
  return out;
}

}  // namespace sb
