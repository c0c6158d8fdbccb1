// MTraining's vertical-slash index (kernels/attention/patterns/vertical_slash/vertical_slash_index.h)
// on cases worked out by hand (uniform attention: every score known), against a second,
// plain-loop implementation of the rule on random inputs (varlen, GQA), and the float64
// reference: its mask by hand, and with every key kept it is dense causal attention
// (output and gradients against LibTorch's own dense attention).
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <tuple>
#include <vector>

#include "kernels/attention/patterns/dense/dense_causal_attention.h"
#include "kernels/attention/patterns/vertical_slash/vertical_slash_attention_cpu.h"
#include "kernels/attention/patterns/vertical_slash/vertical_slash_backend.h"
#include "kernels/attention/patterns/vertical_slash/vertical_slash_blocks.h"
#include "kernels/attention/patterns/vertical_slash/vertical_slash_index.h"
#include "kernels/attention/patterns/vertical_slash/vertical_slash_reference.h"
#include "tests/cpu/vertical_slash_index_cases.h"

namespace sb {
namespace {

// One sequence of 10 tokens with q = 0: each of the last 4 queries (positions 6..9)
// attends uniformly, A[i, j] = 1 / (p_i + 1) for j <= p_i. Every column j <= 6 and every
// offset d <= 6 then scores c = 1/7 + 1/8 + 1/9 + 1/10; later ones less.
struct UniformCase {
  at::Tensor q = at::zeros({10, 1, 4}, at::kDouble);
  at::Tensor k = at::randn({10, 1, 4}, at::TensorOptions().dtype(at::kDouble));
  PackedSequences sequences = PackedSequences::from_lengths({10});
};

VerticalSlashParams small_params() {
  VerticalSlashParams p;
  p.sink_tokens = 2;
  p.local_window = 1;
  p.last_queries = 4;
  p.block_size = 1;  // exact diagonals: the cases below count keys one by one
  return p;
}

// small_params with top-k counts besides the 2 sinks and the 1-offset window.
VerticalSlashParams small_top_k(int64_t verticals, int64_t slashes) {
  VerticalSlashParams p = small_params();
  p.budget = VerticalSlashBudget::kTopK;
  p.vertical_count = verticals;
  p.slash_count = slashes;
  return p;
}

TEST(VerticalSlashIndex, UniformAttentionByHand) {
  at::manual_seed(1);
  const UniformCase c;
  VerticalSlashParams params = small_top_k(2, 1);
  // Ties go to the lower column / offset: sinks 0, 1 then 2, 3; window 0 then offset 1.
  const auto topk = vertical_slash_index(c.q, c.k, c.sequences, params, 0.5);
  ASSERT_EQ(topk.size(), 1u);
  ASSERT_EQ(topk[0].size(), 1u);
  EXPECT_EQ(topk[0][0].verticals, (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(topk[0][0].slashes, (std::vector<int64_t>{0, 1}));
  // Row p keeps columns 0-3 and p, p - 1 (both past 3): 6 of its p + 1 keys.
  EXPECT_NEAR(topk[0][0].coverage, (6.0 / 7 + 6.0 / 8 + 6.0 / 9 + 6.0 / 10) / 4, 1e-12);

  // top-p 0.5 of the mass 4: with c = 0.479 each, the sinks hold 0.958, columns 2 and 3
  // bring it to 1.916, column 4 past 2: five verticals; offsets 0..4 likewise.
  params.budget = VerticalSlashBudget::kTopP;
  params.p = 0.5;
  const auto topp = vertical_slash_index(c.q, c.k, c.sequences, params, 0.5);
  EXPECT_EQ(topp[0][0].verticals, (std::vector<int64_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(topp[0][0].slashes, (std::vector<int64_t>{0, 1, 2, 3, 4}));
  // The caps bound the lists, forced entries included.
  params.max_verticals = 3;
  params.max_slashes = 2;
  const auto capped = vertical_slash_index(c.q, c.k, c.sequences, params, 0.5);
  EXPECT_EQ(capped[0][0].verticals, (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(capped[0][0].slashes, (std::vector<int64_t>{0, 1}));
}

TEST(VerticalSlashIndex, BlockFormCoverageByHand) {
  // The uniform case with verticals {0, 1} and the slash 0 only, in blocks of 4: queries
  // 6, 7 (block 4..7) keep 0, 1 and the whole key block 4..7 up to themselves (5 of 7
  // and 6 of 8 keys); queries 8, 9 (block 8..9) keep 0, 1 and 8..9 (3 of 9, 4 of 10).
  at::manual_seed(2);
  const UniformCase c;
  VerticalSlashParams params = small_top_k(0, 0);
  params.block_size = 4;
  const auto index = vertical_slash_index(c.q, c.k, c.sequences, params, 0.5);
  EXPECT_EQ(index[0][0].verticals, (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(index[0][0].slashes, (std::vector<int64_t>{0}));
  EXPECT_EQ(index[0][0].block_size, 4);
  EXPECT_NEAR(index[0][0].coverage, (5.0 / 7 + 6.0 / 8 + 3.0 / 9 + 4.0 / 10) / 4, 1e-12);
}

TEST(VerticalSlashIndex, BadParamsAreRejected) {
  VerticalSlashParams p;
  p.p = 0;
  EXPECT_THROW(p.validate(), std::invalid_argument);
  p = VerticalSlashParams{};
  p.max_verticals = 10;  // below the 30 sinks
  EXPECT_THROW(p.validate(), std::invalid_argument);
  p = VerticalSlashParams{};
  p.local_window = 0;
  EXPECT_THROW(p.validate(), std::invalid_argument);
  p = VerticalSlashParams{};
  p.block_size = 0;
  EXPECT_THROW(p.validate(), std::invalid_argument);
}

// The block form's mask once more, from its definition: query i keeps key j <= i when j
// is a vertical or some query i2 of i's block (i2 < length) has i2 - d in j's key block
// for a kept slash d.
bool plain_keeps(const VerticalSlashHeadIndex& index, int64_t length, int64_t i, int64_t j) {
  if (j > i) return false;
  if (std::find(index.verticals.begin(), index.verticals.end(), j) != index.verticals.end()) return true;
  const int64_t block = index.block_size, first = i / block * block;
  for (int64_t i2 = first; i2 < std::min(first + block, length); ++i2) {
    for (const int64_t d : index.slashes) {
      if (i2 - d >= 0 && (i2 - d) / block == j / block) return true;
    }
  }
  return false;
}

// The rule once more, with plain loops: scores, softmax, column and diagonal sums, a
// full sort of the candidates, the budget, the coverage.
VerticalSlashHeadIndex plain_index(const at::Tensor& q, const at::Tensor& k, int64_t offset, int64_t length,
                                   int64_t head, int64_t kv_head, const VerticalSlashParams& params, double scale) {
  const int64_t n = std::min(params.last_queries, length), dim = q.size(2);
  const auto qa = q.accessor<double, 3>();
  const auto ka = k.accessor<double, 3>();
  std::vector<std::vector<double>> a(static_cast<size_t>(n), std::vector<double>(static_cast<size_t>(length), 0.0));
  std::vector<double> vertical(static_cast<size_t>(length), 0.0), slash(vertical);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t p = length - n + i;
    double top = -1e300;
    std::vector<double> s(static_cast<size_t>(p + 1));
    for (int64_t j = 0; j <= p; ++j) {
      double dot = 0;
      for (int64_t d = 0; d < dim; ++d) dot += qa[offset + p][head][d] * ka[offset + j][kv_head][d];
      s[static_cast<size_t>(j)] = dot * scale;
      top = std::max(top, s[static_cast<size_t>(j)]);
    }
    double z = 0;
    for (double& x : s) z += (x = std::exp(x - top));
    for (int64_t j = 0; j <= p; ++j) {
      const double value = s[static_cast<size_t>(j)] / z;
      a[static_cast<size_t>(i)][static_cast<size_t>(j)] = value;
      vertical[static_cast<size_t>(j)] += value;
      slash[static_cast<size_t>(p - j)] += value;
    }
  }
  const auto pick = [&](const std::vector<double>& score, int64_t forced, int64_t count, int64_t cap) {
    std::vector<int64_t> rest;
    for (int64_t j = forced; j < length; ++j) rest.push_back(j);
    std::sort(rest.begin(), rest.end(), [&](int64_t x, int64_t y) {
      return score[static_cast<size_t>(x)] != score[static_cast<size_t>(y)]
                 ? score[static_cast<size_t>(x)] > score[static_cast<size_t>(y)]
                 : x < y;
    });
    std::vector<int64_t> kept;
    double mass = 0;
    for (int64_t j = 0; j < std::min(forced, length); ++j) {
      kept.push_back(j);
      mass += score[static_cast<size_t>(j)];
    }
    int64_t added = 0;
    for (int64_t j : rest) {
      const bool more = params.budget == VerticalSlashBudget::kTopP ? mass < params.p * static_cast<double>(n)
                                                                     : added < count;
      if (!more || static_cast<int64_t>(kept.size()) >= cap) break;
      kept.push_back(j);
      mass += score[static_cast<size_t>(j)];
      ++added;
    }
    std::sort(kept.begin(), kept.end());
    return kept;
  };
  VerticalSlashHeadIndex out;
  out.block_size = params.block_size;
  out.verticals = pick(vertical, params.sink_tokens, params.vertical_count, params.max_verticals);
  out.slashes = pick(slash, params.local_window, params.slash_count, params.max_slashes);
  double kept = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t p = length - n + i;
    for (int64_t j = 0; j <= p; ++j) {
      if (plain_keeps(out, length, p, j)) kept += a[static_cast<size_t>(i)][static_cast<size_t>(j)];
    }
  }
  out.coverage = kept / static_cast<double>(n);
  return out;
}

TEST(VerticalSlashIndex, EqualsAPlainImplementationOfTheRule) {
  at::manual_seed(7);
  const std::vector<int64_t> lengths{70, 5, 33, 129};
  const PackedSequences sequences = PackedSequences::from_lengths(lengths);
  const auto opts = at::TensorOptions().dtype(at::kDouble);
  for (const auto& [hq, hkv] : std::vector<std::pair<int64_t, int64_t>>{{7, 1}, {4, 2}}) {
    // Sharper scores than N(0, 1) so that the lists are not all ties.
    const at::Tensor q = at::randn({237, hq, 8}, opts) * 2, k = at::randn({237, hkv, 8}, opts);
    for (const auto& [budget, block] : std::vector<std::pair<VerticalSlashBudget, int64_t>>{
             {VerticalSlashBudget::kTopP, 1}, {VerticalSlashBudget::kTopK, 1}, {VerticalSlashBudget::kTopP, 8},
             {VerticalSlashBudget::kTopK, 16}}) {
      VerticalSlashParams params = test::small_vertical_slash_params(block);
      params.budget = budget;
      const auto index = vertical_slash_index(q, k, sequences, params, 0.35);
      ASSERT_EQ(index.size(), lengths.size());
      for (int64_t s = 0; s < sequences.num_sequences(); ++s) {
        for (int64_t h = 0; h < hq; ++h) {
          const VerticalSlashHeadIndex expected =
              plain_index(q, k, sequences.offsets[s], lengths[s], h, h / (hq / hkv), params, 0.35);
          const VerticalSlashHeadIndex& got = index[s][h];
          EXPECT_EQ(got.block_size, block);
          EXPECT_EQ(got.verticals, expected.verticals) << "sequence " << s << " head " << h;
          EXPECT_EQ(got.slashes, expected.slashes) << "sequence " << s << " head " << h;
          EXPECT_NEAR(got.coverage, expected.coverage, 1e-12);
          EXPECT_LE(got.coverage, 1.0 + 1e-12);
          if (budget == VerticalSlashBudget::kTopP && lengths[s] > 40) {
            EXPECT_GT(got.coverage, 0.5) << "each list holds 80 % of its mass";
          }
        }
      }
    }
  }
}

TEST(VerticalSlashReference, MaskByHand) {
  // Verticals {0, 3}, slashes {0, 2}, exact diagonals (blocks of 1): row 5 keeps 0, 3
  // (verticals), 5, 3 (offsets 0, 2).
  VerticalSlashHeadIndex index{{0, 3}, {0, 2}, 1.0, 1};
  const std::vector<std::vector<int64_t>> exact{{0}, {0, 1}, {0, 2}, {0, 1, 3}, {0, 2, 3, 4}, {0, 3, 5}};
  // Verticals {3}, slashes {0, 4} in blocks of 2: block 2..3 keeps its own key block;
  // block 4..5 its own, key block 0..1 (offset 4 from 4 and 5) and the vertical 3.
  VerticalSlashHeadIndex blocks{{3}, {0, 4}, 1.0, 2};
  const std::vector<std::vector<int64_t>> blocked{{0}, {0, 1}, {2}, {2, 3}, {0, 1, 3, 4}, {0, 1, 3, 4, 5}};
  for (const auto& [pattern, rows] : {std::pair{index, exact}, std::pair{blocks, blocked}}) {
    const at::Tensor mask = vertical_slash_mask(pattern, 6);
    for (int64_t i = 0; i < 6; ++i) {
      for (int64_t j = 0; j < 6; ++j) {
        const bool expected = std::find(rows[i].begin(), rows[i].end(), j) != rows[i].end();
        EXPECT_EQ(mask[i][j].item<bool>(), expected) << "block " << pattern.block_size << ": " << i << ", " << j;
        EXPECT_EQ(vertical_slash_keeps(pattern, 6, i, j), expected) << i << ", " << j;
      }
    }
  }
}

TEST(VerticalSlashReference, BlockMaskEqualsItsDefinition) {
  // Random lists, lengths that end inside a block, block sizes 1 to 32: the mask (from
  // the block key lists), the pair rule and the kept-pair count against plain_keeps.
  std::mt19937 rng(4);
  for (int trial = 0; trial < 40; ++trial) {
    const int64_t length = std::uniform_int_distribution<int64_t>(1, 90)(rng);
    VerticalSlashHeadIndex index;
    index.block_size = std::vector<int64_t>{1, 2, 3, 8, 32}[static_cast<size_t>(trial % 5)];
    index.slashes = {0};
    for (int64_t j = 1; j < length; ++j) {
      if (rng() % 9 == 0) index.verticals.push_back(j);
      if (rng() % 11 == 0) index.slashes.push_back(j);
    }
    const at::Tensor mask = vertical_slash_mask(index, length);
    int64_t expected_pairs = 0;
    for (int64_t i = 0; i < length; ++i) {
      for (int64_t j = 0; j < length; ++j) {
        const bool expected = plain_keeps(index, length, i, j);
        expected_pairs += expected;
        ASSERT_EQ(mask[i][j].item<bool>(), expected) << "trial " << trial << ": " << i << ", " << j;
        ASSERT_EQ(vertical_slash_keeps(index, length, i, j), expected);
      }
    }
    EXPECT_EQ(vertical_slash_kept_pairs(index, length), expected_pairs);
    // The last rows alone: the same rows of the full mask.
    const int64_t first_row = length / 2;
    EXPECT_TRUE(vertical_slash_mask(index, length, first_row).equal(mask.narrow(0, first_row, length - first_row)));
  }
}

TEST(VerticalSlashReference, EveryKeyKeptIsDenseCausalAttention) {
  at::manual_seed(3);
  const std::vector<int64_t> lengths{17, 40, 3};
  const PackedSequences sequences = PackedSequences::from_lengths(lengths);
  const auto opts = at::TensorOptions().dtype(at::kDouble);
  at::Tensor q = at::randn({60, 4, 8}, opts).requires_grad_(true);
  at::Tensor k = at::randn({60, 2, 8}, opts).requires_grad_(true);
  at::Tensor v = at::randn({60, 2, 8}, opts).requires_grad_(true);
  VerticalSlashParams params;
  params.budget = VerticalSlashBudget::kTopK;
  params.vertical_count = 64;  // every column
  params.sink_tokens = 1;
  params.local_window = 1;
  const auto index = vertical_slash_index(q, k, sequences, params, 0.3);
  for (const auto& heads : index) {
    for (const auto& h : heads) EXPECT_NEAR(h.coverage, 1.0, 1e-12);
  }
  const VerticalSlashReferenceResult got = vertical_slash_reference(q, k, v, sequences, index, 0.3);
  const at::Tensor grad_out = at::randn({60, 4, 8}, opts);
  const auto grads = [&](const at::Tensor& out) {
    return torch::autograd::grad({out}, {q, k, v}, {grad_out}, /*retain_graph=*/true);
  };
  DenseCausalAttention dense;
  const at::Tensor expected = dense.forward(q, k, v, sequences, 0.3, 0);
  EXPECT_LT((got.out - expected).abs().max().item<double>(), 1e-12);
  const auto g = grads(got.out), e = grads(expected);
  for (size_t i = 0; i < 3; ++i) EXPECT_LT((g[i] - e[i]).abs().max().item<double>(), 1e-12) << i;
  // lse: the log of each row's softmax denominator.
  const at::Tensor first = q.narrow(0, 0, 17).select(1, 0).matmul(k.narrow(0, 0, 17).select(1, 0).t()) * 0.3;
  EXPECT_NEAR(got.lse[16][0].item<double>(), at::logsumexp(first[16], 0).item<double>(), 1e-12);
}

double max_diff(const at::Tensor& a, const at::Tensor& b) {
  return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>();
}

TEST(VerticalSlashAttentionCpu, EqualsTheReferenceForwardAndBackward) {
  // Varlen (one sequence shorter than the sinks and the window, one empty), GQA 7:1 and 4:2, exact
  // diagonals and blocks of 5, 16 and 64 (lengths ending inside a block), the index fixed
  // by hand and chosen online by top-p and top-k, float64 and float32.
  at::manual_seed(11);
  const std::vector<int64_t> lengths{70, 5, 0, 33, 129};
  const PackedSequences sequences = PackedSequences::from_lengths(lengths);
  const double scale = 0.35;
  for (const auto& [hq, hkv, block] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
           {7, 1, 1}, {4, 2, 1}, {7, 1, 16}, {4, 2, 64}, {4, 2, 5}}) {
    const auto d64 = at::TensorOptions().dtype(at::kDouble);
    const at::Tensor q0 = at::randn({237, hq, 8}, d64) * 2, k0 = at::randn({237, hkv, 8}, d64),
                     v0 = at::randn({237, hkv, 8}, d64), grad_out = at::randn({237, hq, 8}, d64);
    const auto indexes = test::vertical_slash_index_cases(q0, k0, sequences, block, scale);
    for (const auto& [name, index] : indexes) {
      at::Tensor qr = q0.clone().requires_grad_(true), kr = k0.clone().requires_grad_(true),
                 vr = v0.clone().requires_grad_(true);
      const VerticalSlashReferenceResult ref = vertical_slash_reference(qr, kr, vr, sequences, index, scale);
      const auto ref_grads = torch::autograd::grad({ref.out}, {qr, kr, vr}, {grad_out});
      int64_t mask_pairs = 0;
      for (size_t s = 0; s < lengths.size(); ++s) {
        for (int64_t h = 0; h < hq; ++h) mask_pairs += vertical_slash_mask(index[s][h], lengths[s]).sum().item<int64_t>();
      }
      for (const auto dtype : {at::kDouble, at::kFloat}) {
        SCOPED_TRACE(name + (dtype == at::kDouble ? " float64" : " float32") + " GQA " + std::to_string(hq) + ":" +
                     std::to_string(hkv) + " block " + std::to_string(block));
        const double tol = dtype == at::kDouble ? 1e-10 : 1e-5;
        at::Tensor q = q0.to(dtype).requires_grad_(true), k = k0.to(dtype).requires_grad_(true),
                   v = v0.to(dtype).requires_grad_(true);
        const VerticalSlashAttentionResult got = vertical_slash_attention_cpu(q, k, v, sequences, index, scale);
        EXPECT_EQ(got.kept_pairs, mask_pairs);
        EXPECT_LT(max_diff(got.out, ref.out), tol);
        EXPECT_LT(max_diff(got.lse, ref.lse), tol);
        const auto grads = torch::autograd::grad({got.out}, {q, k, v}, {grad_out.to(dtype)});
        // Gradients sum over query heads and blocks: float32 within 1e-5 of their scale.
        for (size_t i = 0; i < 3; ++i) {
          const double magnitude = std::max(1.0, ref_grads[i].abs().max().item<double>());
          EXPECT_LT(max_diff(grads[i], ref_grads[i]), tol * magnitude) << "gradient " << i;
        }
      }
    }
  }
}

// Tensor parallelism splits a layer's heads over ranks: each head's lists come from its
// own attention, so a shard's index and output are the whole layer's for its heads, and
// with set_head_shard_sum the statistics are the whole layer's on every shard. Two head
// shards (query heads 0-1 with KV head 0, 2-3 with KV head 1) stand for two TP ranks: a
// first pass records each shard's own sums, a second adds the other shard's.
TEST(VerticalSlashBackend, HeadShardsSharingTheirSumsReportTheWholeLayer) {
  at::manual_seed(9);
  const PackedSequences sequences = PackedSequences::from_lengths({40, 24, 33});
  const auto opts = at::TensorOptions().dtype(at::kDouble);
  at::Tensor q = at::randn({97, 4, 8}, opts);
  const at::Tensor k = at::randn({97, 2, 8}, opts), v = at::randn({97, 2, 8}, opts);
  q.narrow(1, 2, 2).mul_(3.0);  // sharper attention on the second shard's heads: the shards differ alone
  VerticalSlashParams params;
  params.budget = VerticalSlashBudget::kTopK;
  params.sink_tokens = 2;
  params.local_window = 3;
  params.vertical_count = 3;
  params.slash_count = 2;
  params.last_queries = 8;
  params.block_size = 4;
  VerticalSlashAttention whole_backend(params);
  const at::Tensor whole_out = whole_backend.forward(q, k, v, sequences, 0.35, 0);
  const AttentionLayerStats whole = whole_backend.take_layer_stats().at(0);

  const auto shard = [](const at::Tensor& t, int64_t s) { return t.narrow(1, s * t.size(1) / 2, t.size(1) / 2).contiguous(); };
  std::vector<std::vector<double>> own(2);
  std::vector<AttentionLayerStats> alone;
  for (int64_t s = 0; s < 2; ++s) {
    VerticalSlashAttention recording(params);
    recording.set_head_shard_sum([&own, s](std::vector<double>& sums) { own[static_cast<size_t>(s)] = sums; });
    recording.forward(shard(q, s), shard(k, s), shard(v, s), sequences, 0.35, 0);
    alone.push_back(recording.take_layer_stats().at(0));
  }
  EXPECT_NE(alone[0].top_k, alone[1].top_k) << "non-vacuous: alone, the shards report different kept keys";
  for (int64_t s = 0; s < 2; ++s) {
    VerticalSlashAttention sharing(params);
    const std::vector<double>& other = own[static_cast<size_t>(1 - s)];
    sharing.set_head_shard_sum([&other](std::vector<double>& sums) {
      ASSERT_EQ(sums.size(), other.size());
      for (size_t i = 0; i < sums.size(); ++i) sums[i] += other[i];
    });
    const at::Tensor out = sharing.forward(shard(q, s), shard(k, s), shard(v, s), sequences, 0.35, 0);
    EXPECT_LT(max_diff(out, whole_out.narrow(1, 2 * s, 2)), 1e-15) << "shard " << s;
    const AttentionLayerStats stats = sharing.take_layer_stats().at(0);
    EXPECT_EQ(stats.top_k, whole.top_k) << "shard " << s;
    EXPECT_EQ(stats.reference_top_k, whole.top_k);
    ASSERT_EQ(stats.coverage.size(), whole.coverage.size());
    for (size_t i = 0; i < stats.coverage.size(); ++i) EXPECT_NEAR(stats.coverage[i], whole.coverage[i], 1e-15);
    EXPECT_NEAR(stats.coverage_mean, whole.coverage_mean, 1e-15);
  }
}

TEST(VerticalSlashBackend, RecordsCoverageAndKeptKeysPerLayer) {
  // Two sequences, 2 query heads: the layer's coverage per sequence is the mean of its
  // heads' index coverage, its budget the kept keys per query (the kernel's pairs over
  // length x heads), and the output is the kernel's.
  at::manual_seed(5);
  const PackedSequences sequences = PackedSequences::from_lengths({40, 24});
  const auto opts = at::TensorOptions().dtype(at::kDouble);
  const at::Tensor q = at::randn({64, 2, 8}, opts), k = at::randn({64, 1, 8}, opts), v = at::randn({64, 1, 8}, opts);
  VerticalSlashParams params;
  params.budget = VerticalSlashBudget::kTopK;
  params.sink_tokens = 2;
  params.local_window = 3;
  params.vertical_count = 4;
  params.slash_count = 2;
  params.last_queries = 8;
  params.block_size = 4;  // sparse at these lengths (blocks of 64 would keep everything)
  VerticalSlashAttention backend(params);
  EXPECT_EQ(backend.name(), "vertical_slash");
  const at::Tensor out = backend.forward(q, k, v, sequences, 0.4, /*layer=*/3);
  const auto index = vertical_slash_index(q, k, sequences, params, 0.4);
  const VerticalSlashAttentionResult direct = vertical_slash_attention_cpu(q, k, v, sequences, index, 0.4);
  EXPECT_LT(max_diff(out, direct.out), 1e-15);
  const auto stats = backend.take_layer_stats();
  ASSERT_EQ(stats.size(), 1u);
  EXPECT_EQ(stats[0].layer, 3);
  ASSERT_EQ(stats[0].coverage.size(), 2u);
  for (size_t s = 0; s < 2; ++s) {
    EXPECT_NEAR(stats[0].coverage[s], (index[s][0].coverage + index[s][1].coverage) / 2, 1e-15);
    const double rows = 2.0 * static_cast<double>(sequences.length(static_cast<int64_t>(s)));
    EXPECT_EQ(stats[0].top_k[s], std::llround(static_cast<double>(direct.kept_pairs_per_sequence[s]) / rows));
    EXPECT_LT(stats[0].top_k[s], sequences.length(static_cast<int64_t>(s)) / 2) << "the pattern is sparse";
  }
  EXPECT_EQ(direct.kept_pairs, direct.kept_pairs_per_sequence[0] + direct.kept_pairs_per_sequence[1]);
  EXPECT_TRUE(backend.take_layer_stats().empty());
  // Generation: the prefill of one whole sequence is the pattern on it (the float64
  // reference of its own index); a decoding step attends densely to the cache (softmax
  // of the new query's scores over every cached key, written out).
  const at::Tensor prompt_q = q.narrow(0, 0, 40), prompt_k = k.narrow(0, 0, 40), prompt_v = v.narrow(0, 0, 40);
  const PackedSequences prompt = PackedSequences::from_lengths({40});
  const auto prompt_index = vertical_slash_index(prompt_q, prompt_k, prompt, params, 0.4);
  EXPECT_LT(vertical_slash_kept_pairs(prompt_index[0][0], 40), 40 * 41 / 2) << "the prompt's pattern is sparse";
  EXPECT_LT(max_diff(backend.forward_cached(prompt_q, prompt_k, prompt_v, 0.4),
                     vertical_slash_reference(prompt_q, prompt_k, prompt_v, prompt, prompt_index, 0.4).out),
            1e-12);
  const at::Tensor step_q = q.narrow(0, 40, 1);  // [1, 2, 8]: a new token after 40 cached ones
  const at::Tensor cache_k = k.narrow(0, 0, 41), cache_v = v.narrow(0, 0, 41);
  const at::Tensor expected =
      at::softmax(at::matmul(step_q.select(0, 0), cache_k.select(1, 0).t()) * 0.4, 1).matmul(cache_v.select(1, 0));
  EXPECT_LT(max_diff(backend.forward_cached(step_q, cache_k, cache_v, 0.4).select(0, 0), expected), 1e-12);
  EXPECT_TRUE(backend.take_layer_stats().empty());
  params.local_window = 0;
  EXPECT_THROW(VerticalSlashAttention{params}, std::invalid_argument);
}

}  // namespace
}  // namespace sb
