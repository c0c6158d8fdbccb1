// Vertical-slash attention on CUDA (vertical_slash_attention_cuda.h: the pattern's slash
// blocks and verticals as two fused block-sparse calls, merged by log-sum-exp) against the
// float64 oracle that builds the pattern's mask densely (vertical_slash_reference) on the
// same rounded inputs: output, log-sum-exp and q/k/v gradients, for indexes chosen by top-p
// and top-k and given by hand, packed sequences (an empty and a one-token one), GQA 7:1, 2:1
// and 1:1, head_dim 64 and 128, blocks of 16, 64 and 100 tokens, bf16 and fp16. The backward
// repeats bit for bit; the index computed on a GPU equals the host's; the attention backend
// on a GPU equals the backend on the CPU, with and without DST's budget. Exits 77 without a GPU
// (cuda_test_main.cpp).

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>

#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/attention/core/packed_sequences.h"
#include "kernels/attention/patterns/vertical_slash/cuda/vertical_slash_attention_cuda.h"
#include "kernels/attention/patterns/vertical_slash/vertical_slash_backend.h"
#include "kernels/attention/patterns/vertical_slash/vertical_slash_block_sparse_plan.h"
#include "kernels/attention/patterns/vertical_slash/vertical_slash_index.h"
#include "kernels/attention/patterns/vertical_slash/vertical_slash_reference.h"
#include "tests/cpu/test_moba_support.h"
#include "tests/cpu/vertical_slash_index_cases.h"
#include "tests/support/tensor_compare.h"

