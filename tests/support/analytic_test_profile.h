#pragma once
// A latency profile with a known closed form, for tests of the predictor and of the
// policies that use it:
//   rest(L)      = 0.01 * L                      (ms; linear in tokens)
//   attention(L, k) = 1e-5 * L * min(k * B, L)   (each query reads min(kB, L) keys)
//   layer(L, k)  = rest(L) + attention(L, k)
//   head(L)      = 0.002 * L
// on the grid seq_lens x budgets with block size B.

#include <algorithm>
#include <cstdint>
#include <vector>

#include "harness/latency/latency_profile.h"

namespace sb::test {

inline double analytic_rest_ms(int64_t length) { return 0.01 * static_cast<double>(length); }
inline double analytic_attention_ms(int64_t length, int64_t budget, int64_t block) {
  return 1e-5 * static_cast<double>(length) * static_cast<double>(std::min(budget * block, length));
}

inline LatencyProfile analytic_test_profile(std::vector<int64_t> seq_lens, std::vector<int64_t> budgets,
                                            int64_t block) {
  LatencyProfile p;
  p.kind = "analytic";
  p.attention = "moba";
  p.attention_fields["block_size"] = block;
  p.seq_lens = seq_lens;
  p.budgets = budgets;
  for (int64_t length : seq_lens) {
    std::vector<LatencyStat> row;
    for (int64_t k : budgets) {
      row.push_back(LatencyStat{analytic_rest_ms(length) + analytic_attention_ms(length, k, block), 0, {}});
    }
    p.layer_ms.push_back(row);
    p.rest_ms.push_back(LatencyStat{analytic_rest_ms(length), 0, {}});
    p.head_ms.push_back(LatencyStat{0.002 * static_cast<double>(length), 0, {}});
  }
  return p;
}

}  // namespace sb::test
