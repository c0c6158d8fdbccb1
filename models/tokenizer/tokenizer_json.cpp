#include "models/tokenizer/tokenizer_json.h"

#include <cctype>
#include <cstdio>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string_view>

#include "common/errors.h"
#include "models/tokenizer/byte_level.h"

namespace sb {
namespace {

using nlohmann::json;

std::string json_type_name(const json& v) {
  switch (v.type()) {
    case json::value_t::null:
      return "null";
    case json::value_t::boolean:
      return "a boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
      return "an integer";
    case json::value_t::number_float:
      return "a number";
    case json::value_t::string:
      return "a string";
    case json::value_t::array:
      return "an array";
    case json::value_t::object:
      return "an object";
    default:
      return "an unsupported JSON value";
  }
}

// A string as a JSON literal: quoted, control characters escaped.
std::string in_quotes(std::string_view s) { return json(std::string(s)).dump(); }

// One JSON value with its path, for errors that say where.
class Node {
 public:
  Node(const json& value, std::string path, const std::string& file)
      : value_(value), path_(std::move(path)), file_(file) {}

  const json& value() const { return value_; }
  const std::string& path() const { return path_; }
  bool is_null() const { return value_.is_null(); }

  [[noreturn]] void fail(const std::string& problem, const std::string& fix = "") const {
    throw ConfigError(file_, path_, problem, fix);
  }

  void expect_object() const {
    if (!value_.is_object()) fail("expected an object, found " + json_type_name(value_));
  }

  // Rejects keys outside `allowed` (the object's unknown keys would otherwise be
  // ignored, which could hide a setting that changes the ids).
  void allow_keys(std::initializer_list<std::string_view> allowed) const {
    expect_object();
    for (auto it = value_.begin(); it != value_.end(); ++it) {
      bool known = false;
      for (std::string_view key : allowed) known = known || key == it.key();
      if (!known) {
        std::string list;
        for (std::string_view key : allowed) list += (list.empty() ? "" : ", ") + in_quotes(key);
        child_at_key(it.key()).fail(
            "unknown key " + in_quotes(it.key()) + " (this reader knows " + list + ")",
            "remove it, or use a tokenizer this reader supports");
      }
    }
  }

  bool has(const std::string& key) const { return value_.contains(key); }

  Node child(const std::string& key) const {
    expect_object();
    if (!value_.contains(key)) fail("missing required key " + in_quotes(key));
    return child_at_key(key);
  }

  Node element(size_t index) const {
    return Node(value_.at(index), path_ + "[" + std::to_string(index) + "]", file_);
  }

  std::string as_string() const {
    if (!value_.is_string()) fail("expected a string, found " + json_type_name(value_));
    return value_.get<std::string>();
  }
  bool as_bool() const {
    if (!value_.is_boolean()) fail("expected true or false, found " + json_type_name(value_));
    return value_.get<bool>();
  }
  // HF allows any u32; the id table here is a dense array, so ids stop at 2^24 - 1
  // (real vocabularies stay below 300k).
  int64_t as_id() const {
    constexpr int64_t kMaxTokenId = (int64_t{1} << 24) - 1;
    if (!value_.is_number_integer() || value_.get<int64_t>() < 0 ||
        value_.get<int64_t>() > kMaxTokenId) {
      fail("expected a token id (an integer from 0 to " + std::to_string(kMaxTokenId) +
           "), found " + value_.dump());
    }
    return value_.get<int64_t>();
  }
  void expect_array() const {
    if (!value_.is_array()) fail("expected an array, found " + json_type_name(value_));
  }

  Node child_at_key(const std::string& key) const {
    bool identifier = !key.empty();
    for (const char c : key) {
      identifier = identifier && (std::isalnum(static_cast<unsigned char>(c)) || c == '_');
    }
    const std::string path = identifier ? path_ + "." + key : path_ + "[" + json(key).dump() + "]";
    return Node(value_.at(key), path, file_);
  }

