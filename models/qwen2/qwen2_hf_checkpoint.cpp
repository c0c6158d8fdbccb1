#include "models/qwen2/qwen2_hf_checkpoint.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <set>
#include <sstream>
#include <stdexcept>

#include "models/qwen2/qwen2_checkpoint_folder.h"
#include "models/qwen2/qwen2_hf_config.h"
#include "models/qwen2/qwen2_lora.h"
#include "models/safetensors/safetensors_checkpoint.h"
#include "models/safetensors/safetensors_writer.h"

namespace sb {
namespace {

namespace fs = std::filesystem;

const char* kLmHead = "lm_head.weight";

}  // namespace

std::string qwen2_hf_tensor_name(const std::string& parameter_name) {
  if (parameter_name == kLmHead) return parameter_name;
  return "model." + parameter_name;
}

void qwen2_load_hf_weights(Qwen2ForCausalLM& model, const SafetensorsCheckpoint& checkpoint,
                           const std::function<bool(const std::string&)>& wanted) {
  if (qwen2_has_lora(model)) {
    throw std::logic_error("qwen2_load_hf_weights: load the base weights before adding LoRA adapters");
  }
  const auto parameters = model->named_parameters(/*recurse=*/true);
  std::vector<std::string> expected;
  std::set<std::string> optional;
  for (const auto& item : parameters) {
    const std::string name = qwen2_hf_tensor_name(item.key());
    if (!wanted || wanted(item.key())) {
      expected.push_back(name);
    } else {
      optional.insert(name);
    }
  }
  if (model->config().tie_word_embeddings) optional.insert(kLmHead);
  check_tensor_names(checkpoint, expected, optional);

  c10::NoGradGuard no_grad;
  for (const auto& item : parameters) {
    if (wanted && !wanted(item.key())) continue;
    const std::string name = qwen2_hf_tensor_name(item.key());
    at::Tensor parameter = item.value();
    const at::Tensor stored = checkpoint.tensor(name);
    if (stored.sizes() != parameter.sizes()) {
      std::ostringstream message;
      message << checkpoint.dir().string() << ": tensor " << name << " has shape "
              << stored.sizes() << " but the model (from config.json) needs "
              << parameter.sizes();
      throw std::runtime_error(message.str());
    }
    parameter.copy_(stored.to(parameter.scalar_type()));
  }
}

Qwen2ForCausalLM qwen2_load_hf_model(const fs::path& dir,
                                     std::shared_ptr<AttentionBackend> backend) {
  const Qwen2Config config = qwen2_config_from_hf_file(dir / "config.json");
  Qwen2ForCausalLM model(config, std::move(backend));
  qwen2_load_hf_weights(model, SafetensorsCheckpoint::open(dir));
  return model;
}

void qwen2_save_hf_checkpoint(Qwen2ForCausalLM& model, const fs::path& dir) {
  std::vector<std::pair<std::string, at::Tensor>> tensors;
  for (auto& [name, tensor] : qwen2_merged_named_parameters(model)) {
    tensors.emplace_back(qwen2_hf_tensor_name(name), tensor.to(at::kFloat));
  }
  const std::string config = qwen2_config_to_hf_json(model->config()).dump(2) + "\n";
  write_checkpoint_folder(dir, [&](const fs::path& staging) {
    write_safetensors(staging / "model.safetensors", tensors, {{"format", "pt"}});
    write_checkpoint_text_file(staging / "config.json", config);
  });
}

}  // namespace sb
