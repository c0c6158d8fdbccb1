#include "models/qwen2/qwen2_config.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace sb {
namespace {

// Numbers of the real models from their public config.json files; fields not set
// here keep the header's defaults (rope_theta 1e6, rms_norm_eps 1e-6,
// initializer_range 0.02), which all Qwen2.5 sizes share.
std::vector<Qwen2Config> qwen2_make_presets() {
  std::vector<Qwen2Config> presets;
  Qwen2Config c;

  c = Qwen2Config{};
  c.name = "qwen2.5-0.5b";
  c.vocab_size = 151936;
  c.hidden_size = 896;
  c.intermediate_size = 4864;
  c.num_hidden_layers = 24;
  c.num_attention_heads = 14;
  c.num_key_value_heads = 2;
  c.head_dim = 64;
  c.max_position_embeddings = 32768;
  c.tie_word_embeddings = true;
  presets.push_back(c);

  c = Qwen2Config{};
  c.name = "qwen2.5-1.5b";
  c.vocab_size = 151936;
  c.hidden_size = 1536;
  c.intermediate_size = 8960;
  c.num_hidden_layers = 28;
  c.num_attention_heads = 12;
  c.num_key_value_heads = 2;
  c.head_dim = 128;
  c.max_position_embeddings = 131072;
  c.tie_word_embeddings = true;
  presets.push_back(c);

  c = Qwen2Config{};
  c.name = "qwen2.5-3b";
  c.vocab_size = 151936;
  c.hidden_size = 2048;
  c.intermediate_size = 11008;
  c.num_hidden_layers = 36;
  c.num_attention_heads = 16;
  c.num_key_value_heads = 2;
  c.head_dim = 128;
  c.max_position_embeddings = 32768;
  c.tie_word_embeddings = true;
  presets.push_back(c);

  c = Qwen2Config{};
  c.name = "qwen2.5-7b";
  c.vocab_size = 152064;
  c.hidden_size = 3584;
  c.intermediate_size = 18944;
  c.num_hidden_layers = 28;
  c.num_attention_heads = 28;
  c.num_key_value_heads = 4;
  c.head_dim = 128;
  c.max_position_embeddings = 131072;
  c.tie_word_embeddings = false;
  presets.push_back(c);

  // Quickstart model: trains in seconds on a laptop CPU.
  c = Qwen2Config{};
  c.name = "qwen2-tiny";
  c.vocab_size = 256;
  c.hidden_size = 128;
  c.intermediate_size = 384;
  c.num_hidden_layers = 4;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 32;
  c.max_position_embeddings = 4096;
  c.tie_word_embeddings = true;
  presets.push_back(c);

  // Unit-test model; untied so that the tests exercise the separate lm_head path.
  c = Qwen2Config{};
  c.name = "qwen2-test";
  c.vocab_size = 128;
  c.hidden_size = 32;
  c.intermediate_size = 64;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 8;
  c.max_position_embeddings = 1024;
  c.tie_word_embeddings = false;
  presets.push_back(c);

  // Tensor-parallel test model: 4 key/value heads (GQA 8:4, so tp 2 and 4 divide them),
  // a vocabulary of 125 that no tp > 1 divides (uneven vocabulary shards), tied head.
  c = Qwen2Config{};
  c.name = "qwen2-test-kv4";
  c.vocab_size = 125;
  c.hidden_size = 32;
  c.intermediate_size = 64;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 8;
  c.num_key_value_heads = 4;
  c.head_dim = 8;
  c.max_position_embeddings = 1024;
  c.tie_word_embeddings = true;
  presets.push_back(c);

  return presets;
}

const std::vector<Qwen2Config>& qwen2_presets() {
  static const std::vector<Qwen2Config> presets = qwen2_make_presets();
  return presets;
}

void qwen2_require(bool ok, const Qwen2Config& config, const std::string& what) {
  if (!ok) {
    throw std::invalid_argument("Qwen2Config \"" + config.name + "\": " + what);
  }
}

}  // namespace

