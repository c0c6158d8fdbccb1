#pragma once
// The GPU ring tests' cases, inputs, oracles and tolerances (docs/context_parallel.md,
// "On GPUs"): shared by the composed-steps and one-rank tests
// (test_ring_attention_cuda.cpp) and the ring over processes
// (test_ring_attention_processes_cuda.cpp).

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "kernels/attention/patterns/moba/moba_attention.h"
#include "kernels/attention/ring/cp_sharding.h"
#include "kernels/attention/ring/ring_attention.h"
#include "kernels/attention/patterns/vertical_slash/vertical_slash_budget.h"
#include "kernels/attention/patterns/vertical_slash/vertical_slash_index.h"
#include "tests/support/ring_attention_cases.h"
#include "kernels/attention/patterns/dense/dense_ring_selector.h"
#include "kernels/attention/patterns/moba/moba_ring_selector.h"
#include "kernels/attention/patterns/vertical_slash/vertical_slash_ring_selector.h"

namespace sb::test {

inline constexpr int64_t kBlock = 64;

enum class Pattern { kDense, kMoba, kVerticalSlash };

struct GpuRingCase {
  std::string name;
  CpLayout layout;
  int64_t cp = 2, inner = 0;
  Pattern pattern = Pattern::kDense;
  int64_t q_heads = 4, kv_heads = 2, dim = 64;
  at::ScalarType dtype = at::kBFloat16;
  bool dst = false;  // vertical-slash under gpu_vertical_slash_dst_request()
};

inline double relative_error(const at::Tensor& got, const at::Tensor& expected) {
  const at::Tensor a = got.cpu().to(at::kDouble), b = expected.to(at::kDouble);
  return (a - b).norm().item<double>() / std::max(b.norm().item<double>(), 1e-300);
}

inline double max_abs(const at::Tensor& got, const at::Tensor& expected) {
  const at::Tensor a = got.cpu().to(at::kDouble), b = expected.to(at::kDouble);
  const at::Tensor both_infinite = a.isinf().logical_and(b.isinf()).logical_and(a.eq(b));
  return at::where(both_infinite, at::zeros_like(a), a - b).abs().max().item<double>();
}

struct Gradients {
  at::Tensor out, lse, dq, dk, dv;
};

inline RingInputs gpu_ring_inputs(const GpuRingCase& c, const std::vector<int64_t>& lengths) {
  int64_t tokens = 0;
  for (int64_t n : lengths) tokens += n;
  at::manual_seed(5);
  RingInputs in;
  in.lengths = lengths;
  in.q = at::randn({tokens, c.q_heads, c.dim}, at::kDouble).to(c.dtype);
  in.k = at::randn({tokens, c.kv_heads, c.dim}, at::kDouble).to(c.dtype);
  in.v = at::randn({tokens, c.kv_heads, c.dim}, at::kDouble).to(c.dtype);
  in.grad_out = at::randn({tokens, c.q_heads, c.dim}, at::kDouble).to(c.dtype);
  return in;
}

inline MobaParams gpu_moba_params(double scale) {
  MobaParams params;
  params.block_size = kBlock;
  params.top_k = {3};
  params.scale = scale;
  return params;
}

// Vertical-slash on the ring's 64-token blocks: 16 columns besides 8 sinks and 8 offsets
// besides a 16-offset window: far slashes add key blocks, most columns fall outside them.
inline VerticalSlashParams gpu_vertical_slash_params() {
  VerticalSlashParams params;
  params.budget = VerticalSlashBudget::kTopK;
  params.vertical_count = 16;
  params.slash_count = 8;
  params.sink_tokens = 8;
  params.local_window = 16;
  params.block_size = kBlock;
  return params;
}

using VerticalSlashIndex = std::vector<std::vector<VerticalSlashHeadIndex>>;

// DST's request for sequences of 700, 333, 64 and 5 tokens: kept keys per query (the third
// sequence runs the params' rule) and a coverage floor.
inline VerticalSlashBudgetRequest gpu_vertical_slash_dst_request() { return {{160, 96, 0, 4}, 0.8}; }

// The one-rank vertical-slash rule on the inputs' float64 values (under the case's DST
// request: the one-rank search's lists).
inline VerticalSlashIndex gpu_vertical_slash_rule(const RingInputs& in, double scale, const GpuRingCase& c = {}) {
  const PackedSequences sequences = PackedSequences::from_lengths(in.lengths);
  const at::Tensor q = in.q.to(at::kDouble), k = in.k.to(at::kDouble);
  if (c.dst) {
    return vertical_slash_budgeted_index(q, k, sequences, gpu_vertical_slash_params(), scale,
                                         gpu_vertical_slash_dst_request())
        .index;
  }
  return vertical_slash_index(q, k, sequences, gpu_vertical_slash_params(), scale);
}

// The case's float64 oracle (vertical-slash: with `index`).
inline RingOracle gpu_ring_oracle(const RingInputs& in, const GpuRingCase& c, double scale,
                                 const VerticalSlashIndex& index) {
  if (c.pattern != Pattern::kVerticalSlash) {
    return ring_oracle(in, c.pattern == Pattern::kMoba, gpu_moba_params(scale), scale);
  }
  return ring_vertical_slash_oracle(in, index, scale);
}

// The pattern ring_attention runs for the case, in the ring's blocks of kBlock.
inline std::shared_ptr<RingPatternSelector> gpu_ring_selector(const GpuRingCase& c) {
  if (c.pattern == Pattern::kVerticalSlash) return std::make_shared<VerticalSlashRingSelector>(gpu_vertical_slash_params());
  if (c.pattern == Pattern::kMoba) return std::make_shared<MobaRingSelector>(kBlock, gpu_moba_params(1.0).top_k.front());
  return std::make_shared<DenseRingSelector>(kBlock);
}

// The case's budget request (vertical-slash with DST: gpu_vertical_slash_dst_request).
inline AttentionBudgetRequest gpu_ring_request(const GpuRingCase& c) {
  AttentionBudgetRequest request;
  if (c.dst) {
    const VerticalSlashBudgetRequest dst = gpu_vertical_slash_dst_request();
    request.top_k = dst.kept_keys;
    request.coverage_floor_ratio = dst.coverage_floor_ratio;
  }
  return request;
}

// bf16 / fp16 inputs through the fused kernels (P and dS rounded for their products),
// merged in float32: the one-GPU fused kernels' tolerances.
inline void expect_near_oracle(const Gradients& got, const RingOracle& oracle, at::ScalarType dtype) {
  const bool bf16 = dtype == at::kBFloat16;
  const double tolerance = bf16 ? 3e-2 : 4e-3, relative = bf16 ? 1.5e-2 : 2e-3;
  EXPECT_LT(max_abs(got.out, oracle.out), tolerance) << "out";
  EXPECT_LT(max_abs(got.lse, oracle.lse), 1e-2) << "lse";
  EXPECT_LT(max_abs(got.dq, oracle.dq), 4 * tolerance) << "dq";
  EXPECT_LT(max_abs(got.dk, oracle.dk), 4 * tolerance) << "dk";
  EXPECT_LT(max_abs(got.dv, oracle.dv), 4 * tolerance) << "dv";
  EXPECT_LT(relative_error(got.out, oracle.out), relative) << "out";
  EXPECT_LT(relative_error(got.dq, oracle.dq), 2 * relative) << "dq";
  EXPECT_LT(relative_error(got.dk, oracle.dk), 2 * relative) << "dk";
  EXPECT_LT(relative_error(got.dv, oracle.dv), 2 * relative) << "dv";
}

}  // namespace sb::test
