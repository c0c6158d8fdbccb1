#include "models/qwen2/qwen2_lora.h"

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>
#include <set>
#include <stdexcept>

#include "models/qwen2/qwen2_checkpoint_folder.h"
#include "models/qwen2/qwen2_hf_checkpoint.h"
#include "models/safetensors/safetensors_writer.h"

namespace sb {
namespace {

std::string joined_module_names() {
  std::string out;
  for (const auto& name : qwen2_lora_module_names()) out += (out.empty() ? "" : ", ") + name;
  return out;
}

// The projection `name` (one of qwen2_lora_module_names()) of a decoder layer.
Qwen2Linear& layer_projection(Qwen2DecoderLayerImpl& layer, const std::string& name) {
  Qwen2AttentionImpl& attn = *layer.self_attn;
  Qwen2MLPImpl& mlp = *layer.mlp;
  if (name == "q_proj") return attn.q_proj;
  if (name == "k_proj") return attn.k_proj;
  if (name == "v_proj") return attn.v_proj;
  if (name == "o_proj") return attn.o_proj;
  if (name == "gate_proj") return mlp.gate_proj;
  if (name == "up_proj") return mlp.up_proj;
  if (name == "down_proj") return mlp.down_proj;
  throw std::logic_error("layer_projection: \"" + name + "\" is not a LoRA module name");
}

std::vector<std::shared_ptr<Qwen2DecoderLayerImpl>> decoder_layers(Qwen2ForCausalLM& model) {
  std::vector<std::shared_ptr<Qwen2DecoderLayerImpl>> out;
  for (size_t i = 0; i < model->layers->size(); ++i) {
    out.push_back(model->layers->ptr<Qwen2DecoderLayerImpl>(i));
  }
  return out;
}

}  // namespace

const std::vector<std::string>& qwen2_lora_module_names() {
  static const std::vector<std::string> names = {"q_proj",    "k_proj",  "v_proj",   "o_proj",
                                                 "gate_proj", "up_proj", "down_proj"};
  return names;
}

void qwen2_validate_lora_options(const Qwen2LoraOptions& options) {
  if (options.rank <= 0) {
    throw std::invalid_argument("LoRA rank must be >= 1, got " + std::to_string(options.rank));
  }
  if (!(options.alpha > 0)) {
    throw std::invalid_argument("LoRA alpha must be > 0, got " + std::to_string(options.alpha));
  }
  if (!(options.dropout >= 0 && options.dropout < 1)) {
    throw std::invalid_argument("LoRA dropout must be in [0, 1), got " +
                                std::to_string(options.dropout));
  }
  if (options.target_modules.empty()) {
    throw std::invalid_argument("LoRA target_modules is empty; name some of: " +
                                joined_module_names());
  }
  std::set<std::string> seen;
  const auto& known = qwen2_lora_module_names();
  for (const auto& name : options.target_modules) {
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      throw std::invalid_argument("unknown LoRA target module \"" + name + "\"; known: " +
                                  joined_module_names());
    }
    if (!seen.insert(name).second) {
      throw std::invalid_argument("LoRA target module \"" + name + "\" is listed twice");
    }
  }
}

std::vector<at::Tensor> qwen2_apply_lora(Qwen2ForCausalLM& model, const Qwen2LoraOptions& options) {
  qwen2_validate_lora_options(options);
  if (qwen2_has_lora(model)) throw std::logic_error("qwen2_apply_lora: the model already has adapters");
  for (at::Tensor& p : model->parameters()) p.set_requires_grad(false);
  std::vector<at::Tensor> adapters;
  for (const auto& layer : decoder_layers(model)) {
    for (const auto& name : qwen2_lora_module_names()) {
      const auto& targets = options.target_modules;
      if (std::find(targets.begin(), targets.end(), name) == targets.end()) continue;
      Qwen2Linear& projection = layer_projection(*layer, name);
      projection->add_lora(options.rank, options.alpha, options.dropout);
      adapters.push_back(projection->lora_A->weight);
      adapters.push_back(projection->lora_B->weight);
    }
  }
  return adapters;
}

bool qwen2_has_lora(Qwen2ForCausalLM& model) {
  for (const auto& module : model->modules(/*include_self=*/false)) {
    if (const auto* projection = module->as<Qwen2Linear>(); projection && projection->has_lora()) {
      return true;
    }
  }
  return false;
}