 private:
  const json& value_;
  std::string path_;
  const std::string& file_;
};

std::string node_type(const Node& node) {
  node.expect_object();
  return node.child("type").as_string();
}

void parse_normalizer(const Node& node, TokenizerSpec& spec) {
  if (node.is_null()) return;
  const std::string type = node_type(node);
  if (type == "NFC") {
    node.allow_keys({"type"});
    spec.nfc = true;
  } else if (type == "Sequence") {
    node.allow_keys({"type", "normalizers"});
    const Node list = node.child("normalizers");
    list.expect_array();
    for (size_t i = 0; i < list.value().size(); ++i) parse_normalizer(list.element(i), spec);
  } else {
    node.child("type").fail("normalizer " + in_quotes(type) + " is not supported",
                            "this reader implements NFC (Qwen2's), a Sequence of NFC, or null");
  }
}

// A literal String pattern as an Oniguruma regex: HF escapes it and runs it as a regex.
std::string escape_literal(std::string_view literal) {
  std::string out;
  for (const char c : literal) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x80 && !std::isalnum(u)) {
      if (u < 0x20 || u == 0x7F) {
        char hex[8];
        std::snprintf(hex, sizeof(hex), "\\x%02X", u);
        out += hex;
        continue;
      }
      out += '\\';
    }
    out += c;
  }
  return out;
}

void parse_split(const Node& node, TokenizerSpec& spec) {
  node.allow_keys({"type", "pattern", "behavior", "invert"});
  const Node pattern = node.child("pattern");
  pattern.expect_object();
  std::string onig_pattern;
  if (pattern.value().size() == 1 && pattern.has("Regex")) {
    onig_pattern = pattern.child("Regex").as_string();
  } else if (pattern.value().size() == 1 && pattern.has("String")) {
    const std::string literal = pattern.child("String").as_string();
    if (literal.empty()) pattern.child("String").fail("an empty String pattern is not supported");
    onig_pattern = escape_literal(literal);
  } else {
    pattern.fail("expected {\"Regex\": \"...\"} or {\"String\": \"...\"}");
  }
  const Node behavior = node.child("behavior");
  if (behavior.as_string() != "Isolated") {
    behavior.fail("Split behavior " + in_quotes(behavior.as_string()) + " is not supported",
                  "this reader implements \"Isolated\" (Qwen2's)");
  }
  // With Isolated, matches and the text between them are all pieces: invert only swaps
  // which is which, so either value gives the same split.
  node.child("invert").as_bool();
  try {
    spec.splits.emplace_back(onig_pattern);
  } catch (const std::invalid_argument& e) {
    pattern.fail(e.what());
  }
}

void parse_byte_level_fields(const Node& node) {
  node.allow_keys({"type", "add_prefix_space", "trim_offsets", "use_regex"});
  if (node.has("trim_offsets")) node.child("trim_offsets").as_bool();  // offsets only
}

void collect_pre_tokenizers(const Node& node, std::vector<Node>& steps) {
  if (node_type(node) == "Sequence") {
    node.allow_keys({"type", "pretokenizers"});
    const Node list = node.child("pretokenizers");
    list.expect_array();
    for (size_t i = 0; i < list.value().size(); ++i) collect_pre_tokenizers(list.element(i), steps);
  } else {
    steps.push_back(node);
  }
}

void parse_pre_tokenizer(const Node& node, TokenizerSpec& spec) {
  const std::string fix =
      "byte-level BPE needs Split(Regex, Isolated) steps followed by one ByteLevel, as in "
      "Qwen2's tokenizer.json";
  if (node.is_null()) node.fail("no pre_tokenizer; a byte-level BPE needs ByteLevel", fix);
  std::vector<Node> steps;
  collect_pre_tokenizers(node, steps);
  bool byte_level_seen = false;
  for (const Node& step : steps) {
    const std::string type = node_type(step);
    if (byte_level_seen) step.fail("a pre-tokenizer after ByteLevel is not supported", fix);
    if (type == "Split") {
      parse_split(step, spec);
    } else if (type == "ByteLevel") {
      parse_byte_level_fields(step);
      spec.byte_level.add_prefix_space = step.child("add_prefix_space").as_bool();
      // HF's default for files written before use_regex existed.
      spec.byte_level.use_regex = step.has("use_regex") ? step.child("use_regex").as_bool() : true;
      byte_level_seen = true;
    } else {
      step.child("type").fail("pre-tokenizer " + in_quotes(type) + " is not supported", fix);
    }
  }
  if (!byte_level_seen) node.fail("no ByteLevel pre-tokenizer", fix);
}

void parse_decoder(const Node& node) {
  const std::string fix = "byte-level BPE decodes with {\"type\": \"ByteLevel\", ...}";
  if (node.is_null()) node.fail("no decoder (HF would join the tokens with spaces)", fix);
  const std::string type = node_type(node);
  if (type != "ByteLevel")
    node.child("type").fail("decoder " + in_quotes(type) + " is not supported", fix);
  parse_byte_level_fields(node);
}

