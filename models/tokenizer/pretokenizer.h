#pragma once
// The pre-tokenizer of a byte-level BPE tokenizer.json: regex Splits (behaviour
// Isolated) applied in order, then ByteLevel, which may add a leading space to each
// piece, may split once more with GPT-2's pattern, and spells every piece's bytes with
// the byte-level alphabet (byte_level.h). BPE then runs on each piece separately.
//
// Qwen2 uses one Split with kQwen2SplitPattern and ByteLevel(add_prefix_space=false,
// use_regex=false); GPT-2 uses a lone ByteLevel(add_prefix_space=false, use_regex=true).

#include <string>
#include <string_view>
#include <vector>

#include "models/tokenizer/regex_split.h"

namespace sb {

// Qwen2's Split pattern (tokenizer.json of every Qwen2/Qwen2.5 model), Oniguruma syntax.
// Unlike GPT-2's it takes digits one at a time and keeps a letter run together with
// one leading non-letter, non-digit, non-newline character.
inline constexpr std::string_view kQwen2SplitPattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// GPT-2's pattern, which HF's ByteLevel pre-tokenizer applies when use_regex is true.
inline constexpr std::string_view kGpt2SplitPattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

struct ByteLevelOptions {
  bool add_prefix_space = false;  // prepend ' ' to each piece that does not start with one
  bool use_regex = false;         // split each piece with kGpt2SplitPattern
};

class PreTokenizer {
 public:
  PreTokenizer(std::vector<RegexSplitter> splits, ByteLevelOptions byte_level);

  // Qwen2's: Split(kQwen2SplitPattern, Isolated), ByteLevel(false, false).
  static PreTokenizer qwen2();

  // The byte-level spellings of the pieces of `text` (well-formed UTF-8), in order.
  std::vector<std::string> pre_tokenize(std::string_view text) const;

  // The pieces before ByteLevel spells them (after its prefix space and GPT-2 split):
  // readable, for tests and diagnostics.
  std::vector<std::string> split_pieces(std::string_view text) const;

 private:
  std::vector<RegexSplitter> splits_;
  ByteLevelOptions byte_level_;
  std::vector<RegexSplitter> gpt2_split_;  // one element when use_regex
};

}  // namespace sb
