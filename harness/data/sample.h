#pragma once
// One training sequence as token ids, and which of its tokens are trained on (SFT label
// masking). Two forms:
//   - target_mask empty: the first prompt_tokens tokens are the prompt, read but never
//     predicted; every later token is a target;
//   - target_mask set (one entry per token, 1 = target): any tokens may be targets, e.g.
//     every assistant turn of a multi-turn chat. Token 0 is never a target (nothing
//     predicts it).

#include <cstdint>
#include <vector>

namespace sb {

// The trained tokens of a sequence of `length` tokens whose first `prompt_tokens` are
// the prompt (token 0 is never a target, so a prompt of 0 still costs one).
inline int64_t loss_tokens_after_prompt(int64_t length, int64_t prompt_tokens) {
  return length - (prompt_tokens > 0 ? prompt_tokens : 1);
}

// The trained tokens of a sequence under a per-token target mask (token 0 never counts).
inline int64_t loss_tokens_in_mask(const uint8_t* mask, int64_t length) {
  int64_t n = 0;
  for (int64_t t = 1; t < length; ++t) n += mask[t] != 0 ? 1 : 0;
  return n;
}

struct Sample {
  int64_t id = 0;  // global sample index: iteration * global_batch_size + slot
  std::vector<int64_t> tokens;
  int64_t prompt_tokens = 0;
  std::vector<uint8_t> target_mask;

  int64_t length() const { return static_cast<int64_t>(tokens.size()); }
  // Whether token t (0 <= t < length) is predicted and carries loss.
  bool is_target(int64_t t) const {
    if (t <= 0) return false;
    return target_mask.empty() ? t >= prompt_tokens : target_mask[static_cast<size_t>(t)] != 0;
  }
  int64_t loss_tokens() const {
    return target_mask.empty() ? loss_tokens_after_prompt(length(), prompt_tokens)
                               : loss_tokens_in_mask(target_mask.data(), length());
  }
};

// What planning and the iteration record need of one sample: its length and trained
// tokens, without its token ids.
struct SampleShape {
  int64_t length = 0;
  int64_t loss_tokens = 0;
};

}  // namespace sb