// A TemplateProcessing that adds no ids: "single" is exactly the sequence $A, "pair" only
// sequences, no special tokens. transformers >= 5 writes one when a tokenizer had no
// post-processor; anything that adds ids (BOS/EOS templates) is refused.
bool is_identity_template(const Node& node) {
  node.allow_keys({"type", "single", "pair", "special_tokens"});
  const auto only_sequences = [](const json& items, size_t expected) {
    if (!items.is_array() || items.size() != expected) return false;
    for (const json& item : items) {
      if (!item.is_object() || item.size() != 1 || !item.contains("Sequence")) return false;
    }
    return true;
  };
  const json& v = node.value();
  const bool single_is_a = only_sequences(v.value("single", json()), 1) &&
                           v["single"][0]["Sequence"].value("id", "") == "A";
  const bool pair_ok = !v.contains("pair") || only_sequences(v["pair"], 2);
  const bool no_special = !v.contains("special_tokens") ||
                          (v["special_tokens"].is_object() && v["special_tokens"].empty());
  return single_is_a && pair_ok && no_special;
}

void parse_post_processor(const Node& node) {
  if (node.is_null()) return;
  const std::string type = node_type(node);
  const std::string fix = "use null, ByteLevel (offsets only) or a TemplateProcessing that adds no ids";
  if (type == "ByteLevel") {
    parse_byte_level_fields(node);
  } else if (type == "TemplateProcessing") {
    if (!is_identity_template(node)) node.fail("this TemplateProcessing adds ids, which is not supported", fix);
  } else if (type == "Sequence") {
    node.allow_keys({"type", "processors"});
    const Node list = node.child("processors");
    list.expect_array();
    for (size_t i = 0; i < list.value().size(); ++i) parse_post_processor(list.element(i));
  } else {
    node.child("type").fail("post_processor " + in_quotes(type) + " is not supported (it may add ids)", fix);
  }
}

void parse_vocab(const Node& node, TokenizerSpec& spec) {
  node.expect_object();
  std::unordered_map<int64_t, std::string> owner;
  spec.vocab.reserve(node.value().size());
  owner.reserve(node.value().size());
  for (auto it = node.value().begin(); it != node.value().end(); ++it) {
    const Node entry = node.child_at_key(it.key());
    const int64_t id = entry.as_id();
    auto [where, inserted] = owner.emplace(id, it.key());
    if (!inserted) {
      entry.fail("id " + std::to_string(id) + " is also the id of " + in_quotes(where->second),
                 "every token needs its own id");
    }
    spec.vocab.emplace(it.key(), id);
  }
  for (int b = 0; b < 256; ++b) {
    const std::string spelled = byte_level_encode(std::string(1, static_cast<char>(b)));
    if (spec.vocab.count(spelled) == 0) {
      char hex[8];
      std::snprintf(hex, sizeof(hex), "0x%02X", b);
      node.fail(std::string("no token for byte ") + hex + " (" + in_quotes(spelled) +
                    "): a byte-level BPE needs one for each of the 256 bytes, else text with "
                    "that byte has no tokenization",
                "use a complete vocabulary (HF trainers: initial_alphabet=ByteLevel.alphabet())");
    }
  }
}

void parse_merges(const Node& node, TokenizerSpec& spec) {
  node.expect_array();
  spec.merges.reserve(node.value().size());
  for (size_t i = 0; i < node.value().size(); ++i) {
    const Node entry = node.element(i);
    std::string left, right;
    if (entry.value().is_string()) {
      const std::string line = entry.as_string();
      const size_t space = line.find(' ');
      if (space == std::string::npos || line.find(' ', space + 1) != std::string::npos) {
        entry.fail("expected \"left right\" (two tokens and one space), found " + in_quotes(line));
      }
      left = line.substr(0, space);
      right = line.substr(space + 1);
    } else if (entry.value().is_array() && entry.value().size() == 2) {
      left = entry.element(0).as_string();
      right = entry.element(1).as_string();
    } else {
      entry.fail("expected \"left right\" or [\"left\", \"right\"], found " +
                 json_type_name(entry.value()));
    }
    auto find = [&](const std::string& token) {
      auto it = spec.vocab.find(token);
      if (it == spec.vocab.end())
        entry.fail("token " + in_quotes(token) + " is not in $.model.vocab");
      return it->second;
    };
    spec.merges.push_back(BpeMerge{find(left), find(right), find(left + right)});
  }
}

