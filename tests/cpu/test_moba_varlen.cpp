// The varlen pipeline behind MoBA on CUDA (gather, diagonal and selected-block varlen
// calls, log-sum-exp merge, backward with the merged output) run on the CPU with a
// float64 varlen op written here with flash-attention's conventions (bottom-right
// causal mask, lse [H, Nq], backward from the given out and lse). Checked against the
// float64 MoBA oracle, so everything but the flash kernels themselves is covered
// without a GPU.

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <limits>
#include <map>
#include <tuple>
#include <string>
#include <vector>

#include "kernels/attention/patterns/moba/moba_attention.h"
#include "kernels/attention/patterns/moba/moba_key_blocks.h"
#include "kernels/attention/core/block_layout.h"
#include "kernels/attention/patterns/moba/moba_reference.h"
#include "kernels/attention/patterns/moba/moba_token_routing.h"
#include "kernels/attention/patterns/moba/moba_token_varlen_plan.h"
#include "kernels/attention/patterns/moba/moba_varlen_attention.h"
#include "tests/cpu/test_moba_support.h"

namespace sb {
namespace {

using test::moba_max_abs_diff;
using test::moba_random_inputs;

std::vector<int64_t> host_offsets(const at::Tensor& cu) {
  const at::Tensor c = cu.to(at::kLong).cpu().contiguous();
  return std::vector<int64_t>(c.const_data_ptr<int64_t>(), c.const_data_ptr<int64_t>() + c.numel());
}

class Float64VarlenAttention final : public VarlenAttentionOps {
 public:
  VarlenAttentionForward forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                 const at::Tensor& cu_q, const at::Tensor& cu_k, int64_t max_q,
                                 int64_t max_k, bool causal, double scale) const override {
    std::vector<at::Tensor> outs, lses;
    for_each_segment(q, k, cu_q, cu_k, max_q, max_k, [&](int64_t q0, int64_t lq, int64_t k0, int64_t lk) {
      const at::Tensor qs = q.narrow(0, q0, lq), ks = expand(k.narrow(0, k0, lk), q.size(1));
      const at::Tensor vs = expand(v.narrow(0, k0, lk), q.size(1));
      const at::Tensor s = scores(qs, ks, causal, scale);                   // [H, lq, lk]
      lses.push_back(at::logsumexp(s, {-1}));                               // [H, lq]
      outs.push_back(at::einsum("hij,jhd->ihd", {at::softmax(s, -1), vs}));  // [lq, H, D]
    });
    return {at::cat(outs, 0), at::cat(lses, 1), at::Tensor(), at::Tensor()};
  }

  std::tuple<at::Tensor, at::Tensor, at::Tensor> backward(
      const at::Tensor& grad_out, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
      const at::Tensor& out, const at::Tensor& lse, const at::Tensor& cu_q, const at::Tensor& cu_k,
      int64_t max_q, int64_t max_k, bool causal, double scale,
      const VarlenAttentionForward& /*state*/) const override {
    const int64_t heads = q.size(1), kv_heads = k.size(1);
    at::Tensor dq = at::zeros_like(q), dk = at::zeros_like(k), dv = at::zeros_like(v);
    for_each_segment(q, k, cu_q, cu_k, max_q, max_k, [&](int64_t q0, int64_t lq, int64_t k0, int64_t lk) {
      const at::Tensor qs = q.narrow(0, q0, lq), ks = expand(k.narrow(0, k0, lk), heads);
      const at::Tensor vs = expand(v.narrow(0, k0, lk), heads);
      const at::Tensor dos = grad_out.narrow(0, q0, lq), os = out.narrow(0, q0, lq);
      const at::Tensor p =
          (scores(qs, ks, causal, scale) - lse.narrow(1, q0, lq).unsqueeze(-1)).exp();  // [H, lq, lk]
      const at::Tensor delta = (dos * os).sum(-1).t().unsqueeze(-1);                  // [H, lq, 1]
      const at::Tensor ds = p * (at::einsum("ihd,jhd->hij", {dos, vs}) - delta);
      dq.narrow(0, q0, lq).copy_(at::einsum("hij,jhd->ihd", {ds, ks}) * scale);
      const int64_t group = heads / kv_heads, dim = q.size(2);
      dk.narrow(0, k0, lk).copy_((at::einsum("hij,ihd->jhd", {ds, qs}) * scale)
                                     .view({lk, kv_heads, group, dim}).sum(2));
      dv.narrow(0, k0, lk).copy_(at::einsum("hij,ihd->jhd", {p, dos}).view({lk, kv_heads, group, dim}).sum(2));
    });
    return {dq, dk, dv};
  }

