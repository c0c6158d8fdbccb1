#pragma once
// One pipeline stage of a Qwen2 model, built from the model's public pieces (the
// embedding, decoder layers, final norm and head of models/qwen2/qwen2_model.h):
//   first stage: token embedding, then its decoder layers;
//   middle stages: their decoder layers;
//   last stage: its decoder layers and the final norm; the head and the loss follow
//   fused, chunk by chunk (cross_entropy_sum, models/qwen2/qwen2_head_loss.h), so no
//   [T, V] logits exist.
// With one stage it computes what Qwen2ForCausalLM::forward then the loss compute.
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
//
// Tensor parallelism (enable_tensor_parallelism, docs/tensor_parallel.md): the stage
// keeps this TP rank's shards (tensor_parallel_sharding.h), the residual stream between
// layers and stages is this rank's rows [ceil(T / tp), H] (sequence parallelism), the
// embedding and head are split by vocabulary and the loss is the vocabulary-parallel
// cross-entropy (two all-reduces of [T]-sized row statistics, none in backward).

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "harness/parallel/parallel_layout.h"
#include "harness/parallel/tensor_parallel/sequence_parallel_collectives.h"
#include "harness/parallel/tensor_parallel/vocab_parallel.h"
#include "kernels/attention/core/attention_backend.h"
#include "models/qwen2/qwen2_head_loss.h"
#include "models/qwen2/qwen2_model.h"
#include "models/qwen2/qwen2_precision.h"

namespace sb {

struct StageParameter {
  std::string name;  // module path in Qwen2ForCausalLM ("layers.3.mlp.up_proj.weight")
  at::Tensor tensor;
  bool tied_copy = false;  // the last stage's copy of embed_tokens.weight
  // Under tensor parallelism: the dimension split over the TP ranks, -1 for a tensor
  // every TP rank holds whole (tensor_parallel_split_dim). -1 without TP.
  int64_t tp_split_dim = -1;
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

  // Keeps only TP rank group->rank()'s shard of every parameter (in place: the tensors
  // keep their identity) and joins the decoder layers by sequence parallelism. Once,
  // before training; `group` is shared with the caller, which reads its comm time.
  void enable_tensor_parallelism(std::shared_ptr<TensorParallelGroup> group);
  TensorParallelGroup* tensor_parallel_group() const { return tp_group_.get(); }

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

  // input: tokens [T] int64 on the first stage, else hidden states [R, H] with
  // R = activation_rows(T); position_ids [T] int64 (restarting per packed sequence).
  // -> on the last stage the head's input: the final-normed hidden states [T, H] (all T
  // rows, gathered under TP); else hidden states [R, H].
  // Runs under the model's precision (autocast for bf16-mixed) and checkpoints each
  // decoder layer when the model has activation checkpointing on, as
  // Qwen2ForCausalLM::forward does.
  at::Tensor forward(const at::Tensor& input, const at::Tensor& position_ids,
                     const PackedSequences& sequences);

  // Rows of the hidden states between stages for a T-token micro-batch: T, or this
  // rank's ceil(T / tp) under tensor parallelism.
  int64_t activation_rows(int64_t tokens) const;
  // The last stage's loss: the head applied to head_input [T, H] (forward's output) and
  // the summed token cross-entropy against labels [T] (kIgnoreLabel left out), fused and
  // chunked; vocabulary-parallel under TP (the same value on every TP rank).
  at::Tensor cross_entropy_sum(const at::Tensor& head_input, const at::Tensor& labels);
  // The head's float32 logits [T, V] ([T, this rank's vocabulary] under TP): for checks
  // and scoring of short inputs; training never makes them.
  at::Tensor logits(const at::Tensor& head_input);

  // In Qwen2ForCausalLM's named_parameters() order.
  const std::vector<StageParameter>& parameters() const { return parameters_; }
  // This stage's part of a plain Qwen2 model, as a saved HF folder stores it: LoRA
  // adapters folded into their projections' weights (W + alpha / r * B A) and left out,
  // the tied head copy left out. Module-path names, detached, in parameters() order.
  // Under TP: this rank's shards (see full_tensor for the whole).
  std::vector<std::pair<std::string, at::Tensor>> merged_weights() const;
  // The whole tensor of parameter `name` from every TP rank's shard `shard` (an
  // all-gather over the TP group: every TP rank calls it, in the same order); `shard`
  // itself without TP or for a tensor held whole.
  at::Tensor full_tensor(const std::string& name, const at::Tensor& shard) const;
  void set_training(bool training);

 private:
  void keep_parts(Qwen2ForCausalLM& model);
  at::Tensor head_weight() const;             // [V or V / tp, H]
  HeadLossOptions head_loss_options() const;  // this rank's vocabulary and its reduction

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
  std::shared_ptr<TensorParallelGroup> tp_group_;        // null without TP
  std::shared_ptr<C10dSequenceParallel> sequence_parallel_;
  ShardRange vocab_;                                      // this TP rank's token ids
};

}  // namespace sb
