// The fused block-sparse attention kernels (docs/block_sparse_attention.md) against two
// oracles on the same rounded inputs: a float64 dense attention masked by the routing
// (written here, plainly) and the CPU implementation of MoBA's attention
// (moba_attention_cpu in float64). Output, log-sum-exp and the q/k/v gradients, for
// random routings with empty rows, a single block and every block, packed sequences with
// partial blocks, blocks smaller than and not a multiple of the kernels' 64-row tiles,
// decoding layouts, a non-causal layout, GQA 7:1 and 4:2, head_dim 64 and 128, bf16 and
// fp16. Every block listed equals dense causal attention (checked against ATen's float64
// SDPA); the backward repeats bit for bit; every output element is written. Exits 77
// without a GPU (cuda_test_main.cpp).

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/attention/core/block_sparse_plan.h"
#include "kernels/attention/core/cuda/block_sparse_attention_cuda.h"
#include "kernels/attention/core/cuda/block_sparse_attention_kernels.h"
#include "kernels/attention/patterns/moba/moba_attention.h"
#include "kernels/attention/patterns/moba/moba_attention_cpu.h"
#include "kernels/attention/core/block_layout.h"
#include "tests/cpu/test_moba_support.h"
#include "tests/support/tensor_compare.h"

namespace sb {
namespace {

// kMobaShaped: the diagonal block and a random subset of the earlier ones (what MoBA's
// gate gives); kAnyBlocks: a random non-empty subset of the eligible blocks, the diagonal
// or not; kSomeEmpty: kAnyBlocks with a third of the rows empty.
enum class RoutingKind { kMobaShaped, kAnyBlocks, kEveryBlock, kOneBlock, kSomeEmpty };

struct FusedCase {
  std::string name;
  std::vector<int64_t> query_lengths, key_lengths;  // equal: training; else decoding
  int64_t block_size, q_heads, kv_heads, head_dim;
  RoutingKind routing = RoutingKind::kMobaShaped;
  bool causal = true;
};

std::vector<FusedCase> fused_cases() {
  return {
      {"varlen_gqa_7_to_1", {300, 17, 700}, {300, 17, 700}, 64, 14, 2, 64},
      {"gqa_4_to_2_dim128", {513, 200}, {513, 200}, 128, 4, 2, 128, RoutingKind::kAnyBlocks},
      {"block256_partial", {1000}, {1000}, 256, 7, 1, 64},
      {"blocks_smaller_than_a_tile", {200, 90}, {200, 90}, 16, 4, 2, 64, RoutingKind::kAnyBlocks},
      {"block_not_a_tile_multiple", {333}, {333}, 100, 4, 1, 128},
      {"every_block", {700, 129}, {700, 129}, 64, 8, 2, 64, RoutingKind::kEveryBlock},
      {"one_block", {400}, {400}, 64, 4, 2, 64, RoutingKind::kOneBlock},
      {"empty_rows", {400, 70}, {400, 70}, 32, 4, 2, 64, RoutingKind::kSomeEmpty},
      {"decoding", {7, 100}, {300, 260}, 64, 8, 2, 64},
      {"decoding_dim128", {1, 130}, {300, 130}, 64, 4, 1, 128, RoutingKind::kAnyBlocks},
      {"non_causal", {300, 150}, {300, 150}, 64, 4, 2, 64, RoutingKind::kAnyBlocks, false},
      // Hq == Hkv: dK/dV written directly, without the per-head shares summed afterwards.
      {"no_gqa", {300, 170}, {300, 170}, 64, 4, 4, 64, RoutingKind::kAnyBlocks},
      {"no_gqa_dim128", {257}, {257}, 128, 2, 2, 128},
  };
}

struct Routing {
  at::Tensor selected, count;  // int32 [Hq, NB, capacity], [Hq, NB] on the CPU
};

// Listed blocks per (head, query block), drawn from the blocks the layout makes eligible.
Routing draw_routing(const BlockLayout& layout, int64_t heads, RoutingKind kind, std::mt19937& rng) {
  const int64_t blocks = layout.num_blocks();
  std::vector<std::vector<int32_t>> rows(heads * blocks);
  int64_t capacity = 1;
  for (int64_t h = 0; h < heads; ++h) {
    for (int64_t b = 0; b < blocks; ++b) {
      if (layout.blocks[b].query_len == 0) continue;
      std::vector<int32_t> eligible;
      for (int64_t j = layout.eligible_first(b); j < layout.eligible_end(b); ++j) eligible.push_back(static_cast<int32_t>(j));
      std::shuffle(eligible.begin(), eligible.end(), rng);
      if (kind == RoutingKind::kMobaShaped) {  // the diagonal first, then the others shuffled
        std::iter_swap(eligible.begin(), std::find(eligible.begin(), eligible.end(), static_cast<int32_t>(b)));
      }
      const int64_t n = static_cast<int64_t>(eligible.size());
      int64_t take = 1 + static_cast<int64_t>(rng() % n);
      if (kind == RoutingKind::kEveryBlock) take = n;
      if (kind == RoutingKind::kOneBlock) take = 1;
      if (kind == RoutingKind::kSomeEmpty && rng() % 3 == 0) take = 0;
      std::vector<int32_t>& row = rows[h * blocks + b];
      row.assign(eligible.begin(), eligible.begin() + take);
      std::sort(row.begin(), row.end());
      capacity = std::max<int64_t>(capacity, take);
    }
  }
  Routing r{at::full({heads, blocks, capacity}, -1, at::kInt), at::zeros({heads, blocks}, at::kInt)};
  for (int64_t i = 0; i < heads * blocks; ++i) {
    std::copy(rows[i].begin(), rows[i].end(), r.selected.mutable_data_ptr<int32_t>() + i * capacity);
    r.count.mutable_data_ptr<int32_t>()[i] = static_cast<int32_t>(rows[i].size());
  }
  return r;
}

// [Hq, Tq, Tk]: query t (query block b, head h) sees key u (key block j) when row (h, b)
// lists j and, in a causal layout's diagonal block, u's position is not after t's.
at::Tensor routed_mask(const BlockLayout& layout, const Routing& routing, int64_t heads) {
  at::Tensor mask = at::zeros({heads, layout.total_queries, layout.total_keys}, at::kBool);
  auto m = mask.accessor<bool, 3>();
  const int64_t blocks = layout.num_blocks(), capacity = routing.selected.size(2);
  const int32_t* selected = routing.selected.const_data_ptr<int32_t>();
  for (int64_t h = 0; h < heads; ++h) {
    for (int64_t b = 0; b < blocks; ++b) {
      const LayoutBlock& qb = layout.blocks[b];
      for (int64_t i = 0; i < routing.count.const_data_ptr<int32_t>()[h * blocks + b]; ++i) {
        const LayoutBlock& kb = layout.blocks[selected[(h * blocks + b) * capacity + i]];
        for (int64_t r = 0; r < qb.query_len; ++r) {
          for (int64_t c = 0; c < kb.key_len; ++c) {
            const bool hidden = layout.causal && &kb == &qb && c > qb.query_pos0 + r;
            m[h][qb.query_start + r][kb.key_start + c] = !hidden;
          }
        }
      }
    }
  }
  return mask;
}

struct Attention {
  at::Tensor out, lse, dq, dk, dv;
};

// The oracle: float64 softmax attention under the mask; a query that sees no key gives
// zeros and lse -inf. Gradients of sum(out * grad_out).
Attention masked_reference(const test::MobaInputs& in, const at::Tensor& mask, double scale) {
  at::Tensor q = in.q.to(at::kDouble).requires_grad_(true);
  at::Tensor k = in.k.to(at::kDouble).requires_grad_(true);
  at::Tensor v = in.v.to(at::kDouble).requires_grad_(true);
  const int64_t group = q.size(1) / k.size(1);
  const at::Tensor kr = k.repeat_interleave(group, 1), vr = v.repeat_interleave(group, 1);
  const at::Tensor scores = at::einsum("qhd,khd->hqk", {q, kr}) * scale;
  const at::Tensor any = mask.any(-1, /*keepdim=*/true);
  const at::Tensor safe = at::where(any, scores.masked_fill(mask.logical_not(), -INFINITY), at::zeros_like(scores));
  const at::Tensor probs = at::softmax(safe, -1) * any;
  Attention r;
  r.out = at::einsum("hqk,khd->qhd", {probs, vr});
  r.lse = at::where(any.squeeze(-1), at::logsumexp(safe, -1), at::full({}, -INFINITY, at::kDouble)).t().detach();
  (r.out * in.grad_out.to(at::kDouble)).sum().backward();
  r.out = r.out.detach();
  r.dq = q.grad();
  r.dk = k.grad();
  r.dv = v.grad();
  return r;
}

Attention run_fused(const test::MobaInputs& in, const BlockSparseTables& tables) {
  at::Tensor q = in.q.cuda().requires_grad_(true), k = in.k.cuda().requires_grad_(true);
  at::Tensor v = in.v.cuda().requires_grad_(true);
  auto [out, lse] = block_sparse_attention_cuda(q, k, v, tables);
  (out * in.grad_out.cuda()).sum().backward();
  return {out.detach().cpu(), lse.cpu(), q.grad().cpu(), k.grad().cpu(), v.grad().cpu()};
}

void expect_lse_near(const at::Tensor& fused, const at::Tensor& reference, double tolerance) {
  const at::Tensor seen = reference.isfinite();
  EXPECT_TRUE(at::equal(fused.isinf().logical_and(fused.lt(0)), seen.logical_not()))
      << "lse is -inf exactly where a query sees no key";
  if (seen.any().item<bool>()) {
    EXPECT_LT((fused.to(at::kDouble).masked_select(seen) - reference.masked_select(seen)).abs().max().item<double>(),
              tolerance);
  }
}

class BlockSparseCudaTest : public ::testing::TestWithParam<std::tuple<FusedCase, at::ScalarType>> {};

TEST_P(BlockSparseCudaTest, MatchesTheMaskedReferenceAndTheCpuPath) {
  const auto& [c, dtype] = GetParam();
  const BlockLayout layout = BlockLayout::build(PackedSequences::from_lengths(c.key_lengths),
                                              PackedSequences::from_lengths(c.query_lengths),
                                              c.block_size, c.causal);
  std::mt19937 rng(static_cast<uint32_t>(std::hash<std::string>{}(c.name)));
  const Routing routing = draw_routing(layout, c.q_heads, c.routing, rng);
  const test::MobaInputs in =
      test::moba_random_inputs(c.query_lengths, c.key_lengths, c.q_heads, c.kv_heads, c.head_dim, dtype, 17);
  const double scale = 1.0 / std::sqrt(static_cast<double>(c.head_dim));
  const BlockSparseTables tables =
      block_sparse_tables(layout, routing.selected.cuda(), routing.count.cuda(), scale);

  const Attention fused = run_fused(in, tables);
  const Attention reference = masked_reference(in, routed_mask(layout, routing, c.q_heads), scale);
  // One rounding of the output to 8 (bf16) or 11 (fp16) bits, and P and dS rounded so
  // for their products, as flash-attention does.
  const double tolerance = dtype == at::kBFloat16 ? 3e-2 : 4e-3;
  const double relative = dtype == at::kBFloat16 ? 1.5e-2 : 2e-3;
  EXPECT_LT(test::moba_max_abs_diff(fused.out, reference.out), tolerance) << "out";
  EXPECT_LT(test::moba_max_abs_diff(fused.dq, reference.dq), 4 * tolerance) << "dq";
  EXPECT_LT(test::moba_max_abs_diff(fused.dk, reference.dk), 4 * tolerance) << "dk";
  EXPECT_LT(test::moba_max_abs_diff(fused.dv, reference.dv), 4 * tolerance) << "dv";
  EXPECT_LT(test::relative_norm_error(fused.out, reference.out), relative) << "out";
  EXPECT_LT(test::relative_norm_error(fused.dq, reference.dq), 2 * relative) << "dq";
  EXPECT_LT(test::relative_norm_error(fused.dk, reference.dk), 2 * relative) << "dk";
  EXPECT_LT(test::relative_norm_error(fused.dv, reference.dv), 2 * relative) << "dv";
  expect_lse_near(fused.lse, reference.lse, 1e-2);

  if (c.routing == RoutingKind::kSomeEmpty) return;  // the CPU path is not defined on empty rows
  MobaRouting cpu_routing;
  cpu_routing.selected = routing.selected;
  cpu_routing.selected_count = routing.count;
  at::Tensor q = in.q.to(at::kDouble).requires_grad_(true), k = in.k.to(at::kDouble).requires_grad_(true);
  at::Tensor v = in.v.to(at::kDouble).requires_grad_(true);
  auto [cpu_out, cpu_lse] = moba_attention_cpu(q, k, v, layout, cpu_routing, scale);
  (cpu_out * in.grad_out.to(at::kDouble)).sum().backward();
  EXPECT_LT(test::moba_max_abs_diff(fused.out, cpu_out), tolerance) << "out vs CPU";
  EXPECT_LT(test::moba_max_abs_diff(fused.dq, q.grad()), 4 * tolerance) << "dq vs CPU";
  EXPECT_LT(test::moba_max_abs_diff(fused.dk, k.grad()), 4 * tolerance) << "dk vs CPU";
  EXPECT_LT(test::moba_max_abs_diff(fused.dv, v.grad()), 4 * tolerance) << "dv vs CPU";
  expect_lse_near(fused.lse, cpu_lse.to(at::kDouble), 1e-2);
}

INSTANTIATE_TEST_SUITE_P(
    Routings, BlockSparseCudaTest,
    ::testing::Combine(::testing::ValuesIn(fused_cases()), ::testing::Values(at::kBFloat16, at::kHalf)),
    [](const auto& info) {
      return std::get<0>(info.param).name + "_" + std::string(c10::toString(std::get<1>(info.param)));
    });

// Every block listed is dense causal attention: against ATen's float64 SDPA per sequence,
// an oracle that shares nothing with the masks above.
TEST(BlockSparseCuda, EveryBlockListedIsDenseCausalAttention) {
  for (const int64_t dim : {64, 128}) {
    const std::vector<int64_t> lengths{1000, 300, 5};
    const BlockLayout layout = BlockLayout::build(PackedSequences::from_lengths(lengths),
                                                PackedSequences::from_lengths(lengths), 64, true);
    std::mt19937 rng(3);
    const Routing routing = draw_routing(layout, 14, RoutingKind::kEveryBlock, rng);
    const test::MobaInputs in = test::moba_random_inputs(lengths, lengths, 14, 2, dim, at::kBFloat16, 5);
    const double scale = 1.0 / std::sqrt(static_cast<double>(dim));
    const Attention fused =
        run_fused(in, block_sparse_tables(layout, routing.selected.cuda(), routing.count.cuda(), scale));
    int64_t start = 0;
    for (const int64_t n : lengths) {
      // [H, n, D] float64 of the sequence, key/value heads repeated for their 7 query heads.
      const auto heads_first = [&](const at::Tensor& x, int64_t repeat) {
        return x.narrow(0, start, n).to(at::kDouble).repeat_interleave(repeat, 1).transpose(0, 1);
      };
      const at::Tensor expected =
          at::scaled_dot_product_attention(heads_first(in.q, 1), heads_first(in.k, 7), heads_first(in.v, 7), {},
                                           0.0, /*is_causal=*/true, scale)
              .transpose(0, 1);
      EXPECT_LT(test::moba_max_abs_diff(fused.out.narrow(0, start, n), expected), 3e-2)
          << "dim " << dim << " sequence of " << n;
      start += n;
    }
  }
}

// Both dK/dV paths: per-head shares summed over a KV group (14/2), and written directly
// (Hq == Hkv, where nothing overwrites an element the kernel missed).
TEST(BlockSparseCuda, BackwardRepeatsBitForBitAndWritesEveryElement) {
  for (const auto& [q_heads, kv_heads] : std::vector<std::pair<int64_t, int64_t>>{{14, 2}, {4, 4}}) {
    SCOPED_TRACE(std::to_string(q_heads) + "/" + std::to_string(kv_heads) + " heads");
    const std::vector<int64_t> lengths{900, 333};
    const BlockLayout layout = BlockLayout::build(PackedSequences::from_lengths(lengths),
                                                PackedSequences::from_lengths(lengths), 64, true);
    std::mt19937 rng(8);
    const Routing routing = draw_routing(layout, q_heads, RoutingKind::kAnyBlocks, rng);
    const test::MobaInputs in = test::moba_random_inputs(lengths, lengths, q_heads, kv_heads, 64, at::kBFloat16, 9);
    const BlockSparseTables tables =
        block_sparse_tables(layout, routing.selected.cuda(), routing.count.cuda(), 0.125);
    const BlockSparseInverse inverse = block_sparse_inverse(tables.selected);
    const at::Tensor q = in.q.cuda(), k = in.k.cuda(), v = in.v.cuda(), grad_out = in.grad_out.cuda();
    const auto poisoned = [](const at::Tensor& like) { return at::full_like(like, NAN); };
    at::Tensor out = poisoned(q), lse = at::full({q.size(0), q.size(1)}, NAN, q.options().dtype(at::kFloat));
    block_sparse_forward_cuda(q, k, v, tables, out, lse);
    EXPECT_FALSE(out.isnan().any().item<bool>());
    EXPECT_FALSE(lse.isnan().any().item<bool>());
    std::vector<std::vector<at::Tensor>> runs;
    for (int run = 0; run < 2; ++run) {
      at::Tensor dq = poisoned(q), dk = poisoned(k), dv = poisoned(v);
      block_sparse_backward_cuda(grad_out, q, k, v, out, lse, tables, inverse, dq, dk, dv);
      EXPECT_FALSE(dq.isnan().any().item<bool>() || dk.isnan().any().item<bool>() || dv.isnan().any().item<bool>());
      runs.push_back({dq, dk, dv});
    }
    for (int i = 0; i < 3; ++i) EXPECT_TRUE(at::equal(runs[0][i], runs[1][i])) << "gradient " << i;
  }
}

TEST(BlockSparseCuda, RejectsWhatTheKernelsDoNotTake) {
  const BlockLayout layout = BlockLayout::build(PackedSequences::from_lengths({64}),
                                              PackedSequences::from_lengths({64}), 64, true);
  const BlockSparseTables tables = block_sparse_tables(layout, at::zeros({2, 1, 1}, at::kInt).cuda(),
                                                       at::ones({2, 1}, at::kInt).cuda(), 0.1);
  const auto expect_error = [&](const at::Tensor& q, const at::Tensor& k, const std::string& needle) {
    try {
      block_sparse_attention_cuda(q, k, k, tables);
      ADD_FAILURE() << "no error for " << needle;
    } catch (const c10::Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  const auto options = at::TensorOptions().device(at::kCUDA);
  expect_error(at::randn({64, 2, 64}, options), at::randn({64, 1, 64}, options), "bfloat16");
  expect_error(at::randn({64, 2, 32}, options).to(at::kBFloat16), at::randn({64, 1, 32}, options).to(at::kBFloat16),
               "head_dim 64 or 128");
  expect_error(at::randn({60, 2, 64}, options).to(at::kBFloat16), at::randn({60, 1, 64}, options).to(at::kBFloat16),
               "the tables index");
}

TEST(BlockSparseCuda, MobaThroughTheFusedKernelsEqualsTheFlashVarlenPath) {
  // The same routing (device routing is deterministic), two attention paths.
  const auto packed = PackedSequences::from_lengths({1500, 400});
  const test::MobaInputs in = test::moba_random_inputs({1500, 400}, {1500, 400}, 14, 2, 64, at::kBFloat16, 21);
  MobaParams params;
  params.block_size = 128;
  params.top_k = {4};
  params.scale = 0.125;
  std::vector<test::MobaGrads> results;
  for (const MobaCudaKernel kernel : {MobaCudaKernel::kFused, MobaCudaKernel::kFlashVarlen}) {
    params.cuda_kernel = kernel;
    test::MobaInputs device{in.q.cuda(), in.k.cuda(), in.v.cuda(), in.grad_out.cuda()};
    results.push_back(test::moba_run_with_grads(device, packed, packed, params, false));
  }
  EXPECT_LT(test::moba_max_abs_diff(results[0].out, results[1].out), 3e-2);
  EXPECT_LT(test::moba_max_abs_diff(results[0].dq, results[1].dq), 1.2e-1);
  EXPECT_LT(test::moba_max_abs_diff(results[0].dk, results[1].dk), 1.2e-1);
  EXPECT_LT(test::moba_max_abs_diff(results[0].dv, results[1].dv), 1.2e-1);
}

}  // namespace
}  // namespace sb
