#include "harness/parallel/pipeline/pipeline_stage.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <c10/util/Exception.h>

#include <stdexcept>

#include "harness/data/packed_microbatch.h"
#include "harness/parallel/tensor_parallel/tensor_parallel_sharding.h"
#include "models/qwen2/qwen2_checkpointing.h"
#include "models/qwen2/qwen2_lora.h"

namespace sb {
namespace {

bool starts_with(const std::string& text, const std::string& prefix) {
  return text.compare(0, prefix.size(), prefix) == 0;
}

// Whether the stage holds `name` as its own parameter (the tied copy aside).
bool stage_holds_parameter(const std::string& name, int64_t stage, int64_t stages, StageLayers layers) {
  if (starts_with(name, "embed_tokens.")) return stage == 0;
  if (starts_with(name, "norm.") || starts_with(name, "lm_head.")) return stage == stages - 1;
  if (!starts_with(name, "layers.")) return false;
  const size_t dot = name.find('.', 7);
  const int64_t layer = std::stoll(name.substr(7, dot - 7));
  return layer >= layers.first && layer < layers.end;
}

}  // namespace

bool stage_uses_parameter(const std::string& name, int64_t stage, int64_t stages, StageLayers layers,
                          bool tied_head) {
  if (tied_head && stage == stages - 1 && name == "embed_tokens.weight") return true;
  return stage_holds_parameter(name, stage, stages, layers);
}

PipelineStage::PipelineStage(const Qwen2Config& config, int64_t stage, int64_t stages, StageLayers layers,
                             std::shared_ptr<AttentionBackend> backend, c10::Device device)
    : PipelineStage(Qwen2ForCausalLM(config, backend), stage, stages, layers, backend) {
  move_to(device);  // built on the CPU; only this stage's parts move
}

void PipelineStage::move_to(c10::Device device) {
  if (device == device_) return;
  c10::NoGradGuard no_grad;
  for (const StageParameter& p : parameters_) {
    at::Tensor t = p.tensor;
    t.set_data(t.to(device));
  }
  device_ = device;
}

PipelineStage::PipelineStage(Qwen2ForCausalLM model, int64_t stage, int64_t stages, StageLayers layers,
                             std::shared_ptr<AttentionBackend> backend)
    : config_(model->config()),
      stage_(stage),
      stages_(stages),
      layers_(layers),
      backend_(std::move(backend)),
      device_(model->embed_tokens->weight.device()) {
  TORCH_CHECK(backend_ != nullptr, "PipelineStage: attention backend must not be null");
  if (stages < 1 || stage < 0 || stage >= stages || layers.first < 0 || layers.end <= layers.first ||
      layers.end > config_.num_hidden_layers) {
    throw std::invalid_argument("PipelineStage: stage " + std::to_string(stage) + " of " +
                                std::to_string(stages) + " with layers [" + std::to_string(layers.first) +
                                ", " + std::to_string(layers.end) + ") does not fit a model of " +
                                std::to_string(config_.num_hidden_layers) + " layers");
  }
  keep_parts(model);
}

void PipelineStage::keep_parts(Qwen2ForCausalLM& model) {
  precision_ = model->precision();
  activation_checkpointing_ = model->activation_checkpointing();
  if (is_first()) embed_tokens_ = model->embed_tokens;
  for (int64_t i = layers_.first; i < layers_.end; ++i) {
    decoder_layers_.emplace_back(model->layers->ptr<Qwen2DecoderLayerImpl>(static_cast<size_t>(i)));
  }
  if (is_last()) {
    norm_ = model->norm;
    if (model->lm_head) {
      lm_head_ = model->lm_head;
    } else {
      tied_head_weight_ = model->embed_tokens->weight;
    }
  }
  // Parameters in the model's order, filtered to what this stage holds.
  for (const auto& item : model->named_parameters(/*recurse=*/true)) {
    if (stage_holds_parameter(item.key(), stage_, stages_, layers_)) {
      parameters_.push_back({item.key(), item.value(), false});
    }
  }
  if (is_last() && tied_head_weight_.defined() && !is_first()) {
    parameters_.push_back({"embed_tokens.weight", tied_head_weight_, true});
  }
}

std::vector<std::pair<std::string, at::Tensor>> PipelineStage::merged_weights() const {
  std::vector<std::pair<std::string, at::Tensor>> parameters;
  for (const StageParameter& p : parameters_) {
    if (!p.tied_copy) parameters.emplace_back(p.name, p.tensor);
  }
  Qwen2NamedModules modules;  // only decoder layers carry adapters
  for (size_t i = 0; i < decoder_layers_.size(); ++i) {
    const std::string prefix = "layers." + std::to_string(layers_.first + static_cast<int64_t>(i));
    for (const auto& item : decoder_layers_[i]->named_modules(prefix, /*include_self=*/false)) {
      modules.emplace_back(item.key(), item.value());
    }
  }
  return qwen2_fold_adapters(parameters, modules);
}

void PipelineStage::enable_tensor_parallelism(std::shared_ptr<TensorParallelGroup> group) {
  if (tp_group_) throw std::logic_error("PipelineStage: tensor parallelism is already on");
  if (!group || group->size() == 1) return;
  const int64_t tp = group->size(), rank = group->rank();
  qwen2_tensor_parallel_rank_config(config_, tp);  // throws when tp does not divide the model
  c10::NoGradGuard no_grad;
  for (StageParameter& p : parameters_) {
    p.tp_split_dim = tensor_parallel_split_dim(p.name);
    if (p.tp_split_dim >= 0) p.tensor.set_data(tensor_parallel_shard(p.name, p.tensor, tp, rank));
  }
  tp_group_ = std::move(group);
  sequence_parallel_ = std::make_shared<C10dSequenceParallel>(tp_group_);
  for (auto& layer : decoder_layers_) {
    layer->set_sequence_parallel(sequence_parallel_);
    // Row-parallel projections: LoRA dropout keeps this rank's columns of the whole mask.
    layer->self_attn->o_proj->set_input_shard(rank, tp);
    layer->mlp->down_proj->set_input_shard(rank, tp);
  }
  vocab_ = split_range(config_.vocab_size, tp, rank);
}

int64_t PipelineStage::activation_rows(int64_t tokens) const {
  return sequence_parallel_ ? sequence_parallel_->local_rows(tokens) : tokens;
}

at::Tensor PipelineStage::head_weight() const {
  return lm_head_ ? lm_head_->weight : tied_head_weight_;
}

HeadLossOptions PipelineStage::head_loss_options() const {
  HeadLossOptions options;
  if (!tp_group_) return options;
  options.vocabulary_start = vocab_.start;
  options.reduce = [group = tp_group_](at::Tensor& values, bool maximum) {
    group->all_reduce(values, maximum ? c10d::ReduceOp::MAX : c10d::ReduceOp::SUM);
  };
  return options;
}

at::Tensor PipelineStage::cross_entropy_sum(const at::Tensor& head_input, const at::Tensor& labels) {
  if (!is_last()) throw std::logic_error("PipelineStage: only the last stage computes the loss");
  Qwen2AutocastGuard autocast(device_.type(), precision_);
  return head_cross_entropy_sum(head_input, head_weight(), labels, head_loss_options());
}

at::Tensor PipelineStage::logits(const at::Tensor& head_input) {
  if (!is_last()) throw std::logic_error("PipelineStage: only the last stage holds the head");
  Qwen2AutocastGuard autocast(device_.type(), precision_);
  return at::linear(head_input, head_weight()).to(at::kFloat);
}

at::Tensor PipelineStage::full_tensor(const std::string& name, const at::Tensor& shard) const {
  const int64_t dim = tensor_parallel_split_dim(name);
  if (!tp_group_ || dim < 0) return shard;
  const int64_t tp = tp_group_->size();
  const bool vocabulary = name == "embed_tokens.weight" || name == "lm_head.weight";
  const int64_t full = vocabulary ? config_.vocab_size : shard.size(dim) * tp;
  // The split dimension first; shards of an uneven split (sizes floor or ceil of full /
  // tp) padded to the widest for the gather and cut back after it.
  const int64_t widest = (full + tp - 1) / tp;
  // n_r rows, 0 < n_r <= widest: padded to the one multiple of widest above them.
  const at::Tensor rows = pad_rows_to_multiple(shard.detach().transpose(0, dim).contiguous(), widest);
  const at::Tensor gathered = tp_group_->all_gather_rows(rows);  // [tp * widest, ...]
  std::vector<at::Tensor> parts;
  for (int64_t r = 0; r < tp; ++r) parts.push_back(gathered.narrow(0, r * widest, split_range(full, tp, r).size()));
  return at::cat(parts, 0).transpose(0, dim).contiguous();
}

void PipelineStage::set_training(bool training) {
  if (embed_tokens_) embed_tokens_->train(training);
  for (auto& layer : decoder_layers_) layer->train(training);
  if (norm_) norm_->train(training);
  if (lm_head_) lm_head_->train(training);
}

at::Tensor PipelineStage::forward(const at::Tensor& input, const at::Tensor& position_ids,
                                  const PackedSequences& sequences) {
  const int64_t tokens = position_ids.size(0);
  sequences.check(tokens);
  Qwen2AutocastGuard autocast(device_.type(), precision_);
  at::Tensor h;
  if (is_first()) {
    TORCH_CHECK(input.dim() == 1 && input.scalar_type() == at::kLong && input.size(0) == tokens,
                "PipelineStage: the first stage takes tokens [T] int64 with T = ", tokens, ", got ", input.sizes());
    h = sequence_parallel_ ? sequence_parallel_->scatter(vocab_parallel_embedding(input, embed_tokens_->weight, vocab_))
                           : embed_tokens_->forward(input);  // [R, H]
  } else {
    TORCH_CHECK(input.dim() == 2 && input.size(0) == activation_rows(tokens) && input.size(1) == config_.hidden_size,
                "PipelineStage: stage ", stage_, " takes hidden states [", activation_rows(tokens), ", ",
                config_.hidden_size, "], got ", input.sizes());
    h = input;
  }
  const auto [cos, sin] = qwen2_rotary_tables(position_ids, config_);  // [T, D]
  const bool checkpoint = activation_checkpointing_ && c10::GradMode::is_enabled();
  for (auto& layer : decoder_layers_) {
    h = checkpoint ? qwen2_checkpointed_layer_forward(layer.ptr(), h, cos, sin, sequences, backend_)
                   : layer->forward(h, cos, sin, sequences, *backend_);
  }
  if (!is_last()) return h;
  at::Tensor normed = norm_->forward(h);                                       // [R, H]
  if (sequence_parallel_) normed = sequence_parallel_->gather(normed, tokens);  // [T, H]
  return normed;
}

}  // namespace sb
