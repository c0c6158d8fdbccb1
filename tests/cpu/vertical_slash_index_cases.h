#pragma once
// Indexes of the vertical-slash pattern for kernel tests: small lists (sinks 3, window 4,
// at most 20 verticals and 24 slashes, chosen from the last 16 queries), chosen online by
// top-p and by top-k from the given q and k, and a fixed one given by hand (verticals
// {0, 2, 50}, slashes {0, 1, 9}: vertical 50 lies past the end of short sequences).

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "kernels/attention/core/packed_sequences.h"
#include "kernels/attention/patterns/vertical_slash/vertical_slash_index.h"

namespace sb::test {

inline VerticalSlashParams small_vertical_slash_params(int64_t block_size) {
  VerticalSlashParams params;
  params.sink_tokens = 3;
  params.local_window = 4;
  params.vertical_count = 5;
  params.slash_count = 7;
  params.max_verticals = 20;
  params.max_slashes = 24;
  params.last_queries = 16;
  params.p = 0.8;
  params.block_size = block_size;
  return params;
}

using VerticalSlashIndex = std::vector<std::vector<VerticalSlashHeadIndex>>;

// ("top-p" | "top-k" | "fixed", index) for q [T, Hq, D], k [T, Hkv, D] packed by `sequences`.
inline std::vector<std::pair<std::string, VerticalSlashIndex>> vertical_slash_index_cases(
    const at::Tensor& q, const at::Tensor& k, const PackedSequences& sequences, int64_t block_size, double scale) {
  VerticalSlashParams params = small_vertical_slash_params(block_size);
  std::vector<std::pair<std::string, VerticalSlashIndex>> cases;
  params.budget = VerticalSlashBudget::kTopP;
  cases.emplace_back("top-p", vertical_slash_index(q, k, sequences, params, scale));
  params.budget = VerticalSlashBudget::kTopK;
  cases.emplace_back("top-k", vertical_slash_index(q, k, sequences, params, scale));
  cases.emplace_back("fixed", VerticalSlashIndex(static_cast<size_t>(sequences.num_sequences()),
                                                 std::vector<VerticalSlashHeadIndex>(
                                                     static_cast<size_t>(q.size(1)), {{0, 2, 50}, {0, 1, 9}, 1.0, block_size})));
  return cases;
}

}  // namespace sb::test