void parse_model(const Node& node, TokenizerSpec& spec) {
  node.expect_object();
  const Node type = node.child("type");
  if (type.as_string() != "BPE") {
    type.fail("model type " + in_quotes(type.as_string()) + " is not supported",
              "this reader implements byte-level BPE (\"BPE\"), the model of Qwen2 and GPT-2");
  }
  node.allow_keys({"type", "dropout", "unk_token", "continuing_subword_prefix",
                   "end_of_word_suffix", "fuse_unk", "byte_fallback", "ignore_merges", "vocab",
                   "merges"});
  if (node.has("dropout") && !node.child("dropout").is_null()) {
    node.child("dropout").fail("BPE dropout (random merges) is not supported", "set it to null");
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (node.has(key) && !node.child(key).is_null() && !node.child(key).as_string().empty()) {
      node.child(key).fail("a non-empty value is not supported (byte-level BPE uses none)",
                           "set it to null");
    }
  }
  if (node.has("unk_token") && !node.child("unk_token").is_null())
    node.child("unk_token").as_string();
  if (node.has("fuse_unk")) node.child("fuse_unk").as_bool();
  if (node.has("byte_fallback")) node.child("byte_fallback").as_bool();
  if (node.has("ignore_merges")) spec.ignore_merges = node.child("ignore_merges").as_bool();
  parse_vocab(node.child("vocab"), spec);
  parse_merges(node.child("merges"), spec);
}

void parse_added_tokens(const Node& node, TokenizerSpec& spec) {
  node.expect_array();
  std::unordered_map<std::string, int64_t> by_content;
  std::unordered_map<int64_t, std::string> by_id;
  std::unordered_map<int64_t, std::string> vocab_by_id;
  for (const auto& [token, id] : spec.vocab) vocab_by_id.emplace(id, token);
  for (size_t i = 0; i < node.value().size(); ++i) {
    const Node entry = node.element(i);
    entry.allow_keys({"id", "content", "single_word", "lstrip", "rstrip", "normalized", "special"});
    AddedToken token;
    token.id = entry.child("id").as_id();
    token.content = entry.child("content").as_string();
    token.single_word = entry.child("single_word").as_bool();
    token.lstrip = entry.child("lstrip").as_bool();
    token.rstrip = entry.child("rstrip").as_bool();
    token.normalized = entry.child("normalized").as_bool();
    token.special = entry.child("special").as_bool();
    if (token.content.empty()) entry.child("content").fail("an added token cannot be empty");
    if (!by_content.emplace(token.content, token.id).second) {
      entry.child("content").fail(in_quotes(token.content) + " is listed twice");
    }
    if (!by_id.emplace(token.id, token.content).second) {
      entry.child("id").fail("id " + std::to_string(token.id) + " is also the id of added token " +
                             in_quotes(by_id[token.id]));
    }
    // HF gives a token already in the vocabulary the vocabulary's id (and only warns
    // when the file says otherwise); a disagreement means a broken file.
    auto in_vocab = spec.vocab.find(token.content);
    if (in_vocab != spec.vocab.end() && in_vocab->second != token.id) {
      entry.child("id").fail("the vocabulary gives " + in_quotes(token.content) + " id " +
                             std::to_string(in_vocab->second));
    }
    auto id_owner = vocab_by_id.find(token.id);
    if (id_owner != vocab_by_id.end() && id_owner->second != token.content) {
      entry.child("id").fail("id " + std::to_string(token.id) + " belongs to vocabulary token " +
                             in_quotes(id_owner->second));
    }
    spec.added_tokens.push_back(std::move(token));
  }
}

}  // namespace

TokenizerSpec parse_tokenizer_json(const json& root_value, const std::string& file) {
  const Node root(root_value, "$", file);
  root.allow_keys({"version", "truncation", "padding", "added_tokens", "normalizer",
                   "pre_tokenizer", "post_processor", "decoder", "model"});
  if (root.has("version") && root.child("version").as_string() != "1.0") {
    root.child("version").fail("version " + in_quotes(root.child("version").as_string()) +
                               " is not supported (this reader knows \"1.0\")");
  }
  for (const char* key : {"truncation", "padding"}) {
    if (root.has(key) && !root.child(key).is_null()) {
      root.child(key).fail("is not supported: it changes the ids encode() returns",
                           "set it to null");
    }
  }
  TokenizerSpec spec;
  parse_model(root.child("model"), spec);
  if (root.has("normalizer")) parse_normalizer(root.child("normalizer"), spec);
  parse_pre_tokenizer(root.child("pre_tokenizer"), spec);
  if (root.has("post_processor")) parse_post_processor(root.child("post_processor"));
  parse_decoder(root.child("decoder"));
  if (root.has("added_tokens")) parse_added_tokens(root.child("added_tokens"), spec);
  return spec;
}

}  // namespace sb
