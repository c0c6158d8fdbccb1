#include "harness/train/initial_model.h"

#include <ATen/ATen.h>

#include <exception>

#include "common/errors.h"
#include "models/qwen2/qwen2_hf_checkpoint.h"
#include "models/safetensors/safetensors_checkpoint.h"

namespace sb {

Qwen2ForCausalLM initial_model(const Manifest& m, std::shared_ptr<AttentionBackend> backend,
                               const std::function<bool(const std::string&)>& wanted) {
  at::manual_seed(static_cast<uint64_t>(m.seed));
  Qwen2ForCausalLM model(m.model.config, std::move(backend));
  if (!m.model.pretrained()) return model;
  try {
    qwen2_load_hf_weights(model, SafetensorsCheckpoint::open(m.model.from),
                          wanted ? wanted : [](const std::string&) { return true; });
  } catch (const std::exception& e) {  // also c10::Error from a tensor that cannot be copied
    throw ConfigError(m.file, "$.model.from", e.what(), "point model.from at an intact Qwen2/Qwen2.5 checkpoint folder");
  }
  return model;
}

}  // namespace sb
