#include "harness/train/saved_model_files.h"

#include "common/errors.h"
#include "harness/common/atomic_file.h"
#include "harness/data/tokenized_sft_dataset.h"
#include "models/qwen2/qwen2_hf_config.h"
#include "models/tokenizer/tokenizer.h"

namespace sb {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// The tokenizer files transformers saves for Qwen2 models, old and new layouts.
const char* const kTokenizerFiles[] = {"tokenizer.json",          "tokenizer_config.json", "vocab.json",
                                       "merges.txt",              "special_tokens_map.json",
                                       "added_tokens.json",       "chat_template.jinja"};

// The token ids that decide where generation starts and stops.
const char* const kTokenIdKeys[] = {"bos_token_id", "eos_token_id", "pad_token_id"};

json read_json_file(const fs::path& path, const std::string& manifest_file) {
  try {
    return json::parse(read_file(path));
  } catch (const std::exception& e) {
    throw ConfigError(manifest_file, "$.model.from", path.string() + " is not readable JSON: " + e.what(),
                      "repair or remove that file in the model folder");
  }
}

// Without model.from: the ids a ChatML-trained model stops at, as Qwen2.5-Instruct's
// generation_config.json lists them ("<|im_end|>" first), those the tokenizer has.
json chatml_eos_ids(const fs::path& tokenizer_json) {
  const Tokenizer tokenizer = Tokenizer::from_file(tokenizer_json);
  json ids = json::array();
  for (const char* token : {"<|im_end|>", "<|endoftext|>"}) {
    if (const auto id = tokenizer.find_token_id(token)) ids.push_back(*id);
  }
  return ids;
}

// The tokenizer.json a run without model.from trained with ("" for synthetic data).
fs::path data_tokenizer(const Manifest& manifest) {
  if (manifest.data.source == DataSource::kJsonl) return manifest.data.jsonl.tokenizer;
  if (manifest.data.source == DataSource::kTokenized) {
    const json meta = read_tokenized_cache_meta(manifest.data.tokenized.path);
    const fs::path tokenizer = fs::path(meta.at("tokenizer").at("dir").get<std::string>()) / "tokenizer.json";
    return fs::exists(tokenizer) ? tokenizer : fs::path();  // the cache does not need it to train
  }
  return {};
}

}  // namespace

SavedModelFiles saved_model_files(const Manifest& manifest) {
  SavedModelFiles files;
  files.config = qwen2_config_to_hf_json(manifest.model.config);
  const fs::path tokenizer = manifest.model.pretrained() ? fs::path() : data_tokenizer(manifest);
  if (manifest.model.pretrained()) {
    const fs::path from(manifest.model.from);
    const json source = read_json_file(from / "config.json", manifest.file);
    for (const char* key : kTokenIdKeys) {
      if (source.contains(key) && !source[key].is_null()) files.config[key] = source[key];
    }
    if (fs::exists(from / "generation_config.json")) {
      files.generation_config = read_json_file(from / "generation_config.json", manifest.file);
    }
    for (const char* name : kTokenizerFiles) {
      if (fs::exists(from / name)) files.copies.push_back({from / name, name});
    }
  } else if (!tokenizer.empty()) {
    files.copies.push_back({tokenizer, "tokenizer.json"});
    const fs::path folder = tokenizer.parent_path();
    if (tokenizer.filename() == "tokenizer.json") {  // the rest of its folder's tokenizer files
      for (const char* name : kTokenizerFiles) {
        if (std::string(name) != "tokenizer.json" && fs::exists(folder / name)) {
          files.copies.push_back({folder / name, name});
        }
      }
    }
  }
  if (!files.config.contains("eos_token_id") && !tokenizer.empty()) {
    const json ids = chatml_eos_ids(tokenizer);
    if (!ids.empty()) files.config["eos_token_id"] = ids[0];
    if (!files.generation_config && !ids.empty()) files.generation_config = json{{"eos_token_id", ids}};
  }
  if (!files.generation_config && files.config.contains("eos_token_id")) {
    files.generation_config = json::object();
    for (const char* key : kTokenIdKeys) {
      if (files.config.contains(key)) (*files.generation_config)[key] = files.config[key];
    }
  }
  return files;
}

void write_saved_model_files(const SavedModelFiles& files, const fs::path& dir) {
  write_file_atomic(dir / "config.json", files.config.dump(2) + "\n");
  if (files.generation_config) {
    write_file_atomic(dir / "generation_config.json", files.generation_config->dump(2) + "\n");
  }
  for (const SavedModelFiles::Copy& copy : files.copies) write_file_atomic(dir / copy.name, read_file(copy.source));
}

}  // namespace sb
