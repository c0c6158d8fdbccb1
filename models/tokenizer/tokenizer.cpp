#include "models/tokenizer/tokenizer.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <unordered_map>

#include "common/errors.h"
#include "models/tokenizer/added_tokens.h"
#include "models/tokenizer/bpe_model.h"
#include "models/tokenizer/byte_level.h"
#include "models/tokenizer/normalizer.h"
#include "models/tokenizer/pretokenizer.h"
#include "models/tokenizer/tokenizer_json.h"
#include "models/tokenizer/utf8.h"

namespace sb {
namespace {

enum class IdKind : uint8_t { kNone, kModel, kAdded, kSpecial };

struct IdEntry {
  std::string token;  // the vocabulary's spelling, or the added token's content
  std::string bytes;  // what decode() emits for it
  IdKind kind = IdKind::kNone;
};

// HF's ByteLevel decoder: a token whose every character is in the byte table gives
// those bytes, any other token its own UTF-8.
std::string decoded_bytes(const std::string& token) {
  std::optional<std::string> bytes = byte_level_decode(token);
  return bytes ? *bytes : token;
}

std::vector<AddedToken> select_added(const std::vector<AddedToken>& tokens, bool normalized,
                                     bool nfc) {
  std::vector<AddedToken> out;
  for (const AddedToken& token : tokens) {
    if (token.normalized != normalized) continue;
    out.push_back(token);
    // Normalized tokens are searched for in normalized text, so in normalized form.
    if (normalized && nfc) out.back().content = nfc_normalize(token.content);
  }
  return out;
}

}  // namespace

struct Tokenizer::Impl {
  Impl(TokenizerSpec spec, std::string source_name)
      : source(std::move(source_name)),
        nfc(spec.nfc),
        pre_tokenizer(std::move(spec.splits), spec.byte_level),
        model(std::move(spec.vocab), spec.merges, spec.ignore_merges),
        raw_added(select_added(spec.added_tokens, false, spec.nfc)),
        normalized_added(select_added(spec.added_tokens, true, spec.nfc)) {
    int64_t size = 0;
    for (const auto& [token, id] : model.vocab()) size = std::max(size, id + 1);
    for (const AddedToken& token : spec.added_tokens) size = std::max(size, token.id + 1);
    by_id.resize(static_cast<size_t>(size));
    for (const auto& [token, id] : model.vocab()) {
      by_id[id] = IdEntry{token, decoded_bytes(token), IdKind::kModel};
    }
    for (const AddedToken& token : spec.added_tokens) {
      by_id[token.id] = IdEntry{token.content, decoded_bytes(token.content),
                                token.special ? IdKind::kSpecial : IdKind::kAdded};
      added_by_content.emplace(token.content, token.id);
    }
  }

  void encode_normalized_piece(std::string_view text, std::vector<int64_t>& ids) const {
    for (const std::string& piece : pre_tokenizer.pre_tokenize(text)) model.tokenize(piece, ids);
  }

  const IdEntry* entry(int64_t id) const {
    if (id < 0 || id >= static_cast<int64_t>(by_id.size())) return nullptr;
    const IdEntry& e = by_id[static_cast<size_t>(id)];
    return e.kind == IdKind::kNone ? nullptr : &e;
  }

  std::string source;
  bool nfc;
  PreTokenizer pre_tokenizer;
  BpeModel model;
  AddedTokenMatcher raw_added;         // normalized=false: matched in the raw text
  AddedTokenMatcher normalized_added;  // normalized=true: matched after normalization
  std::unordered_map<std::string, int64_t> added_by_content;
  std::vector<IdEntry> by_id;
};

Tokenizer::Tokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}

Tokenizer Tokenizer::from_file(const std::filesystem::path& path) {
  const std::string name = path.string();
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw ConfigError(name, "", std::string("cannot open: ") + std::strerror(errno),
                             "pass the tokenizer.json of a byte-level BPE model");
  }
  std::ostringstream content;
  content << in.rdbuf();
  if (in.bad()) throw ConfigError(name, "", "read error");
  nlohmann::json root;
  try {
    root = nlohmann::json::parse(content.str());
  } catch (const nlohmann::json::parse_error& e) {
    throw ConfigError(name, "", std::string("not valid JSON: ") + e.what());
  }
  return from_json(root, name);
}

Tokenizer Tokenizer::from_json(const nlohmann::json& root, const std::string& source) {
  return Tokenizer(std::make_shared<const Impl>(parse_tokenizer_json(root, source), source));
}

std::vector<int64_t> Tokenizer::encode(std::string_view text) const {
  if (const size_t bad = utf8::find_invalid(text); bad != std::string_view::npos) {
    throw std::invalid_argument("text is not valid UTF-8 (byte " + std::to_string(bad) + " of " +
                                std::to_string(text.size()) + ")");
  }
  const Impl& impl = *impl_;
  std::vector<int64_t> ids;
  ids.reserve(text.size() / 3 + 1);
  std::vector<TextSegment> raw_segments;
  impl.raw_added.split(text, raw_segments);
  std::vector<TextSegment> normalized_segments;
  for (const TextSegment& raw : raw_segments) {
    if (raw.token_id >= 0) {
      ids.push_back(raw.token_id);
      continue;
    }
    // HF normalizes each stretch between raw added tokens on its own.
    const std::string normalized = impl.nfc ? nfc_normalize(raw.text) : std::string(raw.text);
    normalized_segments.clear();
    impl.normalized_added.split(normalized, normalized_segments);
    for (const TextSegment& segment : normalized_segments) {
      if (segment.token_id >= 0) {
        ids.push_back(segment.token_id);
      } else {
        impl.encode_normalized_piece(segment.text, ids);
      }
    }
  }
  return ids;
}

std::string Tokenizer::decode(const std::vector<int64_t>& ids, bool skip_special) const {
  std::string bytes;
  for (const int64_t id : ids) {
    const IdEntry* e = impl_->entry(id);
    if (e == nullptr) {
      throw std::out_of_range("token id " + std::to_string(id) + " is not in the vocabulary of " +
                              impl_->source + " (ids 0.." + std::to_string(vocab_size() - 1) + ")");
    }
    if (skip_special && e->kind == IdKind::kSpecial) continue;
    bytes += e->bytes;
  }
  return utf8::decode_lossy(bytes);
}

std::optional<int64_t> Tokenizer::find_token_id(std::string_view token) const {
  auto it = impl_->added_by_content.find(std::string(token));
  if (it != impl_->added_by_content.end()) return it->second;
  return impl_->model.token_to_id(token);
}

int64_t Tokenizer::token_to_id(std::string_view token) const {
  if (auto id = find_token_id(token)) return *id;
  throw std::out_of_range("token \"" + std::string(token) + "\" is not in the vocabulary of " +
                          impl_->source);
}

std::optional<std::string> Tokenizer::id_to_token(int64_t id) const {
  const IdEntry* e = impl_->entry(id);
  if (e == nullptr) return std::nullopt;
  return e->token;
}

bool Tokenizer::is_added_token(int64_t id) const {
  const IdEntry* e = impl_->entry(id);
  return e != nullptr && (e->kind == IdKind::kAdded || e->kind == IdKind::kSpecial);
}

bool Tokenizer::is_special_token(int64_t id) const {
  const IdEntry* e = impl_->entry(id);
  return e != nullptr && e->kind == IdKind::kSpecial;
}

int64_t Tokenizer::vocab_size() const { return static_cast<int64_t>(impl_->by_id.size()); }

const std::string& Tokenizer::source() const { return impl_->source; }

}  // namespace sb
