#pragma once
// Qwen2Config <-> HF config.json. Reading accepts what transformers writes for Qwen2
// (model_type "qwen2"): rope_theta at the top level (Qwen2.5 checkpoints) or inside
// rope_parameters (transformers >= 5); rope scaling of type "yarn" in rope_scaling or
// rope_parameters (qwen2_config.h). Fields that would change the math in ways this model
// does not implement (other activations, other rope scaling, sliding windows) are errors
// naming the file and the key, never silently ignored. Other keys (dtype, token ids,
// generation settings) do not affect the architecture and are skipped.

#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>

#include "models/qwen2/qwen2_config.h"

namespace sb {

// file: shown in errors. Throws std::invalid_argument.
Qwen2Config qwen2_config_from_hf_json(const nlohmann::json& json, const std::string& file);
Qwen2Config qwen2_config_from_hf_file(const std::filesystem::path& config_json);

// The config.json transformers needs to load a checkpoint of this config.
nlohmann::json qwen2_config_to_hf_json(const Qwen2Config& config);

}  // namespace sb
