#pragma once
// What a saved model folder (every training checkpoint, the final one included) carries
// beside its weights, so that transformers, PEFT and `sparsebalance eval` / `generate`
// treat it as the model it was trained from:
//   config.json             the architecture, with the token ids (bos / eos / pad) of
//                           model.from's config.json; without model.from, the eos ids
//                           of the run's tokenizer ("<|im_end|>", which ends every
//                           ChatML turn the run trained on, then "<|endoftext|>")
//   generation_config.json  model.from's, as is; without one, bos / eos as above, so
//                           generation stops where transformers' would
//   tokenizer files         model.from's tokenizer.json, tokenizer_config.json,
//                           vocab.json, merges.txt, special_tokens_map.json,
//                           added_tokens.json and chat_template.jinja, those it has;
//                           without model.from, the tokenizer the data was
//                           tokenised with (data.jsonl.tokenizer, or the cache's
//                           tokenizer folder) and its folder's other tokenizer files
// A run on synthetic data from a preset has no tokenizer: its folders get the
// architecture alone, and generation runs to its length limit.

#include <nlohmann/json.hpp>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "harness/config/manifest.h"

namespace sb {

struct SavedModelFiles {
  nlohmann::json config;                               // config.json
  std::optional<nlohmann::json> generation_config;     // generation_config.json
  struct Copy {
    std::filesystem::path source;
    std::string name;  // in the saved folder (data.jsonl.tokenizer may have any name)
  };
  std::vector<Copy> copies;
};

// Reads model.from's files (ConfigError naming $.model.from when one is unreadable).
SavedModelFiles saved_model_files(const Manifest& manifest);

// Writes the files into `dir` (each atomically).
void write_saved_model_files(const SavedModelFiles& files, const std::filesystem::path& dir);

}  // namespace sb
