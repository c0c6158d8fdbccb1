#include "harness/eval/model_folder.h"

#include <nlohmann/json.hpp>

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <fstream>

#include "common/errors.h"
#include "kernels/attention/patterns/attention_pattern.h"
#include "models/qwen2/qwen2_hf_checkpoint.h"

namespace sb {
namespace {

namespace fs = std::filesystem;

std::vector<int64_t> read_eos_token_ids(const fs::path& config_json) {
  if (!fs::exists(config_json)) return {};
  std::ifstream in(config_json);
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  std::vector<int64_t> ids;
  if (!j.is_object()) return ids;
  const auto it = j.find("eos_token_id");
  if (it == j.end() || it->is_null()) return ids;
  if (it->is_number_integer()) {
    ids.push_back(it->get<int64_t>());
  } else if (it->is_array()) {
    for (const auto& id : *it) {
      if (id.is_number_integer()) ids.push_back(id.get<int64_t>());
    }
  }
  return ids;
}

std::optional<int64_t> read_tokenizer_eos_id(const fs::path& tokenizer_config, const Tokenizer& tokenizer) {
  if (!fs::exists(tokenizer_config)) return std::nullopt;
  std::ifstream in(tokenizer_config);
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("eos_token")) return std::nullopt;
  const nlohmann::json& eos = j["eos_token"];
  std::string text;
  if (eos.is_string()) {
    text = eos.get<std::string>();
  } else if (eos.is_object() && eos.contains("content") && eos["content"].is_string()) {
    text = eos["content"].get<std::string>();
  } else {
    return std::nullopt;
  }
  return tokenizer.find_token_id(text);
}

}  // namespace

std::vector<int64_t> ModelFolder::encode(const std::string& text, const std::string& what) const {
  if (!tokenizer) {
    throw ConfigError(dir.string(), "", "has no tokenizer.json, so " + what + " cannot be tokenized",
                      "pass token ids instead, or add the model's tokenizer.json to the folder");
  }
  return tokenizer->encode(text);
}

ModelFolder load_model_folder(const fs::path& dir, const AttentionOptions& attention) {
  if (!fs::is_directory(dir)) {
    throw ConfigError(dir.string(), "", "is not a folder",
                      "pass an HF checkpoint folder (config.json + *.safetensors)");
  }
  if (!fs::exists(dir / "config.json")) {
    throw ConfigError(dir.string(), "", "has no config.json", "pass an HF checkpoint folder");
  }
  ModelFolder folder;
  folder.dir = dir;
  try {
    folder.model = qwen2_load_hf_model(dir, attention.make_backend());
  } catch (const std::invalid_argument& e) {
    throw ConfigError(dir.string(), "", e.what(), "fix or replace the checkpoint");
  } catch (const std::runtime_error& e) {
    throw ConfigError(dir.string(), "", e.what(), "fix or replace the checkpoint");
  }
  folder.model->eval();
  if (fs::exists(dir / "tokenizer.json")) {
    folder.tokenizer = Tokenizer::from_file(dir / "tokenizer.json");
  }
  folder.eos_token_ids = read_eos_token_ids(dir / "config.json");
  folder.generation_eos_token_ids = read_eos_token_ids(dir / "generation_config.json");
  if (folder.generation_eos_token_ids.empty()) folder.generation_eos_token_ids = folder.eos_token_ids;
  if (folder.tokenizer) {
    folder.tokenizer_eos_token_id = read_tokenizer_eos_id(dir / "tokenizer_config.json", *folder.tokenizer);
  }
  return folder;
}

void place_model(ModelFolder& folder, const std::string& device, const std::string& dtype) {
  c10::ScalarType type;
  if (dtype == "float32") {
    type = c10::kFloat;
  } else if (dtype == "bfloat16") {
    type = c10::kBFloat16;
  } else {
    throw ConfigError("--dtype", "", "unknown dtype \"" + dtype + "\"", "use float32 or bfloat16");
  }
  c10::Device where(c10::kCPU);
  try {
    where = c10::Device(device);
  } catch (const std::exception&) {
    throw ConfigError("--device", "", "unknown device \"" + device + "\"", "use cpu, cuda or cuda:N");
  }
  folder.model->to(where, type);
}

}  // namespace sb
