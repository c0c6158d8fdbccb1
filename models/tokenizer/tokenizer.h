#pragma once
// A byte-level BPE tokenizer read from an HF tokenizer.json, producing the same ids as
// HF tokenizers' Tokenizer.encode(text).ids for the configurations Qwen2 and GPT-2 use
// (what is read, and what is refused, is listed in tokenizer_json.h).
//
// encode: added tokens are cut out of the raw text first (added_tokens.h); each piece
// in between is NFC-normalized (if the file says so), pre-tokenized (regex Splits,
// then ByteLevel: pretokenizer.h) and merged by the BPE model (bpe_model.h).
// decode: each id's token back through the byte table (tokens with characters outside
// it, e.g. "<|im_end|>", as their own UTF-8), the bytes joined, and ill-formed UTF-8
// replaced by U+FFFD (maximal subparts, as Python's errors="replace").
//
// Copies share the loaded tables; encode and decode are safe to call from several
// threads at once.

#include <cstdint>
#include <filesystem>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sb {

class Tokenizer {
 public:
  // Throws ConfigError (common/errors.h) naming the file, and the JSON path
  // where it applies, when the file cannot be read or uses what is not supported.
  static Tokenizer from_file(const std::filesystem::path& path);
  // The same from an already parsed tokenizer.json; `source` names it in errors.
  static Tokenizer from_json(const nlohmann::json& root, const std::string& source);

  // Throws std::invalid_argument when text is not well-formed UTF-8 (HF's input is a
  // Python str, which always is).
  std::vector<int64_t> encode(std::string_view text) const;

  // skip_special: leave out added tokens marked special. Throws std::out_of_range for
  // an id no token has (HF silently drops those).
  std::string decode(const std::vector<int64_t>& ids, bool skip_special = false) const;

  // Added tokens first, then the model's vocabulary (HF's order).
  std::optional<int64_t> find_token_id(std::string_view token) const;
  // The same; throws std::out_of_range naming the token when it has no id.
  int64_t token_to_id(std::string_view token) const;
  // The token string of an id (byte-level spelling for model tokens), if any.
  std::optional<std::string> id_to_token(int64_t id) const;
  bool is_added_token(int64_t id) const;
  bool is_special_token(int64_t id) const;

  // 1 + the largest id (model or added token): the size an embedding table needs at
  // least. Qwen2.5: 151665 (its checkpoints pad the embedding to 151936).
  int64_t vocab_size() const;

  // Where it was loaded from, for messages.
  const std::string& source() const;

 private:
  struct Impl;
  explicit Tokenizer(std::shared_ptr<const Impl> impl);
  std::shared_ptr<const Impl> impl_;
};

}  // namespace sb
