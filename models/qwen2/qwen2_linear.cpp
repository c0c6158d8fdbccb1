#include "models/qwen2/qwen2_linear.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <torch/nn/init.h>
#include <torch/nn/options/linear.h>

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

namespace sb {

Qwen2LinearImpl::Qwen2LinearImpl(int64_t in_features, int64_t out_features, bool with_bias) {
  if (in_features <= 0 || out_features <= 0) {
    throw std::invalid_argument("Qwen2Linear: features must be positive, got in " +
                                std::to_string(in_features) + ", out " +
                                std::to_string(out_features));
  }
  weight = register_parameter("weight", at::empty({out_features, in_features}));
  if (with_bias) bias = register_parameter("bias", at::empty({out_features}));
  c10::NoGradGuard no_grad;
  // The draws of torch::nn::LinearImpl::reset_parameters, in the same order.
  torch::nn::init::kaiming_uniform_(weight, std::sqrt(5.0));
  if (with_bias) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(in_features));
    torch::nn::init::uniform_(bias, -bound, bound);
  }
}

at::Tensor Qwen2LinearImpl::forward(const at::Tensor& x) {
  at::Tensor y = at::linear(x, weight, bias);  // [..., out]
  if (!has_lora()) return y;
  at::Tensor dropped;  // [..., in]
  if (input_shards_ > 1 && is_training() && lora_dropout_ > 0) {
    // The whole input's draws (ones through dropout, in x's dtype and on its device, so the
    // random numbers fall as they do for the whole input), this shard's columns of them as
    // a keep mask with its own storage: the whole mask is freed here, not kept for the
    // backward.
    std::vector<int64_t> whole = x.sizes().vec();
    whole.back() *= input_shards_;
    const at::Tensor keep = at::dropout(at::ones(whole, x.options()), lora_dropout_, true)
                                .narrow(-1, input_shard_ * x.size(-1), x.size(-1))
                                .ne(0);
    if (x.is_cuda()) {
      // The fused CUDA dropout computes x * keep * scale in float and rounds once.
      dropped = x * keep * (1.0 / (1.0 - lora_dropout_));
    } else {
      // The CPU dropout: a noise tensor in x's dtype, divided by 1 - p, times x.
      dropped = x * keep.to(x.scalar_type()).div_(1.0 - lora_dropout_);
    }
  } else {
    dropped = at::dropout(x, lora_dropout_, is_training());
  }
  const at::Tensor low_rank = lora_B->forward(lora_A->forward(dropped));      // [..., out]
  return y + low_rank * lora_scale();
}

void Qwen2LinearImpl::set_input_shard(int64_t index, int64_t count) {
  if (count < 1 || index < 0 || index >= count) {
    throw std::invalid_argument("Qwen2Linear: input shard " + std::to_string(index) + " of " + std::to_string(count));
  }
  input_shard_ = index;
  input_shards_ = count;
}

void Qwen2LinearImpl::add_lora(int64_t rank, double alpha, double dropout) {
  if (has_lora()) throw std::logic_error("Qwen2Linear: a LoRA adapter is already attached");
  if (rank <= 0) throw std::invalid_argument("LoRA rank must be positive, got " + std::to_string(rank));
  if (!(alpha > 0)) throw std::invalid_argument("LoRA alpha must be positive, got " + std::to_string(alpha));
  if (!(dropout >= 0 && dropout < 1)) {
    throw std::invalid_argument("LoRA dropout must be in [0, 1), got " + std::to_string(dropout));
  }
  using torch::nn::LinearOptions;
  lora_A = register_module("lora_A", torch::nn::Linear(LinearOptions(in_features(), rank).bias(false)));
  lora_B = register_module("lora_B", torch::nn::Linear(LinearOptions(rank, out_features()).bias(false)));
  lora_A->to(weight.device(), weight.scalar_type());
  lora_B->to(weight.device(), weight.scalar_type());
  {
    c10::NoGradGuard no_grad;
    torch::nn::init::kaiming_uniform_(lora_A->weight, std::sqrt(5.0));
    lora_B->weight.zero_();
  }
  lora_alpha_ = alpha;
  lora_dropout_ = dropout;
  weight.set_requires_grad(false);
  if (bias.defined()) bias.set_requires_grad(false);
  // Follow the module's train/eval mode (register_module keeps the child's own).
  lora_A->train(is_training());
  lora_B->train(is_training());
}

int64_t Qwen2LinearImpl::lora_rank() const { return has_lora() ? lora_A->weight.size(0) : 0; }

double Qwen2LinearImpl::lora_scale() const {
  return has_lora() ? lora_alpha_ / static_cast<double>(lora_rank()) : 0.0;
}

at::Tensor Qwen2LinearImpl::merged_weight() const {
  c10::NoGradGuard no_grad;
  if (!has_lora()) return weight.detach();
  const at::Tensor delta = at::matmul(lora_B->weight.to(at::kDouble),
                                      lora_A->weight.to(at::kDouble)) * lora_scale();  // [out, in]
  return (weight.to(at::kDouble) + delta).to(weight.scalar_type());
}

}  // namespace sb
