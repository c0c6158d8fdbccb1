#pragma once
// Qwen2 architecture hyper-parameters (the fields of an HF config.json that change the
// math) and the named presets. Preset names are exact; an unknown name is an error
// listing the known ones.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace sb {

// YaRN rope scaling (config.json's rope_scaling or rope_parameters of type "yarn"), as
// transformers computes it: the inverse frequencies are blended between the original
// ones and the factor-interpolated ones over a ramp of dimensions that beta_fast and
// beta_slow set, and cos and sin are scaled by attention_factor. Qwen2.5 documents
// factor 4 over 32,768 original positions for inputs longer than 32K.
struct Qwen2YarnScaling {
  double factor = 1.0;
  int64_t original_max_position_embeddings = 0;
  double beta_fast = 32.0;
  double beta_slow = 1.0;
  double attention_factor = 1.0;  // resolved when read: 0.1 ln(factor) + 1 unless given
  bool truncate = true;           // the ramp's ends rounded outward to whole dimensions
};

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
  std::optional<Qwen2YarnScaling> yarn;  // absent: plain RoPE

  // Throws std::invalid_argument describing the first inconsistent field.
  void validate() const;
};

// The longest sequence the model's positions cover: max_position_embeddings, or with
// YaRN factor x original_max_position_embeddings when that is more (Qwen2.5's
// config.json keeps 32,768 there and YaRN factor 4 extends it to 131,072).
int64_t qwen2_position_limit(const Qwen2Config& config);

// Real models: qwen2.5-0.5b, qwen2.5-1.5b, qwen2.5-3b, qwen2.5-7b.
// Small CPU presets: qwen2-tiny (quickstart), qwen2-test (unit tests).
const Qwen2Config& qwen2_preset(const std::string& name);
std::vector<std::string> qwen2_preset_names();

// Number of parameters of the model built from this config (tied lm_head counted once).
int64_t qwen2_parameter_count(const Qwen2Config& config);

// The architecture one of tp tensor-parallel ranks computes (Megatron's split, see
// harness/parallel/tensor_parallel/tensor_parallel_sharding.h): Hq / tp query and Hkv / tp
// key/value heads, intermediate_size / tp, the widest vocabulary shard ceil(V / tp); hidden
// size, layers and the rest unchanged. Throws std::invalid_argument when tp does not
// divide the key/value heads and the intermediate size. tp 1: the config itself.
Qwen2Config qwen2_tensor_parallel_rank_config(const Qwen2Config& config, int64_t tp);

}  // namespace sb
