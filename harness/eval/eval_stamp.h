#pragma once
// What produced an evaluation folder, kept beside its resumable files so that a rerun
// never mixes two models or two settings in one folder: the model's identity (its folder,
// hashes of config.json and tokenizer.json, attention backend, parameter dtype) and the
// suite's own settings.

#include <nlohmann/json.hpp>

#include <filesystem>

#include "harness/eval/model_folder.h"

namespace sb {

// {"model": absolute folder, "config_fnv1a64", "tokenizer_fnv1a64", "attention", "dtype", "precision"}
nlohmann::ordered_json eval_model_identity(ModelFolder& model);

// Writes `stamp` to `file` when it does not exist; otherwise ConfigError naming the file
// unless the kept stamp equals it ("use a fresh output folder").
void check_or_write_eval_stamp(const std::filesystem::path& file, const nlohmann::ordered_json& stamp);

}  // namespace sb