void Qwen2Config::validate() const {
  qwen2_require(!name.empty(), *this, "name must not be empty");
  qwen2_require(vocab_size > 0, *this,
                "vocab_size must be positive, got " + std::to_string(vocab_size));
  qwen2_require(hidden_size > 0, *this,
                "hidden_size must be positive, got " + std::to_string(hidden_size));
  qwen2_require(intermediate_size > 0, *this,
                "intermediate_size must be positive, got " + std::to_string(intermediate_size));
  qwen2_require(num_hidden_layers > 0, *this,
                "num_hidden_layers must be positive, got " + std::to_string(num_hidden_layers));
  qwen2_require(num_attention_heads > 0, *this,
                "num_attention_heads must be positive, got " + std::to_string(num_attention_heads));
  qwen2_require(num_key_value_heads > 0, *this,
                "num_key_value_heads must be positive, got " + std::to_string(num_key_value_heads));
  qwen2_require(num_attention_heads % num_key_value_heads == 0, *this,
                "num_attention_heads (" + std::to_string(num_attention_heads) +
                    ") must be a multiple of num_key_value_heads (" +
                    std::to_string(num_key_value_heads) + ")");
  // Rotate-half pairs dimension i with i + head_dim / 2.
  qwen2_require(head_dim > 0 && head_dim % 2 == 0, *this,
                "head_dim must be positive and even, got " + std::to_string(head_dim));
  qwen2_require(
      max_position_embeddings > 0, *this,
      "max_position_embeddings must be positive, got " + std::to_string(max_position_embeddings));
  qwen2_require(std::isfinite(rope_theta) && rope_theta > 0.0, *this,
                "rope_theta must be positive, got " + std::to_string(rope_theta));
  if (yarn) {
    qwen2_require(std::isfinite(yarn->factor) && yarn->factor > 0.0, *this,
                  "rope_scaling factor must be positive, got " + std::to_string(yarn->factor));
    qwen2_require(yarn->original_max_position_embeddings > 0, *this,
                  "rope_scaling original_max_position_embeddings must be positive, got " +
                      std::to_string(yarn->original_max_position_embeddings));
    qwen2_require(std::isfinite(yarn->attention_factor) && yarn->attention_factor > 0.0, *this,
                  "rope_scaling attention_factor must be positive, got " + std::to_string(yarn->attention_factor));
    qwen2_require(std::isfinite(yarn->beta_fast) && std::isfinite(yarn->beta_slow) && yarn->beta_fast > 0.0 &&
                      yarn->beta_slow > 0.0,
                  *this, "rope_scaling beta_fast and beta_slow must be positive");
  }
  qwen2_require(std::isfinite(rms_norm_eps) && rms_norm_eps > 0.0, *this,
                "rms_norm_eps must be positive, got " + std::to_string(rms_norm_eps));
  qwen2_require(std::isfinite(initializer_range) && initializer_range >= 0.0, *this,
                "initializer_range must be >= 0, got " + std::to_string(initializer_range));
}

int64_t qwen2_position_limit(const Qwen2Config& config) {
  if (!config.yarn) return config.max_position_embeddings;
  const auto extended = static_cast<int64_t>(config.yarn->factor * static_cast<double>(config.yarn->original_max_position_embeddings));
  return std::max(config.max_position_embeddings, extended);
}

const Qwen2Config& qwen2_preset(const std::string& name) {
  for (const Qwen2Config& config : qwen2_presets()) {
    if (config.name == name) return config;
  }
  std::string known;
  for (const std::string& n : qwen2_preset_names()) known += (known.empty() ? "" : ", ") + n;
  throw std::invalid_argument("unknown Qwen2 preset \"" + name + "\"; known presets: " + known);
}

std::vector<std::string> qwen2_preset_names() {
  std::vector<std::string> names;
  for (const Qwen2Config& config : qwen2_presets()) names.push_back(config.name);
  return names;
}

int64_t qwen2_parameter_count(const Qwen2Config& config) {
  const int64_t h = config.hidden_size;
  const int64_t q_width = config.num_attention_heads * config.head_dim;
  const int64_t kv_width = config.num_key_value_heads * config.head_dim;
  const int64_t attention = (h * q_width + q_width)          // q_proj weight + bias
                            + 2 * (h * kv_width + kv_width)  // k_proj, v_proj weight + bias
                            + q_width * h;                   // o_proj, no bias
  const int64_t mlp = 3 * h * config.intermediate_size;      // gate, up, down
  const int64_t norms = 2 * h;                               // input, post-attention
  const int64_t embedding = config.vocab_size * h;
  const int64_t lm_head = config.tie_word_embeddings ? 0 : config.vocab_size * h;
  return embedding + config.num_hidden_layers * (attention + mlp + norms) + h /* final norm */ +
         lm_head;
}

Qwen2Config qwen2_tensor_parallel_rank_config(const Qwen2Config& config, int64_t tp) {
  if (tp < 1 || config.num_key_value_heads % tp != 0 || config.intermediate_size % tp != 0 || config.vocab_size < tp) {
    throw std::invalid_argument("tensor parallelism " + std::to_string(tp) + " needs the key/value heads (" +
                                std::to_string(config.num_key_value_heads) + ") and the intermediate size (" +
                                std::to_string(config.intermediate_size) + ") of \"" + config.name +
                                "\" to divide by it");
  }
  if (tp == 1) return config;
  Qwen2Config rank = config;
  rank.num_attention_heads /= tp;
  rank.num_key_value_heads /= tp;
  rank.intermediate_size /= tp;
  rank.vocab_size = (config.vocab_size + tp - 1) / tp;
  return rank;
}

}  // namespace sb
