#include "models/qwen2/qwen2_model.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <c10/util/Exception.h>
#include <torch/nn/options/embedding.h>
#include <torch/nn/options/linear.h>

#include <utility>

#include "models/qwen2/qwen2_checkpointing.h"
#include "models/qwen2/qwen2_head_loss.h"

namespace sb {
namespace {

// HF's Qwen2PreTrainedModel._init_weights: normal(0, initializer_range) weights for
// linear and embedding layers, zero biases; RMSNorm weights are already ones.
void qwen2_init_weights(torch::nn::Module& module, double std) {
  c10::NoGradGuard no_grad;
  // include_self=false: called from the constructor, before a shared_ptr owns `module`.
  for (const auto& child : module.modules(/*include_self=*/false)) {
    torch::nn::Module& m = *child;
    if (auto* projection = m.as<Qwen2Linear>()) {
      projection->weight.normal_(0.0, std);
      if (projection->bias.defined()) projection->bias.zero_();
    } else if (auto* linear = m.as<torch::nn::Linear>()) {
      linear->weight.normal_(0.0, std);
      if (linear->bias.defined()) linear->bias.zero_();
    } else if (auto* embedding = m.as<torch::nn::Embedding>()) {
      embedding->weight.normal_(0.0, std);
    }
  }
}

}  // namespace

Qwen2ForCausalLMImpl::Qwen2ForCausalLMImpl(Qwen2Config config,
                                           std::shared_ptr<AttentionBackend> backend)
    : config_(std::move(config)), backend_(std::move(backend)) {
  config_.validate();
  TORCH_CHECK(backend_ != nullptr, "Qwen2ForCausalLM: attention backend must not be null");
  embed_tokens = register_module("embed_tokens", torch::nn::Embedding(torch::nn::EmbeddingOptions(
                                                     config_.vocab_size, config_.hidden_size)));
  layers = register_module("layers", torch::nn::ModuleList());
  for (int64_t i = 0; i < config_.num_hidden_layers; ++i) {
    layers->push_back(Qwen2DecoderLayer(config_, i));
  }
  norm = register_module("norm", Qwen2RMSNorm(config_.hidden_size, config_.rms_norm_eps));
  if (!config_.tie_word_embeddings) {
    lm_head = register_module(
        "lm_head",
        torch::nn::Linear(
            torch::nn::LinearOptions(config_.hidden_size, config_.vocab_size).bias(false)));
  }
  qwen2_init_weights(*this, config_.initializer_range);
}

void Qwen2ForCausalLMImpl::set_attention_backend(std::shared_ptr<AttentionBackend> backend) {
  TORCH_CHECK(backend != nullptr, "Qwen2ForCausalLM: attention backend must not be null");
  backend_ = std::move(backend);
}

at::Tensor Qwen2ForCausalLMImpl::forward(const at::Tensor& tokens, const at::Tensor& position_ids,
                                         const PackedSequences& sequences) {
  Qwen2AutocastGuard autocast(tokens.device().type(), precision_);  // the head runs under it too
  return logits_from_hidden(hidden_states(tokens, position_ids, sequences));
}

at::Tensor Qwen2ForCausalLMImpl::forward_rows(const at::Tensor& tokens, const at::Tensor& position_ids,
                                              const PackedSequences& sequences, const at::Tensor& rows) {
  TORCH_CHECK(rows.dim() == 1 && rows.scalar_type() == at::kLong, "Qwen2ForCausalLM: rows must be [R] int64, got ",
              rows.sizes(), " ", rows.scalar_type());
  Qwen2AutocastGuard autocast(tokens.device().type(), precision_);
  return logits_from_hidden(hidden_states(tokens, position_ids, sequences).index_select(0, rows.to(tokens.device())));
}

at::Tensor Qwen2ForCausalLMImpl::hidden_states(const at::Tensor& tokens, const at::Tensor& position_ids,
                                               const PackedSequences& sequences) {
  TORCH_CHECK(tokens.dim() == 1 && tokens.scalar_type() == at::kLong,
              "Qwen2ForCausalLM: tokens must be [T] int64, got ", tokens.sizes(), " ",
              tokens.scalar_type());
  TORCH_CHECK(position_ids.dim() == 1 && position_ids.scalar_type() == at::kLong &&
                  position_ids.size(0) == tokens.size(0),
              "Qwen2ForCausalLM: position_ids must be [T] int64 with T = ", tokens.size(0),
              ", got ", position_ids.sizes(), " ", position_ids.scalar_type());
  sequences.check(tokens.size(0));

  Qwen2AutocastGuard autocast(tokens.device().type(), precision_);
  const auto [cos, sin] =
      qwen2_rotary_tables(position_ids, config_);  // [T, D] each
  at::Tensor h = embed_tokens->forward(tokens);                                 // [T, H]
  for (int64_t i = 0; i < config_.num_hidden_layers; ++i) {
    h = forward_layer(i, h, cos, sin, sequences);
  }
  return h;
}

at::Tensor Qwen2ForCausalLMImpl::forward_layer(int64_t index, const at::Tensor& h,
                                               const at::Tensor& cos, const at::Tensor& sin,
                                               const PackedSequences& sequences) {
  TORCH_CHECK(index >= 0 && index < config_.num_hidden_layers, "Qwen2ForCausalLM: layer ", index,
              " out of range [0, ", config_.num_hidden_layers, ")");
  std::shared_ptr<Qwen2DecoderLayerImpl> layer =
      layers->ptr<Qwen2DecoderLayerImpl>(static_cast<size_t>(index));
  if (activation_checkpointing_ && c10::GradMode::is_enabled()) {
    return qwen2_checkpointed_layer_forward(layer, h, cos, sin, sequences, backend_);
  }
  return layer->forward(h, cos, sin, sequences, *backend_);
}

at::Tensor Qwen2ForCausalLMImpl::head_weight() const {
  return lm_head ? lm_head->weight : embed_tokens->weight;
}

at::Tensor Qwen2ForCausalLMImpl::logits_from_hidden(const at::Tensor& h) {
  return at::linear(norm->forward(h), head_weight()).to(at::kFloat);  // [T, V]
}

at::Tensor Qwen2ForCausalLMImpl::loss_sum(const at::Tensor& tokens, const at::Tensor& position_ids,
                                          const PackedSequences& sequences, const at::Tensor& labels) {
  Qwen2AutocastGuard autocast(tokens.device().type(), precision_);
  const at::Tensor normed = norm->forward(hidden_states(tokens, position_ids, sequences));  // [T, H]
  return head_cross_entropy_sum(normed, head_weight(), labels.to(tokens.device()));
}

at::Tensor Qwen2ForCausalLMImpl::token_losses(const at::Tensor& tokens, const at::Tensor& position_ids,
                                              const PackedSequences& sequences, const at::Tensor& labels) {
  c10::NoGradGuard no_grad;
  Qwen2AutocastGuard autocast(tokens.device().type(), precision_);
  const at::Tensor normed = norm->forward(hidden_states(tokens, position_ids, sequences));  // [T, H]
  return head_token_losses(normed, head_weight(), labels.to(tokens.device()));
}

at::Tensor Qwen2ForCausalLMImpl::forward_cached(const at::Tensor& tokens, Qwen2KVCache& cache, bool last_only) {
  TORCH_CHECK(tokens.dim() == 1 && tokens.scalar_type() == at::kLong && tokens.size(0) > 0,
              "Qwen2ForCausalLM::forward_cached: tokens must be non-empty [n] int64, got ",
              tokens.sizes(), " ", tokens.scalar_type());
  const auto layer_count = static_cast<size_t>(config_.num_hidden_layers);
  if (cache.keys.empty()) {
    cache.keys.resize(layer_count);
    cache.values.resize(layer_count);
  }
  TORCH_CHECK(cache.keys.size() == layer_count && cache.values.size() == layer_count,
              "Qwen2ForCausalLM::forward_cached: cache has ", cache.keys.size(),
              " layers, the model ", layer_count);
  Qwen2AutocastGuard autocast(tokens.device().type(), precision_);
  const int64_t start = cache.length();
  const at::Tensor positions = at::arange(start, start + tokens.size(0), tokens.options());  // [n]
  const auto [cos, sin] = qwen2_rotary_tables(positions, config_);
  at::Tensor h = embed_tokens->forward(tokens);  // [n, H]
  for (size_t i = 0; i < layer_count; ++i) {
    h = layers[i]->as<Qwen2DecoderLayer>()->forward_cached(h, cos, sin, cache.keys[i],
                                                           cache.values[i], *backend_);
  }
  return logits_from_hidden(last_only ? h.narrow(0, h.size(0) - 1, 1) : h);
}

}  // namespace sb
