#pragma once
// One pipeline stage of a Qwen2 model, built from the model's public pieces (the
// embedding, decoder layers, final norm and head of models/qwen2/qwen2_model.h):
//   first stage: token embedding, then its decoder layers;
//   middle stages: their decoder layers;
//   last stage: its decoder layers, the final norm and the head (logits in float32).
// With one stage it computes exactly what Qwen2ForCausalLM::forward computes.
//
// Initial weights: the whole model is built from the current global torch seed, as
// the one-process trainer does, and the stage keeps its parts; the rest is freed when
// construction ends. Every rank thus starts from the weights of the one-process run,
// at the price of materialising the whole model once per rank on the CPU (about 12
// GiB in float32 for Qwen2.5-3B; loading stage shards from a checkpoint avoids it).
//
// Tied embeddings (tie_word_embeddings) with several stages: the last stage keeps its
// own copy of the embedding matrix as the head weight. Its gradient is summed with the
// first stage's (GradientSync), so both copies take identical optimizer steps; the
// copy is left out of the gradient norm and of checkpoints.

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "harness/parallel/parallel_layout.h"
#include "kernels/attention/attention_backend.h"
#include "models/qwen2/qwen2_model.h"
#include "models/qwen2/qwen2_precision.h"

namespace sb {

struct StageParameter {
  std::string name;  // module path in Qwen2ForCausalLM ("layers.3.mlp.up_proj.weight")
  at::Tensor tensor;
  bool tied_copy = false;  // the last stage's copy of embed_tokens.weight
};

// Whether a stage holding `layers` of `stages` computes with the model parameter `name`
// (its module path in Qwen2ForCausalLM): the embedding on the first stage, its decoder
// layers, the final norm and head on the last; with a tied head the last stage also
// uses embed_tokens.weight. What a stage loads from a pretrained folder.
bool stage_uses_parameter(const std::string& name, int64_t stage, int64_t stages, StageLayers layers,
                          bool tied_head);

class PipelineStage {
 public:
  // stage of stages, holding decoder layers [layers.first, layers.end); the model is
  // built on the CPU and this stage's parameters are moved to `device`.
  PipelineStage(const Qwen2Config& config, int64_t stage, int64_t stages, StageLayers layers,
                std::shared_ptr<AttentionBackend> backend, c10::Device device);
  // Keeps the parts of an existing model (its parameters are shared, not copied), and
  // its precision and activation-checkpointing settings.
  PipelineStage(Qwen2ForCausalLM model, int64_t stage, int64_t stages, StageLayers layers,
                std::shared_ptr<AttentionBackend> backend);

  // Moves this stage's parameters to `device` in place (they keep their identity, so an
  // optimizer built on them afterwards or before sees the same tensors).
  void move_to(c10::Device device);

  bool is_first() const { return stage_ == 0; }
  bool is_last() const { return stage_ == stages_ - 1; }
  int64_t stage() const { return stage_; }
  int64_t stages() const { return stages_; }
  const Qwen2Config& config() const { return config_; }
  StageLayers layers() const { return layers_; }
  AttentionBackend& backend() { return *backend_; }
  c10::Device device() const { return device_; }

  // input: tokens [T] int64 on the first stage, else hidden states [T, H];
  // position_ids [T] int64 (restarting per packed sequence).
  // -> logits [T, V] float32 on the last stage, else hidden states [T, H].
  // Runs under the model's precision (autocast for bf16-mixed) and checkpoints each
  // decoder layer when the model has activation checkpointing on, as
  // Qwen2ForCausalLM::forward does.
  at::Tensor forward(const at::Tensor& input, const at::Tensor& position_ids,
                     const PackedSequences& sequences);

  // In Qwen2ForCausalLM's named_parameters() order.
  const std::vector<StageParameter>& parameters() const { return parameters_; }
  // This stage's part of a plain Qwen2 model, as a saved HF folder stores it: LoRA
  // adapters folded into their projections' weights (W + alpha / r * B A) and left out,
  // the tied head copy left out. Module-path names, detached, in parameters() order.
  std::vector<std::pair<std::string, at::Tensor>> merged_weights() const;
  void set_training(bool training);

 private:
  void keep_parts(Qwen2ForCausalLM& model);

  Qwen2Config config_;
  int64_t stage_, stages_;
  StageLayers layers_;
  std::shared_ptr<AttentionBackend> backend_;
  c10::Device device_;
  Qwen2Precision precision_ = Qwen2Precision::kFloat32;
  bool activation_checkpointing_ = false;
  torch::nn::Embedding embed_tokens_{nullptr};     // first stage
  std::vector<Qwen2DecoderLayer> decoder_layers_;  // this stage's layers
  Qwen2RMSNorm norm_{nullptr};                     // last stage
  torch::nn::Linear lm_head_{nullptr};             // last stage, untied models
  at::Tensor tied_head_weight_;                    // last stage, tied models
  std::vector<StageParameter> parameters_;
};

}  // namespace sb
