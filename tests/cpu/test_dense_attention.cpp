// DenseCausalAttention against a float64 oracle written here with an explicit mask:
// softmax(Q K^T * scale + M) V, where M is 0 where key j is in query i's sequence and
// j <= i, -inf elsewhere, and query head h reads key/value head h / (Hq / Hkv).

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <limits>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/attention/core/attention_backend.h"
#include "kernels/attention/core/packed_sequences.h"
#include "kernels/attention/patterns/dense/dense_pattern.h"
#include "harness/patterns/attention_patterns.h"

namespace sb {
namespace {

struct AttentionGrads {
  at::Tensor out, dq, dk, dv;
};

// q [T, Hq, D], k, v [T, Hkv, D] in float64 -> [T, Hq, D]
at::Tensor reference_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                               const std::vector<int64_t>& lengths, double scale) {
  const int64_t tokens = q.size(0);
  const int64_t q_heads = q.size(1);
  const int64_t group = q_heads / k.size(1);

  std::vector<int64_t> sequence_of(tokens);
  int64_t t = 0;
  for (size_t s = 0; s < lengths.size(); ++s) {
    for (int64_t i = 0; i < lengths[s]; ++i) sequence_of[t++] = static_cast<int64_t>(s);
  }
  at::Tensor mask = at::full({tokens, tokens}, -std::numeric_limits<double>::infinity(),
                             at::kDouble);  // [T, T]
  auto m = mask.accessor<double, 2>();
  for (int64_t i = 0; i < tokens; ++i) {
    for (int64_t j = 0; j <= i; ++j) {
      if (sequence_of[i] == sequence_of[j]) m[i][j] = 0.0;
    }
  }
  std::vector<int64_t> kv_head(q_heads);
  for (int64_t h = 0; h < q_heads; ++h) kv_head[h] = h / group;
  const at::Tensor kv_index = at::tensor(kv_head, at::kLong);
  const at::Tensor k_per_q = k.index_select(1, kv_index);  // [T, Hq, D]
  const at::Tensor v_per_q = v.index_select(1, kv_index);  // [T, Hq, D]

  const at::Tensor scores = at::einsum("ihd,jhd->hij", {q, k_per_q}) * scale + mask;  // [Hq, T, T]
  const at::Tensor probs = at::softmax(scores, -1);                                   // [Hq, T, T]
  return at::einsum("hij,jhd->ihd", {probs, v_per_q});                                // [T, Hq, D]
}

AttentionGrads run_with_grads(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                              const at::Tensor& grad_out, bool use_reference,
                              const std::vector<int64_t>& lengths, double scale) {
  at::Tensor ql = q.detach().clone().requires_grad_(true);
  at::Tensor kl = k.detach().clone().requires_grad_(true);
  at::Tensor vl = v.detach().clone().requires_grad_(true);
  at::Tensor out;
  if (use_reference) {
    out = reference_attention(ql, kl, vl, lengths, scale);
  } else {
    out = dense_attention_options().make_backend()->forward(ql, kl, vl,
                                                   PackedSequences::from_lengths(lengths), scale, 0);
  }
  (out * grad_out).sum().backward();
  return {out.detach(), ql.grad(), kl.grad(), vl.grad()};
}

double max_abs_diff(const at::Tensor& a, const at::Tensor& b) {
  return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>();
}

// (GQA ratio Hq / Hkv, dtype)
class DenseAttentionTest : public ::testing::TestWithParam<std::tuple<int64_t, at::ScalarType>> {};

TEST_P(DenseAttentionTest, MatchesFloat64ReferenceForwardAndBackward) {
  const auto [ratio, dtype] = GetParam();
  const int64_t kv_heads = 2;
  const int64_t q_heads = kv_heads * ratio;
  const int64_t head_dim = 16;
  const std::vector<int64_t> lengths = {1, 7, 33};
  const int64_t tokens = 41;
  const double scale = 1.0 / 4.0;  // head_dim^-0.5

  at::manual_seed(1234 + ratio);
  const at::Tensor q = at::randn({tokens, q_heads, head_dim}, at::kDouble).to(dtype);
  const at::Tensor k = at::randn({tokens, kv_heads, head_dim}, at::kDouble).to(dtype);
  const at::Tensor v = at::randn({tokens, kv_heads, head_dim}, at::kDouble).to(dtype);
  const at::Tensor grad_out = at::randn({tokens, q_heads, head_dim}, at::kDouble);

  // The oracle sees the same (already rounded) inputs, in float64.
  const AttentionGrads expected =
      run_with_grads(q.to(at::kDouble), k.to(at::kDouble), v.to(at::kDouble), grad_out,
                     /*use_reference=*/true, lengths, scale);
  const AttentionGrads actual =
      run_with_grads(q, k, v, grad_out.to(dtype), /*use_reference=*/false, lengths, scale);

  ASSERT_EQ(actual.out.sizes(), (std::vector<int64_t>{tokens, q_heads, head_dim}));
  EXPECT_EQ(actual.out.scalar_type(), dtype);
  // float64: rounding only; float32: a few units of 2^-24 per accumulated term.
  const double tolerance = dtype == at::kDouble ? 1e-12 : 2e-5;
  EXPECT_LT(max_abs_diff(actual.out, expected.out), tolerance) << "forward";
  EXPECT_LT(max_abs_diff(actual.dq, expected.dq), tolerance) << "dq";
  EXPECT_LT(max_abs_diff(actual.dk, expected.dk), tolerance) << "dk";
  EXPECT_LT(max_abs_diff(actual.dv, expected.dv), tolerance) << "dv";
}

INSTANTIATE_TEST_SUITE_P(GqaRatiosAndDtypes, DenseAttentionTest,
                         ::testing::Combine(::testing::Values<int64_t>(1, 2, 7),
                                            ::testing::Values(at::kDouble, at::kFloat)),
                         [](const auto& info) {
                           return "gqa" + std::to_string(std::get<0>(info.param)) + "_" +
                                  std::string(c10::toString(std::get<1>(info.param)));
                         });

TEST(DenseAttention, EmptySequenceInsidePackIsSkipped) {
  const std::vector<int64_t> lengths = {5, 0, 3};
  at::manual_seed(7);
  const at::Tensor q = at::randn({8, 4, 8}, at::kDouble);
  const at::Tensor k = at::randn({8, 2, 8}, at::kDouble);
  const at::Tensor v = at::randn({8, 2, 8}, at::kDouble);
  const at::Tensor out = dense_attention_options().make_backend()->forward(
      q, k, v, PackedSequences::from_lengths(lengths), 0.3, 0);
  EXPECT_LT(max_abs_diff(out, reference_attention(q, k, v, lengths, 0.3)), 1e-12);
}

TEST(DenseAttention, FirstTokenOfEachSequenceReadsOnlyItsOwnValue) {
  // Exact oracle: a query with a single visible key returns that key's value.
  at::manual_seed(3);
  const at::Tensor q = at::randn({6, 2, 4}, at::kDouble);
  const at::Tensor k = at::randn({6, 1, 4}, at::kDouble);
  const at::Tensor v = at::randn({6, 1, 4}, at::kDouble);
  const at::Tensor out = dense_attention_options().make_backend()->forward(
      q, k, v, PackedSequences::from_lengths({2, 4}), 0.5, 0);  // [6, 2, 4]
  for (int64_t token : {0, 2}) {
    for (int64_t h = 0; h < 2; ++h) {
      EXPECT_LT(max_abs_diff(out[token][h], v[token][0]), 1e-15) << "token " << token;
    }
  }
}

TEST(DenseAttention, RejectsInconsistentInputs) {
  auto backend = dense_attention_options().make_backend();
  const at::Tensor q = at::randn({6, 4, 8});
  const at::Tensor k = at::randn({6, 2, 8});
  const auto packed = PackedSequences::from_lengths({6});
  EXPECT_THROW(backend->forward(q, at::randn({6, 3, 8}), at::randn({6, 3, 8}), packed, 0.3, 0),
               c10::Error);  // 4 query heads over 3 kv heads
  EXPECT_THROW(backend->forward(q, k, at::randn({6, 2, 4}), packed, 0.3, 0), c10::Error);
  EXPECT_THROW(backend->forward(q, k, k.to(at::kDouble), packed, 0.3, 0), c10::Error);
  EXPECT_THROW(backend->forward(q.flatten(1), k, k, packed, 0.3, 0), c10::Error);
  EXPECT_THROW(backend->forward(q, k, k, PackedSequences::from_lengths({2, 3}), 0.3, 0),
               std::invalid_argument);  // offsets end at 5, tensors hold 6 tokens
}

TEST(AttentionPatternRegistry, ListsThePatternsAndNamesThemOnError) {
  EXPECT_EQ(attention_options_named("dense").make_backend()->name(), "dense");
  EXPECT_EQ(attention_options_named("vertical_slash").make_backend()->name(), "vertical_slash");
  EXPECT_EQ(attention_pattern_names(), (std::vector<std::string>{"dense", "moba", "vertical_slash", "sliding_window"}));
  EXPECT_EQ(default_attention_options().name(), "dense");
  for (const AttentionPatternPlugin* plugin : attention_plugins()) {
    // Each plug-in's default pattern is its kernel pattern's, and writes itself back.
    const AttentionOptions options = plugin->make_default();
    EXPECT_EQ(options.name(), plugin->name());
    EXPECT_EQ(parse_attention(attention_to_json(options), "$", "test"), options) << plugin->name();
  }
  try {
    attention_options_named("nope");
    FAIL() << "attention_options_named(\"nope\") did not throw";
  } catch (const std::invalid_argument& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("nope"), std::string::npos) << message;
    EXPECT_NE(message.find("dense"), std::string::npos) << message;
  }
}

TEST(PackedSequences, OffsetsAndChecks) {
  const PackedSequences packed = PackedSequences::from_lengths({1, 7, 33});
  EXPECT_EQ(packed.offsets, (std::vector<int64_t>{0, 1, 8, 41}));
  EXPECT_EQ(packed.num_sequences(), 3);
  EXPECT_EQ(packed.total_tokens(), 41);
  EXPECT_EQ(packed.length(1), 7);
  EXPECT_EQ(packed.max_length(), 33);
  EXPECT_NO_THROW(packed.check(41));
  EXPECT_THROW(packed.check(40), std::invalid_argument);
  EXPECT_THROW(PackedSequences::from_lengths({3, -1}), std::invalid_argument);
  PackedSequences decreasing;
  decreasing.offsets = {0, 5, 4};
  EXPECT_THROW(decreasing.check(4), std::invalid_argument);
  PackedSequences not_at_zero;
  not_at_zero.offsets = {1, 5};
  EXPECT_THROW(not_at_zero.check(5), std::invalid_argument);
  EXPECT_EQ(PackedSequences{}.max_length(), 0);
}

}  // namespace
}  // namespace sb