 private:
  template <typename F>
  static void for_each_segment(const at::Tensor& q, const at::Tensor& k, const at::Tensor& cu_q,
                               const at::Tensor& cu_k, int64_t max_q, int64_t max_k, F&& f) {
    const auto cq = host_offsets(cu_q), ck = host_offsets(cu_k);
    EXPECT_EQ(cq.size(), ck.size());
    EXPECT_EQ(cq.back(), q.size(0));
    EXPECT_EQ(ck.back(), k.size(0));
    for (size_t i = 0; i + 1 < cq.size(); ++i) {
      const int64_t lq = cq[i + 1] - cq[i], lk = ck[i + 1] - ck[i];
      EXPECT_LE(lq, max_q) << "max_q understates segment " << i;
      EXPECT_LE(lk, max_k) << "max_k understates segment " << i;
      EXPECT_GE(lk, 1) << "segment " << i << " has no key";
      f(cq[i], lq, ck[i], lk);
    }
  }
  static at::Tensor expand(const at::Tensor& x, int64_t heads) {  // [L, Hk, D] -> [L, H, D]
    return x.repeat_interleave(heads / x.size(1), 1);
  }
  // [H, lq, lk] scaled scores; causal: query r sees keys 0 .. r + lk - lq.
  static at::Tensor scores(const at::Tensor& qs, const at::Tensor& ks, bool causal, double scale) {
    at::Tensor s = at::einsum("ihd,jhd->hij", {qs, ks}) * scale;
    if (causal) {
      const int64_t lq = qs.size(0), lk = ks.size(0);
      const at::Tensor visible = at::ones({lq, lk}, at::kBool).tril(lk - lq);
      s = s.masked_fill(visible.logical_not(), -std::numeric_limits<double>::infinity());
    }
    return s;
  }
};

struct VarlenCase {
  std::string name;
  std::vector<int64_t> query_lengths, key_lengths;
  int64_t block_size, top_k, q_heads, kv_heads;
  bool causal;
};

class MobaVarlenTest : public ::testing::TestWithParam<std::tuple<VarlenCase, MobaGate>> {};

TEST_P(MobaVarlenTest, PipelineMatchesTheFloat64Reference) {
  const auto& [c, gate] = GetParam();
  const auto queries = PackedSequences::from_lengths(c.query_lengths);
  const auto keys = PackedSequences::from_lengths(c.key_lengths);
  MobaParams params = test::moba_test_params(c.block_size, {c.top_k}, 0.3, gate);
  params.causal = c.causal;
  const auto in = moba_random_inputs(c.query_lengths, c.key_lengths, c.q_heads, c.kv_heads, 8,
                                     at::kDouble, 99 + c.block_size);
  const BlockLayout layout = BlockLayout::build(keys, queries, c.block_size, c.causal);
  // A small budget forces several chunks of part 2.
  const MobaVarlenPlan plan =
      gate == MobaGate::kToken
          ? moba_token_varlen_plan(layout, moba_route_tokens(in.q, in.k, layout, params), c.q_heads, c.kv_heads, 8, 8,
                                   params.scale, 4096)
          : moba_varlen_plan(layout, moba_route_cpu(in.q, in.k, layout, params), c.q_heads, c.kv_heads, 8, 8,
                             params.scale, 2048);
  if (c.top_k > 1) EXPECT_GT(plan.chunks.size(), 1u) << "chunking is not exercised";
  const Float64VarlenAttention ops;

  at::Tensor q = in.q.clone().requires_grad_(true), k = in.k.clone().requires_grad_(true);
  at::Tensor v = in.v.clone().requires_grad_(true);
  auto [out, lse] = moba_varlen_attention(q, k, v, plan, ops);
  (out * in.grad_out).sum().backward();
  const test::MobaGrads expected = test::moba_run_with_grads(in, queries, keys, params, true);
  test::expect_moba_grads_near({out, q.grad(), k.grad(), v.grad()}, expected, 1e-11);
  const MobaReferenceResult reference = moba_reference(in.q, in.k, in.v, queries, keys, params);
  EXPECT_LT(moba_max_abs_diff(lse, reference.lse), 1e-11);
}

INSTANTIATE_TEST_SUITE_P(
    TrainingDecodingPacked, MobaVarlenTest,
    ::testing::Combine(
        ::testing::Values(VarlenCase{"packed_training", {37, 5, 64}, {37, 5, 64}, 8, 3, 4, 2, true},
                          VarlenCase{"gqa_8_to_1", {50}, {50}, 8, 4, 8, 1, true},
                          VarlenCase{"diagonal_only", {40, 9}, {40, 9}, 8, 1, 2, 1, true},
                          VarlenCase{"decode_one_token", {1}, {45}, 8, 3, 4, 2, true},
                          VarlenCase{"decode_chunks_packed", {5, 11}, {45, 40}, 8, 3, 4, 2, true},
                          VarlenCase{"not_causal", {29, 12}, {29, 12}, 8, 2, 4, 2, false}),
        ::testing::Values(MobaGate::kBlock, MobaGate::kToken)),
    [](const auto& info) {
      return std::get<0>(info.param).name + "_" + test::moba_gate_name(std::get<1>(info.param)) + "_gate";
    });

// The token plan gathers exactly the selected (query, head, earlier block) pairs: one
// segment per (head, block) with the queries that chose it, in query order, each against
// that one block's keys of the head's key/value head.
TEST(MobaTokenVarlenPlan, GathersEachSelectedPairOnceAgainstItsBlock) {
  const std::vector<int64_t> lengths = {45, 20};
  const auto packed = PackedSequences::from_lengths(lengths);
  const auto in = moba_random_inputs(lengths, lengths, 4, 2, 8, at::kDouble, 7);
  const MobaParams params = test::moba_test_params(8, {3}, 0.3, MobaGate::kToken);
  const BlockLayout layout = BlockLayout::build(packed, packed, 8, true);
  const MobaRouting routing = moba_route_tokens(in.q, in.k, layout, params);
  const MobaVarlenPlan plan = moba_token_varlen_plan(layout, routing, 4, 2, 8, 8, params.scale, 4096);
  ASSERT_GT(plan.chunks.size(), 1u);
  EXPECT_EQ(plan.slots, routing.selected.size(2));
  // Expected pairs from the routing, by (head, block): the queries in order.
  std::map<std::pair<int64_t, int64_t>, std::vector<int64_t>> expected;
  const at::Tensor ids = routing.selected.to(at::kLong);
  int64_t pairs = 0;
  for (int64_t h = 0; h < 4; ++h) {
    for (int64_t b = 0; b < layout.num_blocks(); ++b) {
      const LayoutBlock& block = layout.blocks[b];
      for (int64_t t = block.query_start; t < block.query_start + block.query_len; ++t) {
        for (int64_t s = 0; s < ids.size(2); ++s) {
          const int64_t j = ids[h][t][s].item<int64_t>();
          if (j < 0 || j == b) continue;
          expected[{h, j}].push_back(t * 4 + h);
          ++pairs;
        }
      }
    }
  }
  ASSERT_GT(pairs, 0);
  std::map<std::pair<int64_t, int64_t>, std::vector<int64_t>> actual;
  int64_t gathered = 0;
  for (const MobaVarlenChunk& chunk : plan.chunks) {
    const auto cu_q = host_offsets(chunk.cu_q), cu_k = host_offsets(chunk.cu_k);
    const at::Tensor entries = chunk.key_blocks.entries.cpu();
    ASSERT_EQ(entries.size(0) + 1, static_cast<int64_t>(cu_q.size()));
    for (int64_t e = 0; e < entries.size(0); ++e) {
      const int64_t source = entries[e][kKeyBlockSource].item<int64_t>();
      int64_t j = 0;
      while (layout.blocks[j].key_start != source) ++j;
      EXPECT_EQ(entries[e][kKeyBlockTokens].item<int64_t>(), layout.blocks[j].key_len);
      EXPECT_EQ(cu_k[e + 1] - cu_k[e], layout.blocks[j].key_len);
      const int64_t g = entries[e][kKeyBlockHead].item<int64_t>();
      std::vector<int64_t> rows;
      for (int64_t r = cu_q[e]; r < cu_q[e + 1]; ++r) rows.push_back(chunk.q_index[r].item<int64_t>());
      const int64_t h = rows.front() % 4;
      EXPECT_EQ(g, h / 2);
      EXPECT_TRUE(actual.emplace(std::make_pair(h, j), rows).second) << "segment (" << h << ", " << j << ") twice";
      gathered += static_cast<int64_t>(rows.size());
    }
  }
  EXPECT_EQ(gathered, pairs);
  EXPECT_EQ(actual, expected);
}

TEST(MobaVarlenPlan, IndicesGatherTheSelectedBlocksOfEachRow) {
  // One sequence of 3 blocks of 4, one head, k = 3: the last query block's row gathers
  // queries 8..11 and the keys of blocks 0 and 1 in ascending order.
  const auto packed = PackedSequences::from_lengths({12});
  const MobaParams params = test::moba_test_params(4, {3}, 1.0);
  const auto in = moba_random_inputs({12}, {12}, 1, 1, 8, at::kDouble, 1);
  const BlockLayout layout = BlockLayout::build(packed, packed, 4, true);
  const MobaRouting routing = moba_route_cpu(in.q, in.k, layout, params);
  const MobaVarlenPlan plan = moba_varlen_plan(layout, routing, 1, 1, 8, 8, 1.0);
  ASSERT_EQ(plan.chunks.size(), 1u);
  const MobaVarlenChunk& chunk = plan.chunks[0];
  EXPECT_EQ(host_offsets(chunk.cu_q), (std::vector<int64_t>{0, 4, 8}));   // rows of blocks 1, 2
  EXPECT_EQ(host_offsets(chunk.cu_k), (std::vector<int64_t>{0, 4, 12}));  // 1 and 2 earlier blocks
  EXPECT_EQ(host_offsets(chunk.q_index), (std::vector<int64_t>{4, 5, 6, 7, 8, 9, 10, 11}));
  // kcap = 3 slots per row: block 1's row selects {0, 1} (1 is the diagonal, then
  // padding); block 2's row selects {0, 1, 2}. Entry: source, tokens, target, head.
  const MobaKeyBlocks& keys = chunk.key_blocks;
  EXPECT_EQ(host_offsets(keys.entries.flatten()),
            (std::vector<int64_t>{0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,  //
                                  0, 4, 4, 0, 4, 4, 8, 0, 0, 0, 0, 0}));
  EXPECT_EQ(keys.gathered_rows, 12);
  const MobaKeyBlockRuns runs = moba_key_block_runs(keys);
  EXPECT_EQ(host_offsets(runs.order), (std::vector<int64_t>{0, 3, 4}));  // block 0 twice, then 1
  EXPECT_EQ(host_offsets(runs.runs), (std::vector<int64_t>{0, 2, 3}));
  const at::Tensor key_rows = at::tensor(std::vector<int64_t>{0, 1, 2, 3, 0, 1, 2, 3, 4, 5, 6, 7});
  EXPECT_TRUE(at::equal(gather_key_blocks(in.k, keys), in.k.index_select(0, key_rows)));
  EXPECT_EQ(host_offsets(plan.self_cu_q), (std::vector<int64_t>{0, 4, 8, 12}));
  EXPECT_FALSE(plan.self_kv_index.defined()) << "training: the diagonal keys are k itself";
}

class MobaKeyBlocksTest : public ::testing::TestWithParam<bool> {};  // causal or not

TEST_P(MobaKeyBlocksTest, GatherAndGradientSumMatchRowIndexing) {
  // Packed sequences with partial last blocks (selected as earlier blocks only when not
  // causal), grouped heads (3 query heads per kv head) and a chunk bound small enough to
  // split the rows: every chunk's gathered keys equal indexing k row by row, and the
  // gradients summed per block equal index_add_.
  const std::vector<int64_t> lengths{45, 7, 70};
  const auto packed = PackedSequences::from_lengths(lengths);
  const int64_t q_heads = 6, kv_heads = 2, dim = 5;
  const MobaParams params = test::moba_test_params(8, {4}, 0.5);
  const auto in = moba_random_inputs(lengths, lengths, q_heads, kv_heads, dim, at::kDouble, 7);
  const BlockLayout layout = BlockLayout::build(packed, packed, 8, GetParam());
  const MobaRouting routing = moba_route_cpu(in.q, in.k, layout, params);
  const MobaVarlenPlan plan = moba_varlen_plan(layout, routing, q_heads, kv_heads, dim, 8, 0.5,
                                               /*gathered_bytes_per_chunk=*/4000);
  ASSERT_GT(plan.chunks.size(), 2u);
  at::Tensor dk = at::zeros_like(in.k), dk_oracle = at::zeros_like(in.k);
  int64_t gathered = 0;
  for (const MobaVarlenChunk& chunk : plan.chunks) {
    const at::Tensor rows = test::key_rows_of(chunk.key_blocks);
    ASSERT_TRUE(rows.ge(0).all().item<bool>()) << "a gathered row no entry writes";
    const at::Tensor by_rows = in.k.view({-1, dim}).index_select(0, rows).unsqueeze(1);
    EXPECT_TRUE(at::equal(gather_key_blocks(in.k, chunk.key_blocks), by_rows));
    const at::Tensor grad = at::randn({rows.size(0), 1, dim}, at::kDouble);
    add_key_block_grads(dk, grad, chunk.key_blocks, moba_key_block_runs(chunk.key_blocks));
    dk_oracle.view({-1, dim}).index_add_(0, rows, grad.squeeze(1));
    gathered += rows.size(0);
  }
  EXPECT_GT(gathered, 0);
  EXPECT_LT(moba_max_abs_diff(dk, dk_oracle), 1e-12);
  EXPECT_GT(dk.abs().sum().item<double>(), 0.0);
}

INSTANTIATE_TEST_SUITE_P(CausalAndNot, MobaKeyBlocksTest, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "causal" : "not_causal"; });

