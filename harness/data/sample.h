#pragma once
// One training sequence as token ids. The first prompt_tokens tokens are the prompt:
// they are read but never predicted (SFT label masking), so the sample contributes
// tokens.size() - prompt_tokens predicted tokens to the loss.

#include <cstdint>
#include <vector>

namespace sb {

struct Sample {
  int64_t id = 0;  // global sample index: iteration * global_batch_size + slot
  std::vector<int64_t> tokens;
  int64_t prompt_tokens = 0;

  int64_t length() const { return static_cast<int64_t>(tokens.size()); }
  int64_t loss_tokens() const { return length() - prompt_tokens; }
};

}  // namespace sb
