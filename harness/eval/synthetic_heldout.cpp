#include "harness/eval/synthetic_heldout.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <stdexcept>

#include "harness/data/dataset.h"

namespace sb {

nlohmann::ordered_json synthetic_heldout(Qwen2ForCausalLM& model, const Dataset& data,
                                         const SyntheticHeldoutOptions& options) {
  if (options.samples < 1) throw std::invalid_argument("synthetic_heldout: samples must be >= 1");
  c10::NoGradGuard no_grad;
  const bool was_training = model->is_training();
  model->eval();
  const auto device = model->parameters().front().device();
  double loss_sum = 0;
  int64_t targets = 0, right_tokens = 0, right_samples = 0;
  for (int64_t i = 0; i < options.samples; ++i) {
    const Sample s = data.sample(kSyntheticHeldoutFirstId + i);
    const int64_t n = s.length();
    // Position t - 1 predicts token t; mask [n - 1] marks the targets among tokens 1..n-1.
    std::vector<int64_t> target_positions;
    for (int64_t t = 1; t < n; ++t) {
      if (s.is_target(t)) target_positions.push_back(t - 1);
    }
    if (target_positions.empty()) continue;
    const at::Tensor tokens = at::tensor(s.tokens, at::kLong).to(device);
    const at::Tensor where = at::tensor(target_positions, at::kLong).to(device);
    const at::Tensor picked =
        model->forward_rows(tokens, at::arange(n, tokens.options()), PackedSequences::from_lengths({n}), where);  // [m, V]
    const at::Tensor expected = tokens.index_select(0, where + 1);           // [m]
    loss_sum += at::cross_entropy_loss(picked, expected, {}, at::Reduction::Sum).item<double>();
    const int64_t right = picked.argmax(-1).eq(expected).sum().item<int64_t>();
    const auto m = static_cast<int64_t>(target_positions.size());
    targets += m;
    right_tokens += right;
    right_samples += right == m ? 1 : 0;
  }
  if (was_training) model->train();
  if (targets == 0) throw std::invalid_argument("synthetic_heldout: the samples have no target tokens");
  nlohmann::ordered_json result;
  result["samples"] = options.samples;
  result["target_tokens"] = targets;
  result["loss"] = loss_sum / static_cast<double>(targets);
  result["token_accuracy"] = static_cast<double>(right_tokens) / static_cast<double>(targets);
  result["exact_match"] = static_cast<double>(right_samples) / static_cast<double>(options.samples);
  return result;
}

}  // namespace sb
