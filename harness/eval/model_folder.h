#pragma once
// A model folder as users bring it: an HF checkpoint (config.json, safetensors single or
// sharded) and, optionally, its tokenizer.json. Used by `eval nll` and `generate`.

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "models/qwen2/qwen2_model.h"
#include "models/tokenizer/tokenizer.h"

namespace sb {

struct ModelFolder {
  std::filesystem::path dir;
  Qwen2ForCausalLM model{nullptr};
  std::optional<Tokenizer> tokenizer;  // when dir/tokenizer.json exists
  std::vector<int64_t> eos_token_ids;  // config.json's eos_token_id (int or list), if any

  // Token ids of a text; ConfigError (naming `what`) when the folder has no tokenizer.
  std::vector<int64_t> encode(const std::string& text, const std::string& what) const;
};

// Loads the folder with the named attention backend, in eval mode. Problems with the
// folder (missing, not a checkpoint, inconsistent) are ConfigErrors naming it.
ModelFolder load_model_folder(const std::filesystem::path& dir, const std::string& attention);

}  // namespace sb