namespace sb {
namespace {

struct CudaRun {
  at::Tensor out, lse, dq, dk, dv;
  int64_t kept_pairs = 0;
};

CudaRun run_cuda(const test::MobaInputs& in, const PackedSequences& sequences, const test::VerticalSlashIndex& index,
                 double scale) {
  at::Tensor q = in.q.cuda().requires_grad_(true), k = in.k.cuda().requires_grad_(true),
             v = in.v.cuda().requires_grad_(true);
  const VerticalSlashAttentionResult got = vertical_slash_attention_cuda(q, k, v, sequences, index, scale);
  const auto grads = torch::autograd::grad({got.out}, {q, k, v}, {in.grad_out.cuda()});
  return {got.out.detach().cpu(), got.lse.cpu(), grads[0].cpu(), grads[1].cpu(), grads[2].cpu(), got.kept_pairs};
}

struct VerticalSlashCudaCase {
  int64_t q_heads, kv_heads, dim, block;
};

TEST(VerticalSlashCuda, MatchesTheFloat64ReferenceForEveryIndexKind) {
  const std::vector<int64_t> lengths{300, 0, 1, 170, 65};
  const PackedSequences sequences = PackedSequences::from_lengths(lengths);
  int64_t seed = 3;
  for (const VerticalSlashCudaCase c : {VerticalSlashCudaCase{14, 2, 64, 64}, VerticalSlashCudaCase{4, 2, 128, 16},
                                        VerticalSlashCudaCase{4, 4, 64, 100}}) {
    const double scale = 1.0 / std::sqrt(static_cast<double>(c.dim));
    for (const at::ScalarType dtype : {at::kBFloat16, at::kHalf}) {
      const test::MobaInputs in = test::moba_random_inputs(lengths, lengths, c.q_heads, c.kv_heads, c.dim, dtype, ++seed);
      for (const auto& [name, index] :
           test::vertical_slash_index_cases(in.q.to(at::kDouble), in.k.to(at::kDouble), sequences, c.block, scale)) {
        SCOPED_TRACE(name + " " + std::to_string(c.q_heads) + "/" + std::to_string(c.kv_heads) + " heads, D " +
                     std::to_string(c.dim) + ", block " + std::to_string(c.block) + ", " + c10::toString(dtype));
        at::Tensor q = in.q.to(at::kDouble).requires_grad_(true), k = in.k.to(at::kDouble).requires_grad_(true),
                   v = in.v.to(at::kDouble).requires_grad_(true);
        const VerticalSlashReferenceResult ref = vertical_slash_reference(q, k, v, sequences, index, scale);
        const auto ref_grads = torch::autograd::grad({ref.out}, {q, k, v}, {in.grad_out.to(at::kDouble)});
        // The fixed index runs both calls: column 50 lies outside the slash blocks of the
        // 300-token sequence's later query blocks at every block size here. (The random
        // inputs' top-p and top-k lists may all fall inside slash blocks.)
        if (name == "fixed") {
          EXPECT_GT(vertical_slash_block_sparse_plan(sequences, index, c.q_heads, c.kv_heads).vertical_rows.numel(), 0);
        }
        const CudaRun got = run_cuda(in, sequences, index, scale);
        int64_t mask_pairs = 0;
        for (size_t s = 0; s < lengths.size(); ++s) {
          if (lengths[s] == 0) continue;
          for (const VerticalSlashHeadIndex& head : index[s]) {
            mask_pairs += vertical_slash_mask(head, lengths[s]).sum().item<int64_t>();
          }
        }
        EXPECT_EQ(got.kept_pairs, mask_pairs);
        // The fused kernels' rounding (bf16 / fp16 inputs, P and dS rounded for their
        // products) plus one more rounding of the merged output.
        const double tolerance = dtype == at::kBFloat16 ? 3e-2 : 4e-3;
        const double relative = dtype == at::kBFloat16 ? 1.5e-2 : 2e-3;
        EXPECT_LT(test::moba_max_abs_diff(got.out, ref.out), tolerance) << "out";
        EXPECT_LT(test::moba_max_abs_diff(got.dq, ref_grads[0]), 4 * tolerance) << "dq";
        EXPECT_LT(test::moba_max_abs_diff(got.dk, ref_grads[1]), 4 * tolerance) << "dk";
        EXPECT_LT(test::moba_max_abs_diff(got.dv, ref_grads[2]), 4 * tolerance) << "dv";
        EXPECT_LT(test::relative_norm_error(got.out, ref.out), relative) << "out";
        EXPECT_LT(test::relative_norm_error(got.dq, ref_grads[0]), 2 * relative) << "dq";
        EXPECT_LT(test::relative_norm_error(got.dk, ref_grads[1]), 2 * relative) << "dk";
        EXPECT_LT(test::relative_norm_error(got.dv, ref_grads[2]), 2 * relative) << "dv";
        EXPECT_LT((got.lse.to(at::kDouble) - ref.lse).abs().max().item<double>(), 1e-2) << "lse";
      }
    }
  }
}

TEST(VerticalSlashCuda, BackwardRepeatsBitForBit) {
  const std::vector<int64_t> lengths{700, 257};
  const PackedSequences sequences = PackedSequences::from_lengths(lengths);
  const test::MobaInputs in = test::moba_random_inputs(lengths, lengths, 14, 2, 64, at::kBFloat16, 21);
  const double scale = 0.125;
  const auto cases = test::vertical_slash_index_cases(in.q.to(at::kDouble), in.k.to(at::kDouble), sequences, 64, scale);
  const test::VerticalSlashIndex& index = cases.front().second;  // top-p: verticals shared across query blocks
  const CudaRun first = run_cuda(in, sequences, index, scale), second = run_cuda(in, sequences, index, scale);
  EXPECT_TRUE(at::equal(first.out, second.out));
  EXPECT_TRUE(at::equal(first.dq, second.dq));
  EXPECT_TRUE(at::equal(first.dk, second.dk));
  EXPECT_TRUE(at::equal(first.dv, second.dv));
}

// The index on a GPU (attention, sums, the lists' cut and coverage there) equals the
// index computed on the host from the same rounded values: the same lists, coverage to
// rounding, for top-p and top-k.
TEST(VerticalSlashCuda, TheIndexOnTheGpuEqualsTheHostIndex) {
  const std::vector<int64_t> lengths{600, 130, 1, 0, 257};
  const PackedSequences sequences = PackedSequences::from_lengths(lengths);
  const test::MobaInputs in = test::moba_random_inputs(lengths, lengths, 14, 2, 64, at::kBFloat16, 45);
  for (const VerticalSlashBudget budget : {VerticalSlashBudget::kTopP, VerticalSlashBudget::kTopK}) {
    VerticalSlashParams params = test::small_vertical_slash_params(64);
    params.budget = budget;
    const auto gpu = vertical_slash_index(in.q.cuda(), in.k.cuda(), sequences, params, 0.125);
    const auto cpu = vertical_slash_index(in.q, in.k, sequences, params, 0.125);
    ASSERT_EQ(gpu.size(), cpu.size());
    for (size_t s = 0; s < cpu.size(); ++s) {
      ASSERT_EQ(gpu[s].size(), cpu[s].size());
      for (size_t h = 0; h < cpu[s].size(); ++h) {
        EXPECT_EQ(gpu[s][h].verticals, cpu[s][h].verticals) << "sequence " << s << " head " << h;
        EXPECT_EQ(gpu[s][h].slashes, cpu[s][h].slashes) << "sequence " << s << " head " << h;
        EXPECT_NEAR(gpu[s][h].coverage, cpu[s][h].coverage, 1e-12);
      }
    }
  }
}

// The backend on a GPU computes its index there (the last queries' attention in float64 on
// the device) and attends with the fused kernels; on the CPU in float32 from the same
// rounded values: the same lists (statistics equal) and outputs within bf16 rounding.
TEST(VerticalSlashCuda, TheBackendOnTheGpuEqualsTheBackendOnTheCpu) {
  const std::vector<int64_t> lengths{600, 130};
  const PackedSequences sequences = PackedSequences::from_lengths(lengths);
  const test::MobaInputs in = test::moba_random_inputs(lengths, lengths, 14, 2, 64, at::kBFloat16, 33);
  const double scale = 0.125;
  VerticalSlashParams params = test::small_vertical_slash_params(64);
  params.p = 0.9;
  VerticalSlashAttention gpu(params), cpu(params);
  AttentionBudgetRequest budget;
  budget.top_k = {40, 25};
  budget.coverage_floor_ratio = 0.6;
  for (const bool budgeted : {false, true}) {
    SCOPED_TRACE(budgeted ? "DST's budget and floor" : "the params' rule");
    if (budgeted) {
      gpu.set_budget_request(budget);
      cpu.set_budget_request(budget);
    }
    const at::Tensor out_gpu = gpu.forward(in.q.cuda(), in.k.cuda(), in.v.cuda(), sequences, scale, 0).cpu();
    const at::Tensor out_cpu =
        cpu.forward(in.q.to(at::kFloat), in.k.to(at::kFloat), in.v.to(at::kFloat), sequences, scale, 0);
    EXPECT_LT(test::moba_max_abs_diff(out_gpu, out_cpu), 3e-2);
    const auto stats_gpu = gpu.take_layer_stats(), stats_cpu = cpu.take_layer_stats();
    ASSERT_EQ(stats_gpu.size(), 1u);
    ASSERT_EQ(stats_cpu.size(), 1u);
    EXPECT_EQ(stats_gpu[0].top_k, stats_cpu[0].top_k);
    EXPECT_EQ(stats_gpu[0].reference_top_k, stats_cpu[0].reference_top_k);
    EXPECT_EQ(stats_gpu[0].k_floor, stats_cpu[0].k_floor);
    EXPECT_NEAR(stats_gpu[0].coverage_mean, stats_cpu[0].coverage_mean, 1e-9);
  }
}

}  // namespace
}  // namespace sb
