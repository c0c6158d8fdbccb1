#pragma once
// A model folder as users bring it: an HF checkpoint (config.json, safetensors single or
// sharded) and, optionally, its tokenizer.json. Used by `eval nll` and `generate`.

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "kernels/attention/patterns/attention_pattern.h"
#include "models/qwen2/qwen2_model.h"
#include "models/tokenizer/tokenizer.h"

namespace sb {

struct ModelFolder {
  std::filesystem::path dir;
  Qwen2ForCausalLM model{nullptr};
  std::optional<Tokenizer> tokenizer;  // when dir/tokenizer.json exists
  std::vector<int64_t> eos_token_ids;  // config.json's eos_token_id (int or list), if any
  // What transformers' generate() stops on: generation_config.json's eos_token_id when
  // that file exists and has one, else config.json's.
  std::vector<int64_t> generation_eos_token_ids;
  // tokenizer_config.json's eos_token (a string or {"content": ...}) as an id, if any:
  // upstream LongBench's samsum stop uses tokenizer.eos_token_id.
  std::optional<int64_t> tokenizer_eos_token_id;

  // Token ids of a text; ConfigError (naming `what`) when the folder has no tokenizer.
  std::vector<int64_t> encode(const std::string& text, const std::string& what) const;
};

// Loads the folder with the attention pattern's backend, in eval mode. Problems with the
// folder (missing, not a checkpoint, inconsistent) are ConfigErrors naming it.
ModelFolder load_model_folder(const std::filesystem::path& dir, const AttentionOptions& attention);

// Moves the model to `device` ("cpu", "cuda", "cuda:N") and `dtype` ("float32",
// "bfloat16"); ConfigError naming --device / --dtype for values it does not know.
void place_model(ModelFolder& folder, const std::string& device, const std::string& dtype);

}  // namespace sb
