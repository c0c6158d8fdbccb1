#pragma once
// Layout of a packed micro-batch: several sequences concatenated along the token axis.
// Tensors of a packed micro-batch are [T, ...] with T = sum of the sequence lengths;
// sequence i occupies tokens [offsets[i], offsets[i+1]). Attention never crosses a
// sequence boundary and positions restart at 0 in every sequence.

#include <cstdint>
#include <vector>

namespace sb {

struct PackedSequences {
  std::vector<int64_t> offsets{0};  // cu_seqlens on the host: size = num_sequences + 1

  static PackedSequences from_lengths(const std::vector<int64_t>& lengths);
  int64_t num_sequences() const { return static_cast<int64_t>(offsets.size()) - 1; }
  int64_t total_tokens() const { return offsets.back(); }
  int64_t length(int64_t i) const { return offsets[i + 1] - offsets[i]; }
  int64_t max_length() const;
  // Throws std::invalid_argument unless offsets start at 0, never decrease, and end
  // at expected_total_tokens.
  void check(int64_t expected_total_tokens) const;
};

}  // namespace sb
