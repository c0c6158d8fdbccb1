// MoBA on the CPU against the float64 oracle (moba_reference): forward output and the
// gradients of q, k, v, plus the routing it reports, over lengths that are and are not
// multiples of the block size, sequences shorter than one block, packed sequences
// (with an empty one), block sizes from 1 to larger than every sequence, budgets from
// the diagonal alone to dense, per-sequence budgets, GQA 1:1, 2:1, 7:1 and 8:1; under
// both gates (per query block, per query token).

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "kernels/attention/core/attention_backend.h"
#include "kernels/attention/patterns/moba/moba_attention.h"
#include "kernels/attention/patterns/moba/moba_attention_cpu.h"
#include "kernels/attention/core/block_layout.h"
#include "kernels/attention/patterns/moba/moba_reference.h"
#include "tests/cpu/test_moba_support.h"
#include "kernels/attention/patterns/dense/dense_pattern.h"

namespace sb {
namespace {

using test::moba_max_abs_diff;
using test::moba_random_inputs;
using test::moba_run_with_grads;
using test::moba_selected_mask;

struct MobaCase {
  std::string name;
  std::vector<int64_t> lengths;
  int64_t block_size;
  std::vector<int64_t> top_k;
  int64_t q_heads, kv_heads, head_dim;
};

std::vector<MobaCase> moba_cases() {
  return {
      {"shorter_than_one_block", {5}, 8, {2}, 2, 1, 8},
      {"exact_multiple", {32}, 8, {2}, 4, 2, 8},
      {"not_a_multiple", {45}, 8, {3}, 4, 1, 16},
      {"packed_with_empty_and_single_token", {13, 1, 40, 8, 0, 27}, 8, {3}, 4, 2, 8},
      {"gqa_7_to_1", {50, 19}, 8, {3}, 7, 1, 8},
      {"gqa_7_to_1_two_groups", {37}, 4, {4}, 14, 2, 8},
      {"gqa_8_to_1", {64, 33}, 16, {2}, 8, 1, 16},
      {"block_size_one", {12, 7}, 1, {4}, 2, 2, 8},
      {"block_larger_than_every_sequence", {30, 9}, 64, {2}, 2, 1, 8},
      {"diagonal_only", {40}, 8, {1}, 2, 1, 8},
      {"budget_per_sequence", {33, 41, 20}, 8, {1, 3, 5}, 4, 2, 8},
      {"budget_above_block_count", {40, 17}, 8, {100}, 2, 1, 8},
      {"long_sequence", {200}, 16, {4}, 4, 2, 32},
  };
}

class MobaAttentionTest
    : public ::testing::TestWithParam<std::tuple<MobaCase, at::ScalarType, MobaGate>> {};

TEST_P(MobaAttentionTest, MatchesFloat64ReferenceForwardAndBackward) {
  const auto& [c, dtype, gate] = GetParam();
  const auto packed = PackedSequences::from_lengths(c.lengths);
  const MobaParams params =
      test::moba_test_params(c.block_size, c.top_k, 1.0 / std::sqrt(static_cast<double>(c.head_dim)), gate);
  const auto in = moba_random_inputs(c.lengths, c.lengths, c.q_heads, c.kv_heads, c.head_dim,
                                     dtype, 17 + c.lengths.size() * 31 + c.block_size);

  const test::MobaGrads expected = moba_run_with_grads(in, packed, packed, params, true);
  const test::MobaGrads actual = moba_run_with_grads(in, packed, packed, params, false);
  ASSERT_EQ(actual.out.sizes(), in.q.sizes());
  EXPECT_EQ(actual.out.scalar_type(), dtype);
  // float64: rounding of different summation orders only. float32: a few units of
  // 2^-24 per accumulated term, over at most k * B keys (as for dense attention).
  test::expect_moba_grads_near(actual, expected, dtype == at::kDouble ? 1e-11 : 5e-5);

  // The routing the kernel reports is the oracle's.
  const MobaResult result = moba_attention(in.q, in.k, in.v, packed, params);
  const MobaReferenceResult reference = moba_reference(in.q, in.k, in.v, packed, packed, params);
  EXPECT_EQ(result.routing.gate, gate);
  test::expect_selection_is_the_oracles(result.routing, reference, params);
  EXPECT_EQ(result.routing.top_k, reference.top_k);
  ASSERT_EQ(result.routing.coverage.size(), reference.coverage.size());
  for (size_t s = 0; s < reference.coverage.size(); ++s) {
    EXPECT_NEAR(result.routing.coverage[s], reference.coverage[s], 1e-12) << "sequence " << s;
  }
  EXPECT_NEAR(result.routing.coverage_mean, reference.coverage_mean, 1e-12);
  EXPECT_LT(moba_max_abs_diff(result.lse, reference.lse), dtype == at::kDouble ? 1e-11 : 1e-5);
}

INSTANTIATE_TEST_SUITE_P(
    LengthsBlocksBudgetsGqa, MobaAttentionTest,
    ::testing::Combine(::testing::ValuesIn(moba_cases()), ::testing::Values(at::kDouble, at::kFloat),
                       ::testing::Values(MobaGate::kBlock, MobaGate::kToken)),
    [](const auto& info) {
      return std::get<0>(info.param).name + "_" + std::string(c10::toString(std::get<1>(info.param))) + "_" +
             test::moba_gate_name(std::get<2>(info.param)) + "_gate";
    });

TEST(MobaAttention, NonCausalMatchesReference) {
  // Every block of the sequence is eligible and none is masked; the own block is
  // always selected.
  const std::vector<int64_t> lengths = {29, 12};
  const auto packed = PackedSequences::from_lengths(lengths);
  const auto in = moba_random_inputs(lengths, lengths, 4, 2, 8, at::kDouble, 5);
  const BlockLayout layout = BlockLayout::build(packed, packed, 8, false);
  for (const MobaGate gate : {MobaGate::kBlock, MobaGate::kToken}) {
    SCOPED_TRACE(test::moba_gate_name(gate));
    MobaParams params = test::moba_test_params(8, {2}, 0.3, gate);
    params.causal = false;
    test::expect_moba_grads_near(moba_run_with_grads(in, packed, packed, params, false),
                                 moba_run_with_grads(in, packed, packed, params, true), 1e-11);
    const MobaResult result = moba_attention(in.q, in.k, in.v, packed, params);
    test::expect_selection_is_the_oracles(result.routing,
                                          moba_reference(in.q, in.k, in.v, packed, packed, params), params);
    // Some row routes to a later block (the non-causal case is exercised).
    const at::Tensor ids = result.routing.selected.to(at::kLong);  // [Hq, R, kcap]
    std::vector<int64_t> own;
    for (int64_t b = 0; b < layout.num_blocks(); ++b) {
      own.insert(own.end(), gate == MobaGate::kToken ? layout.blocks[b].query_len : 1, b);
    }
    EXPECT_TRUE(ids.gt(at::tensor(own, at::kLong).view({1, -1, 1})).any().item<bool>());
  }
}

TEST(MobaAttention, BudgetAtLeastEligibleBlocksIsDenseCausalAttention) {
  // Oracle: the dense causal backend (itself checked against a float64 masked softmax).
  const std::vector<int64_t> lengths = {70, 3, 33};
  const auto packed = PackedSequences::from_lengths(lengths);
  const auto in = moba_random_inputs(lengths, lengths, 4, 2, 16, at::kDouble, 11);
  const at::Tensor dense = dense_attention_options().make_backend()->forward(in.q, in.k, in.v, packed, 0.25, 0);
  for (const int64_t k : {9, 10, 1000}) {  // the longest sequence has 9 blocks of 8
    for (const MobaGate gate : {MobaGate::kBlock, MobaGate::kToken}) {
      SCOPED_TRACE(test::moba_gate_name(gate));
      const MobaResult moba = moba_attention(in.q, in.k, in.v, packed, test::moba_test_params(8, {k}, 0.25, gate));
      EXPECT_LT(moba_max_abs_diff(moba.out, dense), 1e-12) << "k " << k;
      for (double c : moba.routing.coverage) EXPECT_NEAR(c, 1.0, 1e-12);
    }
  }
}

TEST(MobaAttention, RepeatedRunsAreBitwiseEqualAndThreadCountsAgree) {
  // The key/value gradients are reduced in a fixed order (no atomics), so a rerun with
  // the same threads is bitwise equal. BLAS may pick other code paths for another
  // thread count, so there the results agree to float32 rounding only.
  // Large enough that rows are spread over threads (see moba_parallel_grain).
  const std::vector<int64_t> lengths = {1000, 370};
  const auto packed = PackedSequences::from_lengths(lengths);
  const auto in = moba_random_inputs(lengths, lengths, 4, 2, 16, at::kFloat, 3);
  for (const MobaGate gate : {MobaGate::kBlock, MobaGate::kToken}) {
    SCOPED_TRACE(test::moba_gate_name(gate));
    const MobaParams params = test::moba_test_params(32, {3}, 0.25, gate);
    const int threads = at::get_num_threads();
    at::set_num_threads(std::max(2, threads));
    const auto first = moba_run_with_grads(in, packed, packed, params, false);
    const auto second = moba_run_with_grads(in, packed, packed, params, false);
    at::set_num_threads(1);
    const auto single = moba_run_with_grads(in, packed, packed, params, false);
    at::set_num_threads(threads);
    EXPECT_TRUE(at::equal(first.out, second.out));
    EXPECT_TRUE(at::equal(first.dq, second.dq));
    EXPECT_TRUE(at::equal(first.dk, second.dk));
    EXPECT_TRUE(at::equal(first.dv, second.dv));
    EXPECT_LT(moba_max_abs_diff(first.out, single.out), 1e-5);
    EXPECT_LT(moba_max_abs_diff(first.dk, single.dk), 1e-5);
  }
}

TEST(MobaAttention, HalfPrecisionInputsRunInFloat32OnTheCpu) {
  const std::vector<int64_t> lengths = {40};
  const auto packed = PackedSequences::from_lengths(lengths);
  const auto in = moba_random_inputs(lengths, lengths, 2, 1, 16, at::kBFloat16, 9);
  for (const MobaGate gate : {MobaGate::kBlock, MobaGate::kToken}) {
    SCOPED_TRACE(test::moba_gate_name(gate));
    const MobaParams params = test::moba_test_params(8, {2}, 0.25, gate);
    const auto actual = moba_run_with_grads(in, packed, packed, params, false);
    const auto expected = moba_run_with_grads(in, packed, packed, params, true);
    EXPECT_EQ(actual.out.scalar_type(), at::kBFloat16);
    EXPECT_EQ(actual.dq.scalar_type(), at::kBFloat16);
    // One bfloat16 rounding of values of magnitude <= ~3: 2^-8 relative.
    EXPECT_LT(moba_max_abs_diff(actual.out, expected.out), 2e-2);
    EXPECT_LT(moba_max_abs_diff(actual.dk, expected.dk), 5e-2);
  }
}

TEST(MobaAttention, EmptyCallReturnsEmptyOutput) {
  const auto packed = PackedSequences::from_lengths({0, 0});
  for (const MobaGate gate : {MobaGate::kBlock, MobaGate::kToken}) {
    SCOPED_TRACE(test::moba_gate_name(gate));
    const MobaParams params = test::moba_test_params(4, {32}, 1.0, gate);
    const at::Tensor q = at::zeros({0, 2, 8}).requires_grad_(true);
    const at::Tensor k = at::zeros({0, 1, 8});
    const MobaResult r = moba_attention(q, k, k, packed, params);
    EXPECT_EQ(r.out.sizes(), q.sizes());
    EXPECT_EQ(r.routing.coverage, (std::vector<double>{1.0, 1.0}));
    EXPECT_DOUBLE_EQ(r.routing.coverage_mean, 1.0);
    r.out.sum().backward();
    EXPECT_EQ(q.grad().sizes(), q.sizes());
  }
}

// A routing that does not list a row's own block (MoBA's gate always does; the fused CUDA
// kernels take any list): that row attends to its listed blocks whole, with no causal
// mask, and the rows after it keep theirs. One sequence of 12 tokens in blocks of 4, one
// head: block 1 lists {0} only, block 2 lists {0, 2}; against plain float64 softmax.
TEST(MobaAttention, CpuPathTakesARowWithoutItsOwnBlock) {
  const auto packed = PackedSequences::from_lengths({12});
  const BlockLayout layout = BlockLayout::build(packed, packed, 4, true);
  MobaRouting routing;
  routing.selected = at::tensor(std::vector<int32_t>{0, -1, 0, -1, 0, 2}, at::kInt).view({1, 3, 2});
  routing.selected_count = at::tensor(std::vector<int32_t>{1, 1, 2}, at::kInt).view({1, 3});
  at::manual_seed(4);
  const at::Tensor q = at::randn({12, 1, 8}, at::kDouble), k = at::randn({12, 1, 8}, at::kDouble);
  const at::Tensor v = at::randn({12, 1, 8}, at::kDouble);
  const double scale = 0.3;
  const at::Tensor out = moba_attention_cpu(q, k, v, layout, routing, scale).first;
  // Query t sees the keys in `keys` (and in block 2 only those at or before it).
  const auto expected_row = [&](int64_t t, const std::vector<int64_t>& keys) {
    const at::Tensor index = at::tensor(keys, at::kLong);
    const at::Tensor scores = k.index_select(0, index).squeeze(1).mv(q[t][0]) * scale;  // [n]
    return at::softmax(scores, 0).unsqueeze(0).mm(v.index_select(0, index).squeeze(1)).squeeze(0);
  };
  for (int64_t t = 4; t < 8; ++t) {  // block 1: the keys of block 0, all of them, no mask
    EXPECT_TRUE(at::allclose(out[t][0], expected_row(t, {0, 1, 2, 3}), 1e-12, 1e-12)) << "query " << t;
  }
  for (int64_t t = 8; t < 12; ++t) {  // block 2: block 0 and its own keys up to itself
    std::vector<int64_t> keys{0, 1, 2, 3};
    for (int64_t u = 8; u <= t; ++u) keys.push_back(u);
    EXPECT_TRUE(at::allclose(out[t][0], expected_row(t, keys), 1e-12, 1e-12)) << "query " << t;
  }
}

TEST(MobaAttention, RejectsBadInputsWithClearMessages) {
  const auto packed = PackedSequences::from_lengths({6});
  const MobaParams params = test::moba_test_params(4, {32}, 0.5);
  const at::Tensor q = at::randn({6, 4, 8}), k = at::randn({6, 2, 8});
  auto expect_error = [&](auto&& call, const std::string& needle) {
    try {
      call();
      ADD_FAILURE() << "no error; expected one mentioning \"" << needle << "\"";
    } catch (const std::exception& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_error([&] { moba_attention(q, at::randn({6, 3, 8}), at::randn({6, 3, 8}), packed, params); },
               "multiple of key/value heads");
  expect_error([&] { moba_attention(q, k, at::randn({6, 2, 4}), packed, params); }, "same shape");
  expect_error([&] { moba_attention(q.to(at::kDouble), k, k, packed, params); }, "one dtype");
  expect_error([&] { moba_attention(q, k, k, PackedSequences::from_lengths({5}), params); },
               "offsets end at 5");
  MobaParams bad = params;
  bad.block_size = 0;
  expect_error([&] { moba_attention(q, k, k, packed, bad); }, "block_size");
  bad = params;
  bad.top_k = {0};
  expect_error([&] { moba_attention(q, k, k, packed, bad); }, "must be >= 1");
  bad = params;
  bad.top_k = {2, 3};
  expect_error([&] { moba_attention(q, k, k, packed, bad); }, "one per sequence");
  bad = params;
  bad.scale = 0.0;
  expect_error([&] { moba_attention(q, k, k, packed, bad); }, "scale");
  bad = params;
  bad.coverage_floor_ratio = 1.5;
  expect_error([&] { moba_attention(q, k, k, packed, bad); }, "coverage_floor_ratio");
  bad = params;
  bad.coverage_floor_ratio = 0.9;
  expect_error([&] { moba_attention(q, k, k, packed, bad); }, "coverage_reference_k");
}

}  // namespace
}  // namespace sb
