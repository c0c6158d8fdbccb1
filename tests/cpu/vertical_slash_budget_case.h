#pragma once
// The packed inputs and pattern parameters the vertical-slash budget tests share
// (test_vertical_slash_budget.cpp, test_vertical_slash_sharded_budget.cpp).

#include <ATen/ATen.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "kernels/attention/core/packed_sequences.h"
#include "kernels/attention/patterns/vertical_slash/vertical_slash_index.h"

namespace sb::test {

inline constexpr int64_t kQueryHeads = 4, kKeyHeads = 2, kHeadDim = 8;
inline constexpr double kScale = 0.35;

// Several sequences packed (lengths ending inside a block of 4, one shorter than the
// forced entries, one empty), GQA 4:2, float64.
struct BudgetCase {
  std::vector<int64_t> lengths;
  PackedSequences sequences;
  at::Tensor q, k, v;
};

inline BudgetCase budget_case(uint64_t seed, std::vector<int64_t> lengths = {37, 61, 6, 0, 50}) {
  at::manual_seed(seed);
  BudgetCase c;
  c.lengths = std::move(lengths);
  c.sequences = PackedSequences::from_lengths(c.lengths);
  const auto opts = at::TensorOptions().dtype(at::kDouble);
  const int64_t tokens = c.sequences.total_tokens();
  // Sharper scores than N(0, 1) so that the lists are not all ties.
  c.q = at::randn({tokens, kQueryHeads, kHeadDim}, opts) * 2;
  c.k = at::randn({tokens, kKeyHeads, kHeadDim}, opts);
  c.v = at::randn({tokens, kKeyHeads, kHeadDim}, opts);
  return c;
}

// Blocks of 4 and lists capped at 30 entries: at these lengths a level moves the mask.
inline VerticalSlashParams budget_params(VerticalSlashBudget budget) {
  VerticalSlashParams p;
  p.budget = budget;
  p.p = 0.8;
  p.vertical_count = 6;
  p.slash_count = 8;
  p.sink_tokens = 3;
  p.local_window = 4;
  p.max_verticals = 30;
  p.max_slashes = 30;
  p.last_queries = 16;
  p.block_size = 4;
  return p;
}

}  // namespace sb::test
