#pragma once
// How long an SFT conversation may be, and what happens to one that is longer
// (data.jsonl.too_long / data.tokenized.too_long): it must fit a micro-batch and the
// model's positions; the tighter of the two binds, and errors say which one it is.

#include <cstdint>
#include <string>

#include "harness/data/data_spec.h"
#include "harness/data/dataset.h"

namespace sb {

struct ConversationLimit {
  int64_t max_tokens = 0;
  std::string what;  // "the model's 32768 positions" | "train.max_tokens_per_microbatch = 4096"
  std::string fix;   // how to make a too-long conversation fit, for error messages

  static ConversationLimit of(const DatasetLimits& limits, const std::string& too_long_key);
};

// What becomes of one conversation of `length` tokens.
enum class LimitVerdict { kKeep, kSkip, kTruncate };

// kKeep when it fits; otherwise the rule's verdict, or a ConfigError naming `where` (the
// file and line of the conversation) when the rule is kError.
LimitVerdict apply_conversation_limit(const ConversationLimit& limit, TooLongRule rule, int64_t length,
                                      const std::string& where);

}  // namespace sb
