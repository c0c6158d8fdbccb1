#include "harness/data/jsonl_sft_dataset.h"

#include <ATen/Parallel.h>
#include <nlohmann/json.hpp>


#include "common/errors.h"
#include "harness/common/atomic_file.h"
#include "harness/common/jsonl_file.h"
#include "harness/data/conversation_limit.h"
#include "models/tokenizer/chat_template.h"
#include "models/tokenizer/tokenizer.h"

namespace sb {
namespace {

// Reads one line's conversation; ConfigError naming `where` (file:line) otherwise.
std::vector<ChatMessage> parse_conversation(const std::string& text, const std::string& where) {
  const nlohmann::json line = parse_jsonl_line(text, where, "fix or remove that line");
  if (!line.is_object() || !line.contains("messages") || !line["messages"].is_array()) {
    throw ConfigError(where, "$", "expected {\"messages\": [{\"role\": ..., \"content\": ...}, ...]}",
                      "write each conversation as a messages list");
  }
  std::vector<ChatMessage> messages;
  bool has_assistant = false;
  const auto& list = line["messages"];
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string path = "$.messages[" + std::to_string(i) + "]";
    const auto& m = list[i];
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string() || !m.contains("content") ||
        !m["content"].is_string()) {
      throw ConfigError(where, path, "expected {\"role\": string, \"content\": string}",
                        "give every message a role and a text content");
    }
    messages.push_back({m["role"].get<std::string>(), m["content"].get<std::string>()});
    has_assistant = has_assistant || messages.back().role == "assistant";
  }
  if (!has_assistant) {
    throw ConfigError(where, "$.messages", "has no assistant message, so nothing would be trained",
                      "add the assistant's answer or remove the line");
  }
  return messages;
}

}  // namespace

JsonlSftDataset::JsonlSftDataset(const JsonlDataSection& config, int64_t seed, const DatasetLimits& limits)
    : config_(config), order_(seed, config.shuffle) {
  const int64_t model_vocab = limits.vocab_size;
  const ConversationLimit limit = ConversationLimit::of(limits, "data.jsonl.too_long");
  Tokenizer tokenizer = Tokenizer::from_file(config_.tokenizer);
  if (tokenizer.vocab_size() > model_vocab) {
    throw ConfigError(config_.tokenizer, "",
                      "has ids up to " + std::to_string(tokenizer.vocab_size() - 1) + " but the model's vocabulary is " +
                          std::to_string(model_vocab),
                      "use the model's own tokenizer.json");
  }
  std::vector<std::string> lines, wheres;  // a line's text and "file:N"
  for_each_jsonl_line(config_.path, read_input_file(config_.path, "check data.jsonl.path"), [&](const std::string& line, const std::string& where) {
    lines.push_back(line);
    wheres.push_back(where);
  });
  if (lines.empty()) throw ConfigError(config_.path, "", "holds no conversations", "check data.jsonl.path");

  // Parse everything first (errors name the first bad line), then tokenize in parallel.
  std::vector<std::vector<ChatMessage>> conversations;
  for (size_t i = 0; i < lines.size(); ++i) {
    conversations.push_back(parse_conversation(lines[i], wheres[i]));
  }
  std::vector<ConversationTokens> encoded(conversations.size());
  at::parallel_for(0, static_cast<int64_t>(conversations.size()), 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      encoded[static_cast<size_t>(i)] = encode_chatml_conversation(tokenizer, conversations[static_cast<size_t>(i)]);
    }
  });

  for (size_t i = 0; i < encoded.size(); ++i) {
    ConversationTokens& c = encoded[i];
    const std::string& where = wheres[i];
    const LimitVerdict verdict =
        apply_conversation_limit(limit, config_.too_long, static_cast<int64_t>(c.ids.size()), where);
    if (verdict == LimitVerdict::kSkip) {
      ++skipped_;
      continue;
    }
    if (verdict == LimitVerdict::kTruncate) {
      c.ids.resize(static_cast<size_t>(limit.max_tokens));
      c.target.resize(static_cast<size_t>(limit.max_tokens));
      ++truncated_;
    }
    bool trains = false;
    for (size_t t = 1; t < c.target.size(); ++t) trains = trains || c.target[t] != 0;
    if (!trains) {
      ++skipped_;  // only possible after truncation cut every assistant turn
      continue;
    }
    max_length_ = std::max<int64_t>(max_length_, static_cast<int64_t>(c.ids.size()));
    tokens_.emplace_back(c.ids.begin(), c.ids.end());
    targets_.push_back(std::move(c.target));
  }
  if (tokens_.empty()) {
    throw ConfigError(config_.path, "", "no conversation fits " + limit.what, limit.fix);
  }
}

Sample JsonlSftDataset::sample(int64_t id) const {
  if (id < 0) throw std::invalid_argument("JsonlSftDataset: negative sample id");
  const auto c = static_cast<size_t>(order_.conversation_of(id, size()));
  Sample s;
  s.id = id;
  s.tokens.assign(tokens_[c].begin(), tokens_[c].end());
  s.target_mask = targets_[c];
  return s;
}

SampleShape JsonlSftDataset::shape(int64_t id) const {
  if (id < 0) throw std::invalid_argument("JsonlSftDataset: negative sample id");
  const auto c = static_cast<size_t>(order_.conversation_of(id, size()));
  const auto length = static_cast<int64_t>(tokens_[c].size());
  return SampleShape{length, loss_tokens_in_mask(targets_[c].data(), length)};
}

std::string JsonlSftDataset::describe() const {
  return "JSONL SFT " + config_.path + ": " + std::to_string(size()) + " conversations (" +
         std::to_string(skipped_) + " skipped, " + std::to_string(truncated_) + " truncated), longest " +
         std::to_string(max_length_) + " tokens";
}

}  // namespace sb
