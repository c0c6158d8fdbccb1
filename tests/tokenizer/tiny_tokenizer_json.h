#pragma once
// A small byte-level BPE tokenizer.json built in code for the unit tests, shaped like
// Qwen2's (NFC, Split(Qwen2 pattern, Isolated) + ByteLevel, ByteLevel decoder), so that
// expected ids can be worked out by hand: id b (0..255) is the token of byte b, id
// 256 + i is the result of merges[i], then the extra tokens, then the added tokens
// (whose ids the test chooses).

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sb::test {

struct TinyTokenizerOptions {
  // Plain text (bytes), turned into byte-level spellings; merges[i] gets id 256 + i.
  std::vector<std::pair<std::string, std::string>> merges;
  bool merges_as_pairs = true;            // ["a", "b"] (tokenizers >= 0.20) or "a b" (older files)
  std::vector<std::string> extra_tokens;  // plain text, vocabulary entries without merges
  bool ignore_merges = false;
  bool nfc = true;
  nlohmann::json added_tokens = nlohmann::json::array();
};

nlohmann::json tiny_tokenizer_json(const TinyTokenizerOptions& options);

// One "added_tokens" entry.
nlohmann::json added_token_json(int64_t id, const std::string& content, bool special,
                                bool normalized = false, bool lstrip = false, bool rstrip = false,
                                bool single_word = false);

// The ids of single-byte tokens: one per byte of `bytes`.
std::vector<int64_t> byte_ids(std::string_view bytes);

}  // namespace sb::test
