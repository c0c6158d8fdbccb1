#include "models/qwen2/qwen2_hf_config.h"

#include <cmath>
#include <fstream>
#include <stdexcept>

namespace sb {
namespace {

using nlohmann::json;

[[noreturn]] void config_error(const std::string& file, const std::string& key,
                               const std::string& problem) {
  throw std::invalid_argument(file + ": " + key + ": " + problem);
}

int64_t required_int(const json& j, const std::string& key, const std::string& file) {
  auto it = j.find(key);
  if (it == j.end()) config_error(file, key, "missing (required for a Qwen2 model)");
  if (!it->is_number_integer()) config_error(file, key, "expected an integer, got " + it->dump());
  return it->get<int64_t>();
}

int64_t optional_int(const json& j, const std::string& key, int64_t fallback,
                     const std::string& file) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_number_integer()) config_error(file, key, "expected an integer, got " + it->dump());
  return it->get<int64_t>();
}

double optional_number(const json& j, const std::string& key, double fallback,
                       const std::string& file) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_number()) config_error(file, key, "expected a number, got " + it->dump());
  return it->get<double>();
}

bool optional_bool(const json& j, const std::string& key, bool fallback, const std::string& file) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) config_error(file, key, "expected true or false, got " + it->dump());
  return it->get<bool>();
}

// YaRN's settings from a rope_scaling / rope_parameters object of type "yarn", with
// transformers' defaults: factor = max positions / original ones when absent; beta_fast
// 32 and beta_slow 1 when absent or 0; attention_factor given, else from mscale and
// mscale_all_dim when both are set, else 0.1 ln(factor) + 1 (1 for factor <= 1).
Qwen2YarnScaling read_yarn(const json& rope, const std::string& key, int64_t max_positions, const std::string& file) {
  const std::string where = file + ": " + key;
  Qwen2YarnScaling y;
  y.original_max_position_embeddings = required_int(rope, "original_max_position_embeddings", where);
  if (y.original_max_position_embeddings <= 0) {
    config_error(where, "original_max_position_embeddings", "must be positive");
  }
  y.factor = optional_number(rope, "factor", static_cast<double>(max_positions) /
                                                  static_cast<double>(y.original_max_position_embeddings),
                             where);
  const double beta_fast = optional_number(rope, "beta_fast", 0.0, where);
  const double beta_slow = optional_number(rope, "beta_slow", 0.0, where);
  y.beta_fast = beta_fast != 0.0 ? beta_fast : 32.0;
  y.beta_slow = beta_slow != 0.0 ? beta_slow : 1.0;
  y.truncate = optional_bool(rope, "truncate", true, where);
  const auto mscale_of = [](double scale, double mscale) {
    return scale <= 1.0 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0;
  };
  const double mscale = optional_number(rope, "mscale", 0.0, where);
  const double mscale_all_dim = optional_number(rope, "mscale_all_dim", 0.0, where);
  if (rope.contains("attention_factor") && !rope["attention_factor"].is_null()) {
    y.attention_factor = optional_number(rope, "attention_factor", 1.0, where);
  } else if (mscale != 0.0 && mscale_all_dim != 0.0) {
    y.attention_factor = mscale_of(y.factor, mscale) / mscale_of(y.factor, mscale_all_dim);
  } else {
    y.attention_factor = mscale_of(y.factor, 1.0);
  }
  return y;
}

// rope_theta: top level (older transformers, the Qwen2.5 checkpoints) or
// rope_parameters.rope_theta (transformers >= 5). Scaling: none ("default") or YaRN,
// from rope_parameters (transformers >= 5) or rope_scaling (older files, Qwen2.5's card).
void read_rope(const json& j, const std::string& file, Qwen2Config& c) {
  c.rope_theta = optional_number(j, "rope_theta", 10000.0, file);
  for (const char* key : {"rope_scaling", "rope_parameters"}) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) continue;
    if (!it->is_object()) config_error(file, key, "expected an object");
    const std::string type = it->value("rope_type", it->value("type", std::string("default")));
    if (type == "yarn") {
      c.yarn = read_yarn(*it, key, c.max_position_embeddings, file);
    } else if (type != "default") {
      config_error(file, std::string(key) + ".rope_type",
                   "\"" + type + "\" is not supported (plain RoPE and \"yarn\" are)");
    }
    c.rope_theta = optional_number(*it, "rope_theta", c.rope_theta, file + ": " + key);
  }
}

}  // namespace

