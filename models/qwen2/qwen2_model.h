#pragma once
// Qwen2 decoder-only language model (math only: parallelism lives in harness/).
// Layout per layer: x + attn(rms_norm(x)), then h + mlp(rms_norm(h)); final norm;
// lm_head tied to the embedding when config.tie_word_embeddings.

#include <torch/nn/module.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/container/modulelist.h>

#include <memory>

#include "kernels/attention/core/attention_backend.h"
#include "kernels/attention/core/packed_sequences.h"
#include "models/qwen2/qwen2_config.h"
#include "models/qwen2/qwen2_linear.h"
#include "models/qwen2/qwen2_precision.h"
#include "models/qwen2/qwen2_sequence_parallel.h"

namespace sb {

// Keys and values of one sequence's past tokens, per layer, for incremental decoding.
struct Qwen2KVCache {
  std::vector<at::Tensor> keys;    // per layer [L, Hkv, D] (after rotary)
  std::vector<at::Tensor> values;  // per layer [L, Hkv, D]
  int64_t length() const { return keys.empty() || !keys[0].defined() ? 0 : keys[0].size(0); }
};

// RMSNorm as Qwen2 computes it: statistics in float32, normalized value cast back
// to the input dtype, then scaled by the weight.
class Qwen2RMSNormImpl : public torch::nn::Module {
 public:
  Qwen2RMSNormImpl(int64_t hidden_size, double eps);
  at::Tensor forward(const at::Tensor& x);  // [..., H] -> [..., H]
  at::Tensor weight;

 private:
  double eps_;
};
TORCH_MODULE(Qwen2RMSNorm);

class Qwen2AttentionImpl : public torch::nn::Module {
 public:
  // layer_index: this layer's position in the model, passed to the attention backend.
  Qwen2AttentionImpl(const Qwen2Config& config, int64_t layer_index);
  // x [T, H]; cos, sin [T, head_dim] -> [T, H]
  at::Tensor forward(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin,
                     const PackedSequences& sequences, AttentionBackend& backend);
  // x [n, H] new tokens of one sequence; appends their keys/values to cache_k/cache_v
  // ([L, Hkv, D], undefined when empty) -> [n, H].
  at::Tensor forward_cached(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin,
                            at::Tensor& cache_k, at::Tensor& cache_v, AttentionBackend& backend);
  Qwen2Linear q_proj{nullptr}, k_proj{nullptr}, v_proj{nullptr}, o_proj{nullptr};

 private:
  int64_t num_heads_, num_kv_heads_, head_dim_, layer_index_;
};
TORCH_MODULE(Qwen2Attention);

class Qwen2MLPImpl : public torch::nn::Module {
 public:
  explicit Qwen2MLPImpl(const Qwen2Config& config);
  at::Tensor forward(const at::Tensor& x);  // down(silu(gate(x)) * up(x)), [T, H] -> [T, H]
  Qwen2Linear gate_proj{nullptr}, up_proj{nullptr}, down_proj{nullptr};
};
TORCH_MODULE(Qwen2MLP);

class Qwen2DecoderLayerImpl : public torch::nn::Module {
 public:
  Qwen2DecoderLayerImpl(const Qwen2Config& config, int64_t layer_index);
  // x [T, H] -> [T, H]; under sequence parallelism (set_sequence_parallel) x and the
  // result are this rank's rows [L, H] of the stream (qwen2_sequence_parallel.h), while
  // cos and sin keep a row per token of the whole micro-batch.
  at::Tensor forward(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin,
                     const PackedSequences& sequences, AttentionBackend& backend);
  at::Tensor forward_cached(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin,
                            at::Tensor& cache_k, at::Tensor& cache_v, AttentionBackend& backend);
  Qwen2RMSNorm input_layernorm{nullptr}, post_attention_layernorm{nullptr};
  Qwen2Attention self_attn{nullptr};
  Qwen2MLP mlp{nullptr};

  // Tensor parallelism: the layer's projections hold this rank's shards
  // (harness/parallel/tensor_parallel/tensor_parallel_sharding.h) and `sp` joins them.
  void set_sequence_parallel(std::shared_ptr<Qwen2SequenceParallel> sp) { sequence_parallel_ = std::move(sp); }

 private:
  std::shared_ptr<Qwen2SequenceParallel> sequence_parallel_;
};
TORCH_MODULE(Qwen2DecoderLayer);

class Qwen2ForCausalLMImpl : public torch::nn::Module {
 public:
  // Parameters are initialised as HF does (normal(0, initializer_range) for linear and
  // embedding weights, zero biases, unit norms) from the current global torch seed.
  Qwen2ForCausalLMImpl(Qwen2Config config, std::shared_ptr<AttentionBackend> backend);

