#pragma once
// The projections of a Qwen2 decoder layer (q, k, v, o, gate, up, down): y = x W^T + b,
// optionally with a LoRA adapter beside the frozen base weight (PEFT's definition):
//   y = x W^T + b + scale * B(A(dropout(x))),   scale = alpha / rank,
// A [rank, in] (lora_A.weight), B [out, rank] (lora_B.weight). Dropout acts on the
// adapter's input only; the base path never sees it.

#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>

#include <cstdint>

namespace sb {

class Qwen2LinearImpl : public torch::nn::Module {
 public:
  // Initialised as torch::nn::Linear is (the model then re-initialises as HF does),
  // drawing the same random numbers, so seeded models keep their initial weights.
  Qwen2LinearImpl(int64_t in_features, int64_t out_features, bool bias);

  at::Tensor forward(const at::Tensor& x);  // [..., in] -> [..., out]

  // Adds the adapter: A kaiming-uniform with a = sqrt(5) (bound 1/sqrt(in), as PEFT),
  // B zero, on the weight's device and dtype; freezes weight and bias. Once only.
  void add_lora(int64_t rank, double alpha, double dropout);
  bool has_lora() const { return static_cast<bool>(lora_A); }
  int64_t lora_rank() const;
  double lora_alpha() const { return lora_alpha_; }
  double lora_dropout() const { return lora_dropout_; }
  double lora_scale() const;

  // Tensor parallelism, row-parallel projections (o_proj, down_proj): this projection's
  // input is shard `index` of `count` equal column shards of the layer's input. LoRA
  // dropout then draws the mask of the whole input, as one process would, and keeps this
  // shard's columns: the TP ranks draw the same numbers in the same order (seeded alike,
  // the same projections on the same token counts), so their masks together are one
  // mask, the one-process run's when the generators agree (on the CPU bit for bit; on CUDA
  // the same mask, scaled as the fused kernel scales). Column-parallel projections see the
  // whole input on every rank and need nothing. count 1: the whole input.
  void set_input_shard(int64_t index, int64_t count);

  // W + scale * B A ([out, in], the weight's dtype; the product is formed in float64),
  // what a merged checkpoint stores. Without an adapter: the weight itself (detached).
  at::Tensor merged_weight() const;

  int64_t in_features() const { return weight.size(1); }
  int64_t out_features() const { return weight.size(0); }

  at::Tensor weight;  // [out, in]
  at::Tensor bias;    // [out], undefined when the projection has none
  torch::nn::Linear lora_A{nullptr};  // in -> rank, no bias; null without an adapter
  torch::nn::Linear lora_B{nullptr};  // rank -> out, no bias

 private:
  double lora_alpha_ = 0.0;
  double lora_dropout_ = 0.0;
  int64_t input_shard_ = 0, input_shards_ = 1;  // set_input_shard
};
TORCH_MODULE(Qwen2Linear);

}  // namespace sb
