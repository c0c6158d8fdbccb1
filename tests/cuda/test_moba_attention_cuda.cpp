// MoBA on CUDA (device routing, varlen flash-attention, log-sum-exp merge) against the
// CPU implementation and the float64 oracle: routing identical to the CPU routing,
// output and q/k/v gradients within bfloat16 / float16 rounding of the oracle, over
// packed sequences, partial blocks, GQA 7:1 and 8:1, budgets from 1 to dense, the DST
// floor, and decoding through the backend; MoBA's per-token gate likewise. Exits 77
// without a GPU (cuda_test_main.cpp).

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "kernels/attention/core/attention_backend.h"
#include "kernels/attention/patterns/moba/moba_attention.h"
#include "kernels/attention/patterns/moba/moba_key_blocks.h"
#include "kernels/attention/core/block_layout.h"
#include "kernels/attention/patterns/moba/moba_reference.h"
#include "kernels/attention/patterns/moba/moba_varlen_attention.h"
#include "tests/cpu/test_moba_support.h"
#include "kernels/attention/patterns/moba/moba_pattern.h"

namespace sb {
namespace {

struct CudaCase {
  std::string name;
  std::vector<int64_t> lengths;
  int64_t block_size;
  std::vector<int64_t> top_k;
  int64_t q_heads, kv_heads, head_dim;
};

std::vector<CudaCase> cuda_cases() {
  return {
      {"packed_partial_blocks", {300, 17, 129}, 64, {3}, 4, 2, 64},
      {"gqa_7_to_1", {512}, 64, {4}, 14, 2, 64},
      {"gqa_8_to_1", {700, 64}, 128, {2}, 16, 2, 128},
      {"diagonal_only", {256}, 32, {1}, 2, 1, 64},
      {"dense_budget", {200, 90}, 32, {100}, 4, 2, 64},
      {"budget_per_sequence", {256, 256}, 32, {2, 5}, 4, 1, 32},
  };
}

// Both CUDA attention paths: "auto" runs the fused kernels where they apply (head_dim 64
// and 128 here) and flash-attention varlen elsewhere; "flash_varlen" always the latter.
class MobaCudaTest
    : public ::testing::TestWithParam<std::tuple<CudaCase, at::ScalarType, MobaCudaKernel>> {};

TEST_P(MobaCudaTest, MatchesTheReferenceAndTheCpuRouting) {
  const auto& [c, dtype, kernel] = GetParam();
  const auto packed = PackedSequences::from_lengths(c.lengths);
  int64_t tokens = 0;
  for (int64_t n : c.lengths) tokens += n;
  MobaParams params;
  params.block_size = c.block_size;
  params.top_k = c.top_k;
  params.scale = 1.0 / std::sqrt(static_cast<double>(c.head_dim));
  params.cuda_kernel = kernel;
  at::manual_seed(7);
  const at::Tensor q = at::randn({tokens, c.q_heads, c.head_dim}, at::kDouble).to(dtype);
  const at::Tensor k = at::randn({tokens, c.kv_heads, c.head_dim}, at::kDouble).to(dtype);
  const at::Tensor v = at::randn({tokens, c.kv_heads, c.head_dim}, at::kDouble).to(dtype);
  const at::Tensor grad_out = at::randn({tokens, c.q_heads, c.head_dim}, at::kDouble).to(dtype);

  at::Tensor qc = q.cuda().requires_grad_(true), kc = k.cuda().requires_grad_(true);
  at::Tensor vc = v.cuda().requires_grad_(true);
  const MobaResult gpu = moba_attention(qc, kc, vc, packed, params);
  (gpu.out * grad_out.cuda()).sum().backward();
  ASSERT_EQ(gpu.out.scalar_type(), dtype);
  ASSERT_TRUE(gpu.out.is_cuda());

  // Routing: the same float64 gate as the CPU's.
  const BlockLayout layout = BlockLayout::build(packed, packed, c.block_size, true);
  const MobaRouting cpu = moba_route_cpu(q, k, layout, params);
  EXPECT_TRUE(at::equal(gpu.routing.selected.cpu(), cpu.selected));
  EXPECT_TRUE(at::equal(gpu.routing.selected_count.cpu(), cpu.selected_count));
  EXPECT_EQ(gpu.routing.top_k, cpu.top_k);
  for (size_t s = 0; s < cpu.coverage.size(); ++s) {
    EXPECT_NEAR(gpu.routing.coverage[s], cpu.coverage[s], 1e-9);
  }

  // Numerics against the float64 oracle on the same rounded inputs.
  at::Tensor qd = q.to(at::kDouble).requires_grad_(true), kd = k.to(at::kDouble).requires_grad_(true);
  at::Tensor vd = v.to(at::kDouble).requires_grad_(true);
  const MobaReferenceResult reference = moba_reference(qd, kd, vd, packed, packed, params);
  (reference.out * grad_out.to(at::kDouble)).sum().backward();
  // One rounding of outputs of magnitude ~1 to 8 (bf16) or 11 (fp16) bits, plus
  // flash-attention's low-precision P: bounds from the dense flash kernel's usual error.
  const double tolerance = dtype == at::kBFloat16 ? 3e-2 : 4e-3;
  EXPECT_LT(test::moba_max_abs_diff(gpu.out, reference.out), tolerance) << "forward";
  EXPECT_LT(test::moba_max_abs_diff(qc.grad(), qd.grad()), 4 * tolerance) << "dq";
  EXPECT_LT(test::moba_max_abs_diff(kc.grad(), kd.grad()), 4 * tolerance) << "dk";
  EXPECT_LT(test::moba_max_abs_diff(vc.grad(), vd.grad()), 4 * tolerance) << "dv";
  EXPECT_LT(test::moba_max_abs_diff(gpu.lse, reference.lse), 1e-2) << "lse";
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, MobaCudaTest,
    ::testing::Combine(::testing::ValuesIn(cuda_cases()), ::testing::Values(at::kBFloat16, at::kHalf),
                       ::testing::Values(MobaCudaKernel::kAuto, MobaCudaKernel::kFlashVarlen)),
    [](const auto& info) {
      return std::get<0>(info.param).name + "_" + std::string(c10::toString(std::get<1>(info.param))) +
             "_" + moba_cuda_kernel_options().name_of(std::get<2>(info.param));
    });

TEST(MobaCuda, CoverageFloorMatchesTheCpu) {
  const auto packed = PackedSequences::from_lengths({600, 260});
  MobaParams params;
  params.block_size = 32;
  params.top_k = {1, 2};
  params.scale = 0.125;
  params.coverage_floor_ratio = 0.9;
  params.coverage_reference_k = 8;
  at::manual_seed(3);
  const at::Tensor q = at::randn({860, 4, 64}).to(at::kBFloat16);
  const at::Tensor k = at::randn({860, 2, 64}).to(at::kBFloat16);
  const MobaResult gpu = moba_attention(q.cuda(), k.cuda(), k.cuda(), packed, params);
  const MobaRouting cpu =
      moba_route_cpu(q, k, BlockLayout::build(packed, packed, 32, true), params);
  EXPECT_EQ(gpu.routing.k_floor, cpu.k_floor);
  EXPECT_GT(cpu.k_floor, 2) << "the floor must move a budget for this test";
  EXPECT_EQ(gpu.routing.top_k, cpu.top_k);
  EXPECT_NEAR(gpu.routing.coverage_mean, cpu.coverage_mean, 1e-9);

  params.coverage_curve_up_to = 12;  // beyond the floor's reference: a longer curve
  const MobaResult gpu_curve = moba_attention(q.cuda(), k.cuda(), k.cuda(), packed, params);
  const MobaRouting cpu_curve =
      moba_route_cpu(q, k, BlockLayout::build(packed, packed, 32, true), params);
  ASSERT_EQ(cpu_curve.coverage_curve.size(), 12u);
  ASSERT_EQ(gpu_curve.routing.coverage_curve.size(), 12u);
  for (size_t i = 0; i < 12; ++i) {
    EXPECT_NEAR(gpu_curve.routing.coverage_curve[i], cpu_curve.coverage_curve[i], 1e-9) << "k " << i + 1;
  }
  EXPECT_EQ(gpu_curve.routing.k_floor, cpu.k_floor);
}

MobaParams test_params_for_blocks() {
  MobaParams params;
  params.block_size = 16;
  params.top_k = {4};
  params.scale = 0.125;
  return params;
}

TEST(MobaCuda, VarlenIndicesMatchTheHostBuilder) {
  const auto packed = PackedSequences::from_lengths({300, 77});
  const MobaParams params = test_params_for_blocks();
  at::manual_seed(5);
  const at::Tensor q = at::randn({377, 4, 32}), k = at::randn({377, 2, 32});
  const BlockLayout layout = BlockLayout::build(packed, packed, 16, true);
  const MobaRouting routing = moba_route_cpu(q, k, layout, params);
  MobaRouting on_gpu = routing;
  on_gpu.selected = routing.selected.cuda();
  on_gpu.selected_count = routing.selected_count.cuda();
  const MobaVarlenPlan host = moba_varlen_plan(layout, routing, 4, 2, 32, 2, 0.125, 1 << 16);
  const MobaVarlenPlan device = moba_varlen_plan(layout, on_gpu, 4, 2, 32, 2, 0.125, 1 << 16);
  ASSERT_EQ(host.chunks.size(), device.chunks.size());
  ASSERT_GT(host.chunks.size(), 1u);
  for (size_t c = 0; c < host.chunks.size(); ++c) {
    EXPECT_TRUE(at::equal(host.chunks[c].q_index, device.chunks[c].q_index.cpu())) << c;
    const MobaKeyBlocks &h = host.chunks[c].key_blocks, &d = device.chunks[c].key_blocks;
    EXPECT_TRUE(at::equal(h.entries, d.entries.cpu())) << c;
    const MobaKeyBlockRuns hr = moba_key_block_runs(h), dr = moba_key_block_runs(d);
    EXPECT_TRUE(at::equal(hr.order, dr.order.cpu())) << c;
    EXPECT_TRUE(at::equal(hr.runs, dr.runs.cpu())) << c;
    EXPECT_EQ(h.gathered_rows, d.gathered_rows) << c;
  }
}

MobaKeyBlocks on_cuda(const MobaKeyBlocks& keys) {
  MobaKeyBlocks out = keys;
  out.entries = keys.entries.cuda();
  return out;
}

TEST(MobaCuda, KeyBlockGatherAndGradientSumEqualTheCpuBitwise) {
  // Head dims whose key rows take each copy width (bf16 x 64 = 128 bytes, x 12 = 24,
  // float x 3 = 12, bf16 x 5 = 10) and an unaligned view; the gradient sums run in the
  // same order on both devices, so they agree bit for bit and repeat bit for bit.
  const auto packed = PackedSequences::from_lengths({300, 77, 150});
  at::manual_seed(9);
  for (const auto& [dim, dtype] : std::vector<std::pair<int64_t, at::ScalarType>>{
           {64, at::kBFloat16}, {12, at::kBFloat16}, {3, at::kFloat}, {5, at::kBFloat16}, {8, at::kHalf}}) {
    MobaParams params = test_params_for_blocks();
    const at::Tensor q = at::randn({527, 6, dim}), k = at::randn({527, 2, dim});
    const BlockLayout layout = BlockLayout::build(packed, packed, params.block_size, true);
    const MobaRouting routing = moba_route_cpu(q, k, layout, params);
    const MobaVarlenPlan plan =
        moba_varlen_plan(layout, routing, 6, 2, dim, 2, params.scale, /*bytes per chunk=*/1 << 14);
    ASSERT_GT(plan.chunks.size(), 1u);
    const at::Tensor k_typed = k.to(dtype);
    // A view one element into a device buffer: no copy width above the element survives
    // the misalignment.
    const at::Tensor storage = at::randn({k.numel() + 1}).to(dtype).cuda();
    const at::Tensor k_shifted = storage.narrow(0, 1, k.numel()).view(k.sizes());
    k_shifted.copy_(k_typed.cuda());
    at::Tensor dk_cpu = at::zeros(k.sizes(), at::kFloat), dk_gpu = dk_cpu.cuda(), dk_again = dk_gpu.clone();
    for (const MobaVarlenChunk& chunk : plan.chunks) {
      const MobaKeyBlocks device_keys = on_cuda(chunk.key_blocks);
      const at::Tensor expected = gather_key_blocks(k_typed, chunk.key_blocks);
      EXPECT_TRUE(at::equal(gather_key_blocks(k_typed.cuda(), device_keys).cpu(), expected)) << dim;
      EXPECT_TRUE(at::equal(gather_key_blocks(k_shifted, device_keys).cpu(), expected)) << dim;
      const at::Tensor grad = at::randn({chunk.key_blocks.gathered_rows, 1, dim}).to(dtype);
      const MobaKeyBlockRuns device_runs = moba_key_block_runs(device_keys);
      add_key_block_grads(dk_cpu, grad, chunk.key_blocks, moba_key_block_runs(chunk.key_blocks));
      add_key_block_grads(dk_gpu, grad.cuda(), device_keys, device_runs);
      add_key_block_grads(dk_again, grad.cuda(), device_keys, device_runs);
    }
    EXPECT_TRUE(at::equal(dk_gpu.cpu(), dk_cpu))
        << dim << " max diff " << test::moba_max_abs_diff(dk_gpu, dk_cpu);
    EXPECT_TRUE(at::equal(dk_gpu, dk_again)) << dim;
    EXPECT_GT(dk_cpu.abs().sum().item<double>(), 0.0);
  }
}

TEST(MobaCuda, ManyCopiesOfOnePartialBlockEqualTheCpuBitwise) {
  // 300 entries of one partial block: the gradient sum stages its rows in several
  // batches and leaves the tiles past the block's 8 keys idle.
  const MobaKeyBlocks blocks = test::many_copies_of_one_block();
  const MobaKeyBlocks device_keys = on_cuda(blocks);
  const at::Tensor k = at::randn({40, 2, 64}).to(at::kBFloat16);
  EXPECT_TRUE(at::equal(gather_key_blocks(k.cuda(), device_keys).cpu(), gather_key_blocks(k, blocks)));
  const at::Tensor grad = at::randn({blocks.gathered_rows, 1, 64}).to(at::kBFloat16);
  at::Tensor dk_cpu = at::randn({40, 2, 64}), dk_gpu = dk_cpu.cuda();
  add_key_block_grads(dk_cpu, grad, blocks, moba_key_block_runs(blocks));
  add_key_block_grads(dk_gpu, grad.cuda(), device_keys, moba_key_block_runs(device_keys));
  EXPECT_TRUE(at::equal(dk_gpu.cpu(), dk_cpu)) << test::moba_max_abs_diff(dk_gpu, dk_cpu);
}

// MoBA's own gate, per query token, on the device: the routing of the CPU (the same
// float64 scores and ranking rule) and the oracle's numerics, through flash-attention
// varlen over (head, key block) segments.
class MobaCudaTokenGateTest : public ::testing::TestWithParam<std::tuple<CudaCase, at::ScalarType>> {};

TEST_P(MobaCudaTokenGateTest, MatchesTheReferenceAndTheCpuRouting) {
  const auto& [c, dtype] = GetParam();
  const auto packed = PackedSequences::from_lengths(c.lengths);
  int64_t tokens = 0;
  for (int64_t n : c.lengths) tokens += n;
  const MobaParams params = test::moba_test_params(c.block_size, c.top_k,
                                                   1.0 / std::sqrt(static_cast<double>(c.head_dim)), MobaGate::kToken);
  const test::MobaInputs in = test::moba_random_inputs(c.lengths, c.lengths, c.q_heads, c.kv_heads, c.head_dim, dtype, 13);
  at::Tensor qc = in.q.cuda().requires_grad_(true), kc = in.k.cuda().requires_grad_(true);
  at::Tensor vc = in.v.cuda().requires_grad_(true);
  const MobaResult gpu = moba_attention(qc, kc, vc, packed, params);
  (gpu.out * in.grad_out.cuda()).sum().backward();
  ASSERT_TRUE(gpu.out.is_cuda());
  const MobaResult cpu = moba_attention(in.q.to(at::kFloat), in.k.to(at::kFloat), in.v.to(at::kFloat), packed, params);
  EXPECT_TRUE(at::equal(gpu.routing.selected.cpu(), cpu.routing.selected));
  EXPECT_EQ(gpu.routing.top_k, cpu.routing.top_k);
  for (size_t s = 0; s < cpu.routing.coverage.size(); ++s) {
    EXPECT_NEAR(gpu.routing.coverage[s], cpu.routing.coverage[s], 1e-9);
  }
  const test::MobaGrads expected = test::moba_run_with_grads(in, packed, packed, params, true);
  const double tolerance = dtype == at::kBFloat16 ? 3e-2 : 4e-3;
  EXPECT_LT(test::moba_max_abs_diff(gpu.out, expected.out), tolerance) << "forward";
  EXPECT_LT(test::moba_max_abs_diff(qc.grad(), expected.dq), 4 * tolerance) << "dq";
  EXPECT_LT(test::moba_max_abs_diff(kc.grad(), expected.dk), 4 * tolerance) << "dk";
  EXPECT_LT(test::moba_max_abs_diff(vc.grad(), expected.dv), 4 * tolerance) << "dv";
}

INSTANTIATE_TEST_SUITE_P(Shapes, MobaCudaTokenGateTest,
                         ::testing::Combine(::testing::ValuesIn(cuda_cases()),
                                            ::testing::Values(at::kBFloat16, at::kHalf)),
                         [](const auto& info) {
                           return std::get<0>(info.param).name + "_" +
                                  std::string(c10::toString(std::get<1>(info.param)));
                         });

TEST(MobaCuda, DecodingThroughTheBackendMatchesTheReference) {
  auto backend = moba_attention_options(64, 3).make_backend();
  at::manual_seed(11);
  for (const auto& [n, length] : std::vector<std::pair<int64_t, int64_t>>{{1, 300}, {7, 300}, {300, 300}}) {
    const at::Tensor q = at::randn({n, 8, 64}).to(at::kBFloat16);
    const at::Tensor k = at::randn({length, 2, 64}).to(at::kBFloat16);
    const at::Tensor v = at::randn({length, 2, 64}).to(at::kBFloat16);
    const at::Tensor out = backend->forward_cached(q.cuda(), k.cuda(), v.cuda(), 0.125);
    MobaParams params;
    params.block_size = 64;
    params.top_k = {3};
    params.scale = 0.125;
    const MobaReferenceResult reference =
        moba_reference(q, k, v, PackedSequences::from_lengths({n}),
                       PackedSequences::from_lengths({length}), params);
    EXPECT_LT(test::moba_max_abs_diff(out, reference.out), 3e-2) << "n " << n;
  }
}

TEST(MobaCuda, RejectsFloat32WithAClearMessage) {
  const at::Tensor q = at::randn({8, 2, 64}, at::kCUDA);
  try {
    MobaParams params;
    params.block_size = 4;
    params.scale = 0.1;
    moba_attention(q, q.narrow(1, 0, 1), q.narrow(1, 0, 1), PackedSequences::from_lengths({8}), params);
    ADD_FAILURE() << "no error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("bfloat16"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace sb
