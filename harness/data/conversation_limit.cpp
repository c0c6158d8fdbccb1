#include "harness/data/conversation_limit.h"

#include "common/errors.h"

namespace sb {

ConversationLimit ConversationLimit::of(const DatasetLimits& limits, const std::string& too_long_key) {
  const std::string rule = "set " + too_long_key + " to \"skip\" or \"truncate\"";
  ConversationLimit limit;
  if (limits.max_positions > 0 && limits.max_positions < limits.max_tokens) {
    limit.max_tokens = limits.max_positions;
    limit.what = "the model's " + std::to_string(limit.max_tokens) + " positions";
    limit.fix = "use a model with more positions (YaRN rope_scaling), or " + rule;
  } else {
    limit.max_tokens = limits.max_tokens;
    limit.what = "train.max_tokens_per_microbatch = " + std::to_string(limit.max_tokens);
    limit.fix = "raise max_tokens_per_microbatch, or " + rule;
  }
  return limit;
}

LimitVerdict apply_conversation_limit(const ConversationLimit& limit, TooLongRule rule, int64_t length,
                                      const std::string& where) {
  if (length <= limit.max_tokens) return LimitVerdict::kKeep;
  switch (rule) {
    case TooLongRule::kError:
      throw ConfigError(where, "",
                        "the conversation has " + std::to_string(length) + " tokens, more than " + limit.what,
                        limit.fix);
    case TooLongRule::kSkip:
      return LimitVerdict::kSkip;
    case TooLongRule::kTruncate:
      return LimitVerdict::kTruncate;
  }
  return LimitVerdict::kKeep;
}

}  // namespace sb
