#pragma once
// Qwen2 architecture hyper-parameters (the fields of an HF config.json that change the
// math) and the named presets. Preset names are exact; an unknown name is an error
// listing the known ones.

#include <cstdint>
#include <string>
#include <vector>

namespace sb {

struct Qwen2Config {
  std::string name;
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;
  int64_t head_dim = 0;
  int64_t max_position_embeddings = 0;
  double rope_theta = 1000000.0;
  double rms_norm_eps = 1e-6;
  double initializer_range = 0.02;
  bool tie_word_embeddings = true;

  // Throws std::invalid_argument describing the first inconsistent field.
  void validate() const;
};

// Real models: qwen2.5-0.5b, qwen2.5-1.5b, qwen2.5-3b, qwen2.5-7b.
// Small CPU presets: qwen2-tiny (quickstart), qwen2-test (unit tests).
const Qwen2Config& qwen2_preset(const std::string& name);
std::vector<std::string> qwen2_preset_names();

// Number of parameters of the model built from this config (tied lm_head counted once).
int64_t qwen2_parameter_count(const Qwen2Config& config);

}  // namespace sb
