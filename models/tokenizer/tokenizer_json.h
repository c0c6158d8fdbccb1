#pragma once
// Reading tokenizer.json (HF tokenizers' format, version "1.0") into the parts of a
// byte-level BPE tokenizer. Strict: a key this reader does not know, or a value that
// would change the ids in a way it does not implement, is a ConfigError naming
// the file and the JSON path, never silently ignored.
//
// Supported (everything Qwen2/Qwen2.5 and GPT-2 use):
//   model          type "BPE"; vocab; merges as "a b" strings or ["a", "b"] pairs;
//                  ignore_merges; dropout null; continuing_subword_prefix and
//                  end_of_word_suffix null or ""; unk_token, fuse_unk, byte_fallback
//                  any (they act only on characters without a token, and the vocabulary
//                  must have a token for each of the 256 byte characters).
//   normalizer     null, NFC, or a Sequence of those.
//   pre_tokenizer  Split (pattern Regex or String, behavior Isolated, invert either:
//                  with Isolated both give the same pieces) any number of times, then one
//                  ByteLevel (add_prefix_space, use_regex = GPT-2's pattern; trim_offsets
//                  only moves offsets); nested Sequences are flattened.
//   post_processor null, ByteLevel (which only moves offsets), a TemplateProcessing that
//                  adds no ids (transformers >= 5 writes one), or a Sequence of those.
//   decoder        ByteLevel.
//   added_tokens   id, content, single_word, lstrip, rstrip, normalized, special.
//   truncation, padding: null.

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <unordered_map>
#include <vector>

#include "models/tokenizer/added_tokens.h"
#include "models/tokenizer/bpe_model.h"
#include "models/tokenizer/pretokenizer.h"
#include "models/tokenizer/regex_split.h"

namespace sb {

struct TokenizerSpec {
  bool nfc = false;
  std::vector<RegexSplitter> splits;  // in order, behaviour Isolated
  ByteLevelOptions byte_level;
  std::unordered_map<std::string, int64_t> vocab;
  std::vector<BpeMerge> merges;  // by rank
  bool ignore_merges = false;
  std::vector<AddedToken> added_tokens;
};

// Throws ConfigError(file, JSON path, problem, fix).
TokenizerSpec parse_tokenizer_json(const nlohmann::json& root, const std::string& file);

}  // namespace sb
