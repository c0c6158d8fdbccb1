#pragma once
// LoRA fine-tuning of a Qwen2 model (PEFT's LoRA, bias "none"): adapters on chosen
// projections of every decoder layer, every other parameter frozen. Saving gives
// - the merged model in HF layout (qwen2_save_hf_checkpoint folds W + scale * B A in),
//   which transformers loads as a plain Qwen2 checkpoint;
// - the adapter alone in PEFT's layout: adapter_model.safetensors with PEFT's tensor
//   names ("base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight") and
//   adapter_config.json (peft_type LORA, r, lora_alpha, lora_dropout, target_modules).

#include <ATen/core/Tensor.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "models/qwen2/qwen2_model.h"

namespace sb {

struct Qwen2LoraOptions {
  int64_t rank = 0;      // r
  double alpha = 0.0;    // lora_alpha; the adapter's output is scaled by alpha / rank
  double dropout = 0.0;  // on the adapter's input, training only
  std::vector<std::string> target_modules;  // names from qwen2_lora_module_names()
};

// The projections LoRA may target, in layer order: q_proj k_proj v_proj o_proj
// gate_proj up_proj down_proj.
const std::vector<std::string>& qwen2_lora_module_names();

// Throws std::invalid_argument naming the first bad field (rank <= 0, alpha <= 0,
// dropout outside [0, 1), empty, repeated or unknown target modules, listing the known).
void qwen2_validate_lora_options(const Qwen2LoraOptions& options);

// Adds an adapter to every target projection of every layer (A kaiming-uniform, B zero,
// so the model's outputs are unchanged) and freezes every other parameter. Returns the
// adapter parameters (per layer, per module in qwen2_lora_module_names() order: A, B),
// the only ones left trainable. Draws A from the global generator.
std::vector<at::Tensor> qwen2_apply_lora(Qwen2ForCausalLM& model, const Qwen2LoraOptions& options);

bool qwen2_has_lora(Qwen2ForCausalLM& model);

// The options the adapters were built with (target modules in canonical order).
// Throws std::logic_error for a model without adapters.
Qwen2LoraOptions qwen2_lora_options_of(Qwen2ForCausalLM& model);

// Module-path parameters as a plain Qwen2 model holds them: adapter parameters left out,
// the weight of each projection that carries an adapter replaced by its merged weight
// (W + alpha / r * B A); the rest detached. `modules` (module paths, as
// named_modules() names them) are searched for the adapted projections. What
// qwen2_merged_named_parameters does for a whole model and a pipeline stage does for its part.
using Qwen2NamedModules = std::vector<std::pair<std::string, std::shared_ptr<torch::nn::Module>>>;
std::vector<std::pair<std::string, at::Tensor>> qwen2_fold_adapters(
    const std::vector<std::pair<std::string, at::Tensor>>& parameters, const Qwen2NamedModules& modules);

// Every base parameter under its module path (as named_parameters() names it), with
// the adapters folded into their projection's weight; adapter parameters left out.
// Without adapters: named_parameters(), detached.
std::vector<std::pair<std::string, at::Tensor>> qwen2_merged_named_parameters(
    Qwen2ForCausalLM& model);

// Whether a module-path parameter name is an adapter's ("...q_proj.lora_A.weight").
bool qwen2_is_lora_parameter(const std::string& parameter_name);

// adapter_config.json as PEFT writes it for a plain LoRA adapter of these options.
nlohmann::json qwen2_peft_adapter_config(const Qwen2LoraOptions& options, const std::string& base_model_name_or_path);

// PEFT's saved name of an adapter parameter:
// "layers.0.self_attn.q_proj.lora_A.weight" ->
// "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight".
std::string qwen2_peft_tensor_name(const std::string& parameter_name);

// Writes adapter_model.safetensors (float32) and adapter_config.json into `dir`, which
// must not exist; atomically (see qwen2_checkpoint_folder.h). base_model_name_or_path
// goes into the config as PEFT records it (may be empty).
void qwen2_save_lora_adapter(Qwen2ForCausalLM& model, const std::filesystem::path& dir,
                             const std::string& base_model_name_or_path);

}  // namespace sb