  // tokens, position_ids [T] int64 (positions restart at 0 in every packed sequence)
  // -> logits [T, vocab_size] in float32. Runs under the model's precision.
  at::Tensor forward(const at::Tensor& tokens, const at::Tensor& position_ids,
                     const PackedSequences& sequences);
  // The same, but logits only for the token rows `rows` ([R] int64 indices into T)
  // -> [R, vocab_size] float32: scoring a few positions of a long packed batch without
  // a [T, V] matrix.
  at::Tensor forward_rows(const at::Tensor& tokens, const at::Tensor& position_ids,
                          const PackedSequences& sequences, const at::Tensor& rows);

  // The summed token cross-entropy against labels [T] int64 (negative ids ignored),
  // through the head fused with the loss chunk by chunk (qwen2_head_loss.h): no [T, V]
  // logits in forward or backward. A float32 scalar; runs under the model's precision.
  at::Tensor loss_sum(const at::Tensor& tokens, const at::Tensor& position_ids, const PackedSequences& sequences,
                      const at::Tensor& labels);
  // The same per token, without autograd: [T] float32 (0 on ignored rows).
  at::Tensor token_losses(const at::Tensor& tokens, const at::Tensor& position_ids, const PackedSequences& sequences,
                          const at::Tensor& labels);
  // The head's weight [V, H]: lm_head's, or the embedding's when tied.
  at::Tensor head_weight() const;

  // Decoder layer `index` on h [T, H] -> [T, H]: checkpointed when activation
  // checkpointing is on and grad mode is enabled, plain otherwise. Code that runs
  // layers one by one (pipeline stages) calls this so that the setting holds there
  // too; it must run inside the model's precision (see Qwen2AutocastGuard).
  at::Tensor forward_layer(int64_t index, const at::Tensor& h, const at::Tensor& cos,
                           const at::Tensor& sin, const PackedSequences& sequences);

  // Incremental forward of ONE sequence: tokens [n] continue the cached prefix (their
  // positions are cache.length() .. + n - 1); the cache grows by n. -> logits [n, V]
  // float32, or [1, V] for the last token only with last_only (a long prompt's prefill
  // then holds no [n, V] logits). Meant for generation under no-grad.
  at::Tensor forward_cached(const at::Tensor& tokens, Qwen2KVCache& cache, bool last_only = false);

  const Qwen2Config& config() const { return config_; }
  AttentionBackend& attention_backend() { return *backend_; }
  std::shared_ptr<AttentionBackend> attention_backend_ptr() const { return backend_; }
  void set_attention_backend(std::shared_ptr<AttentionBackend> backend);

  // Compute precision of forward and forward_cached (default fp32).
  Qwen2Precision precision() const { return precision_; }
  void set_precision(Qwen2Precision precision) { precision_ = precision; }
  // Per-layer activation checkpointing (default off): each decoder layer keeps only
  // its input and recomputes its activations in the backward pass.
  bool activation_checkpointing() const { return activation_checkpointing_; }
  void set_activation_checkpointing(bool enabled) { activation_checkpointing_ = enabled; }

  torch::nn::Embedding embed_tokens{nullptr};
  torch::nn::ModuleList layers{nullptr};
  Qwen2RMSNorm norm{nullptr};
  torch::nn::Linear lm_head{nullptr};  // null when tied: logits use embed_tokens->weight

 private:
  // h [T, H] -> logits [T, V] float32: final norm, then the (tied or own) head.
  at::Tensor logits_from_hidden(const at::Tensor& h);
  // The decoder layers' output [T, H] before the final norm (inside forward's autocast).
  at::Tensor hidden_states(const at::Tensor& tokens, const at::Tensor& position_ids, const PackedSequences& sequences);

  Qwen2Config config_;
  std::shared_ptr<AttentionBackend> backend_;
  Qwen2Precision precision_ = Qwen2Precision::kFloat32;
  bool activation_checkpointing_ = false;
};
TORCH_MODULE(Qwen2ForCausalLM);

// Rotary embedding tables for the given positions: cos, sin [T, head_dim] (float32),
// the rotate-half (Llama) layout with inv_freq = theta^(-2i/head_dim).
std::pair<at::Tensor, at::Tensor> qwen2_rotary_tables(const at::Tensor& position_ids,
                                                      int64_t head_dim, double theta);
// The same for a model's config: plain RoPE, or YaRN's blended frequencies and scaled
// tables when config.yarn is set (qwen2_config.h), in transformers' operation order.
std::pair<at::Tensor, at::Tensor> qwen2_rotary_tables(const at::Tensor& position_ids, const Qwen2Config& config);
// x [T, H, D] rotated by cos, sin [T, D].
at::Tensor qwen2_apply_rotary(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin);

}  // namespace sb
