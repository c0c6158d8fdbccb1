#include "models/tokenizer/chat_template.h"

#include <stdexcept>

namespace sb {
namespace {

constexpr const char* kImStart = "<|im_start|>";
constexpr const char* kImEnd = "<|im_end|>";

void append_message(std::string& out, const std::string& role, const std::string& content) {
  out += kImStart;
  out += role;
  out += '\n';
  out += content;
  out += kImEnd;
  out += '\n';
}

void require_added_token(const Tokenizer& tokenizer, const char* token) {
  const std::optional<int64_t> id = tokenizer.find_token_id(token);
  if (!id || !tokenizer.is_added_token(*id)) {
    throw std::invalid_argument(tokenizer.source() + ": ChatML needs " + std::string(token) +
                                " as an added token, and this tokenizer has none");
  }
}

}  // namespace

std::string render_chatml(const std::vector<ChatMessage>& messages) {
  std::string out;
  for (const ChatMessage& message : messages) append_message(out, message.role, message.content);
  return out;
}

SftTokens encode_sft_chatml(const Tokenizer& tokenizer, const SftSample& sample) {
  require_added_token(tokenizer, kImStart);
  require_added_token(tokenizer, kImEnd);
  std::string prompt;
  if (sample.system) append_message(prompt, "system", *sample.system);
  append_message(prompt, "user", sample.user);
  prompt += kImStart;
  prompt += "assistant\n";
  const std::string response = sample.assistant + kImEnd;

  SftTokens tokens;
  tokens.ids = tokenizer.encode(prompt);
  tokens.response_start = tokens.ids.size();
  const std::vector<int64_t> response_ids = tokenizer.encode(response);
  tokens.ids.insert(tokens.ids.end(), response_ids.begin(), response_ids.end());
  return tokens;
}

ConversationTokens encode_chatml_conversation(const Tokenizer& tokenizer,
                                              const std::vector<ChatMessage>& messages) {
  require_added_token(tokenizer, kImStart);
  require_added_token(tokenizer, kImEnd);
  ConversationTokens out;
  const auto append = [&](const std::string& text, bool trained) {
    for (int64_t id : tokenizer.encode(text)) {
      out.ids.push_back(id);
      out.target.push_back(trained ? 1 : 0);
    }
  };
  for (const ChatMessage& message : messages) {
    append(std::string(kImStart) + message.role + "\n", false);
    append(message.content + kImEnd, message.role == "assistant");
    append("\n", false);
  }
  return out;
}

}  // namespace sb
