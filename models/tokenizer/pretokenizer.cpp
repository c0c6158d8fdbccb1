#include "models/tokenizer/pretokenizer.h"

#include "models/tokenizer/byte_level.h"

namespace sb {

PreTokenizer::PreTokenizer(std::vector<RegexSplitter> splits, ByteLevelOptions byte_level)
    : splits_(std::move(splits)), byte_level_(byte_level) {
  if (byte_level_.use_regex) gpt2_split_.emplace_back(kGpt2SplitPattern);
}

PreTokenizer PreTokenizer::qwen2() {
  std::vector<RegexSplitter> splits;
  splits.emplace_back(kQwen2SplitPattern);
  return PreTokenizer(std::move(splits), ByteLevelOptions{});
}

std::vector<std::string> PreTokenizer::split_pieces(std::string_view text) const {
  std::vector<std::string_view> pieces;
  if (!text.empty()) pieces.push_back(text);
  std::vector<std::string_view> next;
  for (const RegexSplitter& split : splits_) {
    next.clear();
    for (std::string_view piece : pieces) split.split_isolated(piece, next);
    pieces.swap(next);
  }

  std::vector<std::string> out;
  out.reserve(pieces.size());
  std::vector<std::string_view> regex_pieces;
  for (std::string_view piece : pieces) {
    // HF applies the prefix space to each piece the earlier Splits produced, before
    // ByteLevel's own regex.
    std::string prefixed;
    if (byte_level_.add_prefix_space && piece.front() != ' ') {
      prefixed.reserve(piece.size() + 1);
      prefixed += ' ';
      prefixed += piece;
      piece = prefixed;
    }
    if (gpt2_split_.empty()) {
      out.emplace_back(piece);
      continue;
    }
    regex_pieces.clear();
    gpt2_split_.front().split_isolated(piece, regex_pieces);
    for (std::string_view p : regex_pieces) out.emplace_back(p);
  }
  return out;
}

std::vector<std::string> PreTokenizer::pre_tokenize(std::string_view text) const {
  std::vector<std::string> pieces = split_pieces(text);
  for (std::string& piece : pieces) piece = byte_level_encode(piece);
  return pieces;
}

}  // namespace sb
