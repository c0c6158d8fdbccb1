#include "kernels/attention/core/packed_sequences.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace sb {

PackedSequences PackedSequences::from_lengths(const std::vector<int64_t>& lengths) {
  PackedSequences packed;
  packed.offsets.reserve(lengths.size() + 1);
  for (size_t i = 0; i < lengths.size(); ++i) {
    if (lengths[i] < 0) {
      throw std::invalid_argument("PackedSequences::from_lengths: sequence " + std::to_string(i) +
                                  " has negative length " + std::to_string(lengths[i]));
    }
    packed.offsets.push_back(packed.offsets.back() + lengths[i]);
  }
  return packed;
}

int64_t PackedSequences::max_length() const {
  int64_t longest = 0;
  for (int64_t i = 0; i < num_sequences(); ++i) longest = std::max(longest, length(i));
  return longest;
}

void PackedSequences::check(int64_t expected_total_tokens) const {
  if (offsets.empty() || offsets.front() != 0) {
    throw std::invalid_argument(
        "PackedSequences: offsets must start at 0 (got " +
        (offsets.empty() ? std::string("no offsets") : std::to_string(offsets.front())) + ")");
  }
  for (size_t i = 1; i < offsets.size(); ++i) {
    if (offsets[i] < offsets[i - 1]) {
      throw std::invalid_argument("PackedSequences: offsets decrease at index " +
                                  std::to_string(i) + " (" + std::to_string(offsets[i - 1]) +
                                  " -> " + std::to_string(offsets[i]) + ")");
    }
  }
  if (offsets.back() != expected_total_tokens) {
    throw std::invalid_argument("PackedSequences: offsets end at " +
                                std::to_string(offsets.back()) + " but the packed tensors hold " +
                                std::to_string(expected_total_tokens) + " tokens");
  }
}

}  // namespace sb
