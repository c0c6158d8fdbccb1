#include "tests/tokenizer/tiny_tokenizer_json.h"

#include "models/tokenizer/byte_level.h"
#include "models/tokenizer/pretokenizer.h"

namespace sb::test {

using nlohmann::json;

json tiny_tokenizer_json(const TinyTokenizerOptions& options) {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[byte_level_encode(std::string(1, static_cast<char>(b)))] = b;
  json merges = json::array();
  int64_t next_id = 256;
  for (const auto& [left, right] : options.merges) {
    const std::string l = byte_level_encode(left);
    const std::string r = byte_level_encode(right);
    if (options.merges_as_pairs) {
      merges.push_back(json::array({l, r}));
    } else {
      merges.push_back(l + " " + r);
    }
    vocab[l + r] = next_id++;
  }
  for (const std::string& token : options.extra_tokens) vocab[byte_level_encode(token)] = next_id++;

  const json byte_level = {{"type", "ByteLevel"},
                           {"add_prefix_space", false},
                           {"trim_offsets", false},
                           {"use_regex", false}};
  return json{{"version", "1.0"},
              {"truncation", nullptr},
              {"padding", nullptr},
              {"added_tokens", options.added_tokens},
              {"normalizer", options.nfc ? json{{"type", "NFC"}} : json()},
              {"pre_tokenizer",
               {{"type", "Sequence"},
                {"pretokenizers",
                 json::array({json{{"type", "Split"},
                                   {"pattern", {{"Regex", std::string(kQwen2SplitPattern)}}},
                                   {"behavior", "Isolated"},
                                   {"invert", false}},
                              byte_level})}}},
              {"post_processor", byte_level},
              {"decoder", byte_level},
              {"model",
               {{"type", "BPE"},
                {"dropout", nullptr},
                {"unk_token", nullptr},
                {"continuing_subword_prefix", ""},
                {"end_of_word_suffix", ""},
                {"fuse_unk", false},
                {"byte_fallback", false},
                {"ignore_merges", options.ignore_merges},
                {"vocab", vocab},
                {"merges", merges}}}};
}

json added_token_json(int64_t id, const std::string& content, bool special, bool normalized,
                      bool lstrip, bool rstrip, bool single_word) {
  return json{{"id", id},          {"content", content}, {"single_word", single_word},
              {"lstrip", lstrip},  {"rstrip", rstrip},   {"normalized", normalized},
              {"special", special}};
}

std::vector<int64_t> byte_ids(std::string_view bytes) {
  std::vector<int64_t> ids;
  for (const char c : bytes) ids.push_back(static_cast<unsigned char>(c));
  return ids;
}

}  // namespace sb::test