Qwen2LoraOptions qwen2_lora_options_of(Qwen2ForCausalLM& model) {
  Qwen2LoraOptions options;
  for (const auto& layer : decoder_layers(model)) {
    for (const auto& name : qwen2_lora_module_names()) {
      const Qwen2Linear& projection = layer_projection(*layer, name);
      if (!projection->has_lora()) continue;
      if (std::find(options.target_modules.begin(), options.target_modules.end(), name) ==
          options.target_modules.end()) {
        options.target_modules.push_back(name);
      }
      options.rank = projection->lora_rank();
      options.alpha = projection->lora_alpha();
      options.dropout = projection->lora_dropout();
    }
  }
  if (options.target_modules.empty()) {
    throw std::logic_error("qwen2_lora_options_of: the model has no LoRA adapters");
  }
  return options;
}

std::vector<std::pair<std::string, at::Tensor>> qwen2_fold_adapters(
    const std::vector<std::pair<std::string, at::Tensor>>& parameters, const Qwen2NamedModules& modules) {
  std::map<std::string, const Qwen2LinearImpl*> adapted;  // module path -> projection with an adapter
  for (const auto& [path, module] : modules) {
    if (const auto* projection = module->as<Qwen2Linear>(); projection && projection->has_lora()) {
      adapted.emplace(path, projection);
    }
  }
  const std::string suffix = ".weight";
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (const auto& [name, tensor] : parameters) {
    if (qwen2_is_lora_parameter(name)) continue;
    const bool is_weight =
        name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
    const auto it = is_weight ? adapted.find(name.substr(0, name.size() - suffix.size())) : adapted.end();
    out.emplace_back(name, it != adapted.end() ? it->second->merged_weight() : tensor.detach());
  }
  return out;
}

std::vector<std::pair<std::string, at::Tensor>> qwen2_merged_named_parameters(Qwen2ForCausalLM& model) {
  std::vector<std::pair<std::string, at::Tensor>> parameters;
  for (const auto& item : model->named_parameters(/*recurse=*/true)) parameters.emplace_back(item.key(), item.value());
  Qwen2NamedModules modules;
  for (const auto& item : model->named_modules(/*name_prefix=*/"", /*include_self=*/false)) {
    modules.emplace_back(item.key(), item.value());
  }
  return qwen2_fold_adapters(parameters, modules);
}

bool qwen2_is_lora_parameter(const std::string& parameter_name) {
  return parameter_name.find(".lora_A.") != std::string::npos || parameter_name.find(".lora_B.") != std::string::npos;
}

nlohmann::json qwen2_peft_adapter_config(const Qwen2LoraOptions& options, const std::string& base_model_name_or_path) {
  // The fields PEFT writes for a plain LoRA adapter (no DoRA, rsLoRA, biases, or
  // extra trained modules); PEFT fills any field it misses with its default.
  return {
      {"peft_type", "LORA"},
      {"task_type", "CAUSAL_LM"},
      {"base_model_name_or_path", base_model_name_or_path},
      {"r", options.rank},
      {"lora_alpha", options.alpha},
      {"lora_dropout", options.dropout},
      {"target_modules", options.target_modules},
      {"bias", "none"},
      {"fan_in_fan_out", false},
      {"inference_mode", true},
      {"init_lora_weights", true},
      {"use_rslora", false},
      {"use_dora", false},
      {"modules_to_save", nullptr},
      {"layers_to_transform", nullptr},
      {"layers_pattern", nullptr},
      {"rank_pattern", nlohmann::json::object()},
      {"alpha_pattern", nlohmann::json::object()},
      {"revision", nullptr},
  };
}

std::string qwen2_peft_tensor_name(const std::string& parameter_name) {
  return "base_model.model." + qwen2_hf_tensor_name(parameter_name);
}

void qwen2_save_lora_adapter(Qwen2ForCausalLM& model, const std::filesystem::path& dir,
                             const std::string& base_model_name_or_path) {
  const Qwen2LoraOptions options = qwen2_lora_options_of(model);
  std::vector<std::pair<std::string, at::Tensor>> tensors;
  for (const auto& item : model->named_parameters(/*recurse=*/true)) {
    const std::string& name = item.key();
    if (!qwen2_is_lora_parameter(name)) continue;
    tensors.emplace_back(qwen2_peft_tensor_name(name), item.value().detach().to(at::kFloat));
  }
  const nlohmann::json config = qwen2_peft_adapter_config(options, base_model_name_or_path);
  write_checkpoint_folder(dir, [&](const std::filesystem::path& staging) {
    write_safetensors(staging / "adapter_model.safetensors", tensors, {{"format", "pt"}});
    write_checkpoint_text_file(staging / "adapter_config.json", config.dump(2) + "\n");
  });
}

}  // namespace sb