Qwen2Config qwen2_config_from_hf_json(const json& j, const std::string& file) {
  if (!j.is_object()) config_error(file, "(top level)", "expected a JSON object");
  const std::string model_type = j.value("model_type", std::string());
  if (model_type != "qwen2") {
    config_error(file, "model_type", "\"" + model_type + "\" is not \"qwen2\"");
  }
  if (const std::string act = j.value("hidden_act", std::string("silu")); act != "silu") {
    config_error(file, "hidden_act", "\"" + act + "\" is not supported (Qwen2 uses silu)");
  }
  if (optional_bool(j, "use_sliding_window", false, file)) {
    config_error(file, "use_sliding_window", "sliding-window attention is not supported");
  }
  Qwen2Config c;
  c.name = "hf:" + file;
  c.vocab_size = required_int(j, "vocab_size", file);
  c.hidden_size = required_int(j, "hidden_size", file);
  c.intermediate_size = required_int(j, "intermediate_size", file);
  c.num_hidden_layers = required_int(j, "num_hidden_layers", file);
  c.num_attention_heads = required_int(j, "num_attention_heads", file);
  c.num_key_value_heads = optional_int(j, "num_key_value_heads", c.num_attention_heads, file);
  if (c.num_attention_heads <= 0) config_error(file, "num_attention_heads", "must be positive");
  c.head_dim = optional_int(j, "head_dim", c.hidden_size / c.num_attention_heads, file);
  c.max_position_embeddings = optional_int(j, "max_position_embeddings", 32768, file);
  read_rope(j, file, c);
  c.rms_norm_eps = optional_number(j, "rms_norm_eps", 1e-6, file);
  c.initializer_range = optional_number(j, "initializer_range", 0.02, file);
  // transformers' Qwen2Config defaults to untied embeddings.
  c.tie_word_embeddings = optional_bool(j, "tie_word_embeddings", false, file);
  try {
    c.validate();
  } catch (const std::exception& e) {
    throw std::invalid_argument(file + ": " + e.what());
  }
  return c;
}

Qwen2Config qwen2_config_from_hf_file(const std::filesystem::path& config_json) {
  std::ifstream in(config_json);
  if (!in) throw std::invalid_argument(config_json.string() + ": cannot open");
  json j;
  try {
    j = json::parse(in);
  } catch (const json::parse_error& e) {
    throw std::invalid_argument(config_json.string() + ": invalid JSON: " + e.what());
  }
  return qwen2_config_from_hf_json(j, config_json.string());
}

json qwen2_config_to_hf_json(const Qwen2Config& c) {
  json j{{"architectures", {"Qwen2ForCausalLM"}},
              {"model_type", "qwen2"},
              {"vocab_size", c.vocab_size},
              {"hidden_size", c.hidden_size},
              {"intermediate_size", c.intermediate_size},
              {"num_hidden_layers", c.num_hidden_layers},
              {"num_attention_heads", c.num_attention_heads},
              {"num_key_value_heads", c.num_key_value_heads},
              {"head_dim", c.head_dim},
              {"max_position_embeddings", c.max_position_embeddings},
              {"rope_theta", c.rope_theta},
              {"rms_norm_eps", c.rms_norm_eps},
              {"initializer_range", c.initializer_range},
              {"tie_word_embeddings", c.tie_word_embeddings},
              {"hidden_act", "silu"},
              {"use_sliding_window", false},
              {"attention_dropout", 0.0},
              {"torch_dtype", "float32"}};
  if (c.yarn) {
    // Read by transformers old and new (it turns rope_scaling into rope_parameters).
    j["rope_scaling"] = {{"rope_type", "yarn"},
                         {"factor", c.yarn->factor},
                         {"original_max_position_embeddings", c.yarn->original_max_position_embeddings},
                         {"beta_fast", c.yarn->beta_fast},
                         {"beta_slow", c.yarn->beta_slow},
                         {"attention_factor", c.yarn->attention_factor},
                         {"truncate", c.yarn->truncate}};
  }
  return j;
}

}  // namespace sb
