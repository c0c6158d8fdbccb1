#include "harness/eval/model_folder.h"

#include <nlohmann/json.hpp>

#include <fstream>

#include "harness/common/errors.h"
#include "kernels/attention/attention_backend.h"
#include "models/qwen2/qwen2_hf_checkpoint.h"

namespace sb {
namespace {

namespace fs = std::filesystem;

std::vector<int64_t> read_eos_token_ids(const fs::path& config_json) {
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

}  // namespace

std::vector<int64_t> ModelFolder::encode(const std::string& text, const std::string& what) const {
  if (!tokenizer) {
    throw ConfigError(dir.string(), "", "has no tokenizer.json, so " + what + " cannot be tokenized",
                      "pass token ids instead, or add the model's tokenizer.json to the folder");
  }
  return tokenizer->encode(text);
}

ModelFolder load_model_folder(const fs::path& dir, const std::string& attention) {
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
    folder.model = qwen2_load_hf_model(dir, make_attention_backend(attention));
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
  return folder;
}

}  // namespace sb