TEST(MobaKeyBlocks, ManyCopiesOfOnePartialBlockSumInOrder) {
  const MobaKeyBlocks blocks = test::many_copies_of_one_block();
  EXPECT_EQ(test::key_rows_of(blocks).ge(0).all().item<bool>(), true);
  const at::Tensor k = at::randn({40, 2, 3}, at::kDouble);
  EXPECT_TRUE(at::equal(gather_key_blocks(k, blocks),
                        k.view({-1, 3}).index_select(0, test::key_rows_of(blocks)).unsqueeze(1)));
  const at::Tensor grad = at::randn({blocks.gathered_rows, 1, 3}, at::kDouble);
  at::Tensor dk = at::zeros_like(k), oracle = at::zeros_like(k);
  const MobaKeyBlockRuns runs = moba_key_block_runs(blocks);
  add_key_block_grads(dk, grad, blocks, runs);
  oracle.view({-1, 3}).index_add_(0, test::key_rows_of(blocks), grad.squeeze(1));
  EXPECT_LT(moba_max_abs_diff(dk, oracle), 1e-12);
  EXPECT_EQ(runs.runs.numel(), 3) << "two sources";
  // Keys of another call are refused: the kernels do not bound-check each entry.
  EXPECT_THROW(gather_key_blocks(at::randn({39, 2, 3}, at::kDouble), blocks), c10::Error);
}

}  // namespace
}  // namespace sb
