#pragma once
// ChatML, the chat format of Qwen2/Qwen2.5 instruct models, for SFT samples:
//
//   <|im_start|>system\n{system}<|im_end|>\n        (only when a system prompt is given)
//   <|im_start|>user\n{user}<|im_end|>\n
//   <|im_start|>assistant\n{assistant}<|im_end|>
//
// Everything up to and including "<|im_start|>assistant\n" is the prompt (no loss);
// the response, whose tokens are trained on, is "{assistant}<|im_end|>": the model
// learns to answer and then to stop. No system prompt is added unless the sample has
// one (Qwen2.5's Jinja template would insert "You are Qwen, ..."; SFT data here says
// what it wants).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "models/tokenizer/tokenizer.h"

namespace sb {

struct ChatMessage {
  std::string role;  // "system", "user", "assistant", ...
  std::string content;
};

// "<|im_start|>{role}\n{content}<|im_end|>\n" for each message, in order.
std::string render_chatml(const std::vector<ChatMessage>& messages);

struct SftSample {
  std::optional<std::string> system;
  std::string user;
  std::string assistant;
};

struct SftTokens {
  std::vector<int64_t> ids;   // prompt ids, then response ids
  size_t response_start = 0;  // index in ids of the first response token
};

// The prompt "<system block?><user block><|im_start|>assistant\n" and the response
// "{assistant}<|im_end|>" are encoded separately and concatenated: the prompt's tokens
// are then exactly those a model sees at inference before it generates, and no token
// straddles the boundary (encoding the joined text could merge a response that starts
// with "\n" into the prompt's last newline).
// Throws std::invalid_argument when the tokenizer lacks "<|im_start|>" or "<|im_end|>"
// as added tokens (the markers would silently become ordinary text).
SftTokens encode_sft_chatml(const Tokenizer& tokenizer, const SftSample& sample);

// A whole conversation for SFT, every assistant turn trained:
//   for each message: "<|im_start|>{role}\n" (never trained), then "{content}<|im_end|>"
//   (trained when role == "assistant"), then "\n" (never trained).
// The three pieces are encoded separately (as encode_sft_chatml does), so token
// boundaries match what a model sees at inference. target[i] = 1 when ids[i] is
// trained. The same added-token requirements as encode_sft_chatml.
struct ConversationTokens {
  std::vector<int64_t> ids;
  std::vector<uint8_t> target;
};
ConversationTokens encode_chatml_conversation(const Tokenizer& tokenizer,
                                              const std::vector<ChatMessage>& messages);

}  // namespace sb
