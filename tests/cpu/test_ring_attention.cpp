// Context-parallel ring attention, in one process: the layouts dealt by hand, the tiles,
// every rank's steps composed (each rank's queries against every shard, merged with the
// log-sum-exp rule; each shard's dK/dV summed over the ranks) against the one-rank
// float64 oracle, the autograd path at cp = 1, and worker imbalance computed by hand.
// The multi-process ring itself: tests/dist/test_ring_attention_dist.cpp.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <cstdio>
#include <map>
#include <tuple>

#include "kernels/attention/patterns/moba/moba_attention.h"
#include "kernels/attention/patterns/moba/moba_token_routing.h"
#include "kernels/attention/ring/cp_sharding.h"
#include "kernels/attention/ring/ring_attention.h"
#include "kernels/attention/patterns/vertical_slash/vertical_slash_ring_pattern.h"
#include "kernels/attention/ring/ring_column_step_cpu.h"
#include "kernels/attention/ring/ring_query_block_step_cpu.h"
#include "kernels/attention/ring/ring_step_cpu.h"
#include "harness/trace/iteration_metrics.h"  // max_over_mean: the worker imbalance of the records
#include "tests/support/ring_attention_cases.h"

namespace sb {
namespace {

using test::RingCase;

std::vector<int64_t> ids(std::initializer_list<int64_t> values) { return values; }

TEST(CpSharding, LayoutsDealTokensAsWrittenInTheDocs) {
  const PackedSequences sequences = PackedSequences::from_lengths({10, 5});
  const CpSharding contiguous = CpSharding::build(sequences, 2, {CpLayoutKind::kContiguous, 0});
  EXPECT_EQ(contiguous.tokens_of(0), ids({0, 1, 2, 3, 4, 10, 11}));
  EXPECT_EQ(contiguous.tokens_of(1), ids({5, 6, 7, 8, 9, 12, 13, 14}));
  // Zigzag: chunks of 10 start at 0, 2, 5, 7 (rank 0: chunks 0 and 3); of 5 at 0, 1, 2, 3.
  const CpSharding zigzag = CpSharding::build(sequences, 2, {CpLayoutKind::kZigzag, 0});
  EXPECT_EQ(zigzag.tokens_of(0), ids({0, 1, 7, 8, 9, 10, 13, 14}));
  EXPECT_EQ(zigzag.tokens_of(1), ids({2, 3, 4, 5, 6, 11, 12}));
  // Striped by 4: stripes numbered across the micro-batch, the last of a sequence partial.
  const CpSharding striped = CpSharding::build(sequences, 2, {CpLayoutKind::kStriped, 4});
  EXPECT_EQ(striped.tokens_of(0), ids({0, 1, 2, 3, 8, 9, 14}));
  EXPECT_EQ(striped.tokens_of(1), ids({4, 5, 6, 7, 10, 11, 12, 13}));
  EXPECT_EQ(striped.positions_of(1), ids({4, 5, 6, 7, 0, 1, 2, 3}));

  const at::Tensor whole = at::arange(15 * 3, at::kFloat).view({15, 3});
  std::vector<at::Tensor> parts{striped.shard(whole, 0), striped.shard(whole, 1)};
  EXPECT_TRUE(at::equal(parts[1].select(1, 0), at::tensor({12, 15, 18, 21, 30, 33, 36, 39}, at::kFloat)));
  EXPECT_TRUE(at::equal(striped.unshard(parts), whole));

  EXPECT_THROW(CpSharding::build(sequences, 0, {}), std::invalid_argument);
  EXPECT_THROW(CpSharding::build(sequences, 2, {CpLayoutKind::kStriped, 0}), std::invalid_argument);
  EXPECT_EQ(cp_layout_options().from_name("zigzag"), CpLayoutKind::kZigzag);
}

TEST(CpSharding, EveryTokenOnExactlyOneRank) {
  const PackedSequences sequences = PackedSequences::from_lengths(test::ring_sequence_lengths());
  for (int64_t cp : {1, 2, 3, 4, 8}) {
    for (const CpLayout layout : {CpLayout{CpLayoutKind::kContiguous, 0}, CpLayout{CpLayoutKind::kZigzag, 0},
                                  CpLayout{CpLayoutKind::kStriped, 5}}) {
      const CpSharding sharding = CpSharding::build(sequences, cp, layout);
      std::vector<int> seen(sequences.total_tokens(), 0);
      for (int64_t r = 0; r < cp; ++r) {
        const std::vector<int64_t>& tokens = sharding.tokens_of(r);
        EXPECT_TRUE(std::is_sorted(tokens.begin(), tokens.end()));
        for (int64_t t : tokens) ++seen[t];
      }
      EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), sequences.total_tokens()) << layout.name() << " cp " << cp;
    }
  }
}

TEST(RingShardTiles, RunsCutAtBlocksAndGaps) {
  const PackedSequences sequences = PackedSequences::from_lengths({10, 5});
  const BlockLayout layout = BlockLayout::build(sequences, sequences, 4, true);  // blocks 0-3,4-7,8-9,10-13,14
  const RingShardTiles tiles = RingShardTiles::build({0, 1, 2, 3, 8, 9, 14}, layout);
  ASSERT_EQ(tiles.tiles.size(), 3u);
  EXPECT_EQ(tiles.tiles[1].local_start, 4);
  EXPECT_EQ(tiles.tiles[1].length, 2);
  EXPECT_EQ(tiles.tiles[1].global_start, 8);
  EXPECT_EQ(tiles.tiles[1].block, 2);
  EXPECT_EQ(tiles.first_tile_of_block, ids({0, 1, 1, 2, 2, 3}));
  EXPECT_EQ(tiles.block_of_rows(), ids({0, 0, 0, 0, 2, 2, 4}));
  const RingShardTiles split = RingShardTiles::build({2, 3, 4, 5, 9, 10}, layout);  // crosses 2 block ends
  ASSERT_EQ(split.tiles.size(), 4u);
  EXPECT_EQ(split.tiles[2].block, 2);
  EXPECT_EQ(split.tiles[3].block, 3);
}

double max_diff(const at::Tensor& a, const at::Tensor& b) {
  return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>();
}

// Every rank's steps in one process: the ring's arithmetic without its transfers.
struct Composed {
  at::Tensor out, lse, dq, dk, dv;
  std::vector<int64_t> kept_per_rank;
};

// query_blocks: per rank, the key blocks kept per query outside `pattern` (empty: none).
Composed compose_ring(const test::RingInputs& in, const CpSharding& sharding, const RingBlockPattern& pattern,
                      const BlockLayout& layout, const RingColumnLists* columns = nullptr,
                      const std::vector<RingQueryBlockLists>& query_blocks = {}) {
  const int64_t cp = sharding.cp();
  std::vector<RingShardTiles> shards;
  for (int64_t r = 0; r < cp; ++r) shards.push_back(RingShardTiles::build(sharding.tokens_of(r), layout));
  std::vector<at::Tensor> q(cp), k(cp), v(cp), g(cp), out(cp), lse(cp), dq(cp), dk(cp), dv(cp);
  Composed c;
  for (int64_t r = 0; r < cp; ++r) {
    q[r] = sharding.shard(in.q, r).contiguous();
    k[r] = sharding.shard(in.k, r).contiguous();
    v[r] = sharding.shard(in.v, r).contiguous();
    g[r] = sharding.shard(in.grad_out, r).contiguous();
    out[r] = at::zeros_like(q[r]);
    lse[r] = at::full({q[r].size(0), q[r].size(1)}, -INFINITY, q[r].options());
    dq[r] = at::zeros_like(q[r]);
    dk[r] = at::zeros_like(k[r]);
    dv[r] = at::zeros_like(v[r]);
  }
  for (int64_t r = 0; r < cp; ++r) {
    int64_t kept = 0;
    for (int64_t s = 0; s < cp; ++s) {
      at::Tensor out_step = at::empty_like(q[r]), lse_step = at::empty_like(lse[r]);
      kept += ring_step_forward(q[r], k[s], v[s], {shards[r], shards[s], pattern, test::ring_scale()}, out_step, lse_step);
      ring_merge_partial(out[r], lse[r], out_step, lse_step);
      if (columns) {
        kept += ring_column_step_forward(q[r], k[s], v[s], shards[r], shards[s], *columns, test::ring_scale(), out_step,
                                         lse_step);
        ring_merge_partial(out[r], lse[r], out_step, lse_step);
      }
      if (!query_blocks.empty()) {
        kept += ring_query_block_step_forward(q[r], k[s], v[s], shards[s], query_blocks[r], test::ring_scale(),
                                              out_step, lse_step);
        ring_merge_partial(out[r], lse[r], out_step, lse_step);
      }
    }
    c.kept_per_rank.push_back(kept);
  }
  for (int64_t r = 0; r < cp; ++r) {
    const at::Tensor delta = (g[r] * out[r]).sum(-1);
    for (int64_t s = 0; s < cp; ++s) {
      ring_step_backward(g[r], q[r], k[s], v[s], lse[r], delta, {shards[r], shards[s], pattern, test::ring_scale()},
                         dq[r], dk[s], dv[s]);
      if (columns) {
        ring_column_step_backward(g[r], q[r], k[s], v[s], lse[r], delta, shards[r], shards[s], *columns,
                                  test::ring_scale(), dq[r], dk[s], dv[s]);
      }
      if (!query_blocks.empty()) {
        ring_query_block_step_backward(g[r], q[r], k[s], v[s], lse[r], delta, shards[s], query_blocks[r],
                                       test::ring_scale(), dq[r], dk[s], dv[s]);
      }
    }
  }
  c.out = sharding.unshard(out);
  c.lse = sharding.unshard(lse);
  c.dq = sharding.unshard(dq);
  c.dk = sharding.unshard(dk);
  c.dv = sharding.unshard(dv);
  return c;
}

// Rank r's rows of a one-rank token routing, without each query's own block.
RingQueryBlockLists token_earlier_blocks(const MobaRouting& routing, const CpSharding& sharding, int64_t r,
                                         const BlockLayout& layout) {
  at::Tensor ids = sharding.shard(routing.selected.permute({1, 0, 2}), r).permute({1, 0, 2}).contiguous();
  const std::vector<int64_t> own = RingShardTiles::build(sharding.tokens_of(r), layout).block_of_rows();
  ids.masked_fill_(ids.eq(at::tensor(own, at::kLong).to(at::kInt).view({1, -1, 1})), -1);
  return RingQueryBlockLists(ids, layout.num_blocks());
}

TEST(RingAttentionSteps, ComposedStepsEqualTheOneRankOracle) {
  for (int64_t cp : {1, 2, 3, 4}) {
    for (const RingCase& c : test::ring_cases(2)) {
      const PackedSequences sequences = PackedSequences::from_lengths(c.lengths);
      const BlockLayout layout = BlockLayout::build(sequences, sequences, test::kRingBlock, true);
      const test::RingInputs in = test::ring_inputs(c.dtype, 7, c.lengths);
      const test::RingOracle oracle = test::ring_oracle(in, c);
      // Vertical-slash: its slash blocks as the pattern, its columns as the second partial.
      const RingCallPattern vs =
          c.vertical_slash ? vertical_slash_ring_pattern(test::ring_vertical_slash_index_oracle(in), layout)
                           : RingCallPattern{};
      if (c.vertical_slash && c.lengths.size() > 1) {  // both parts of the pattern take part
        EXPECT_GT(vs.columns->total(), 0) << c.name;
        EXPECT_GT(vs.blocks.count.sum().item<int64_t>(), layout.num_blocks() * test::kRingQHeads) << c.name;
      }
      const CpSharding sharding = CpSharding::build(sequences, cp, c.layout);
      // MoBA's token gate: the one-rank routing's own blocks as the pattern, each rank's
      // queries' earlier blocks as its lists.
      std::vector<RingQueryBlockLists> query_blocks;
      const RingBlockPattern pattern = [&] {
        if (c.vertical_slash) return vs.blocks;
        if (!c.moba) return RingBlockPattern::causal(layout);
        if (c.gate == MobaGate::kToken) {
          const MobaRouting routing = moba_route_tokens(in.q, in.k, layout, test::ring_moba_params(c));
          for (int64_t r = 0; r < cp; ++r) query_blocks.push_back(token_earlier_blocks(routing, sharding, r, layout));
          const int64_t blocks = layout.num_blocks();
          return RingBlockPattern{at::arange(blocks, at::kInt).view({1, blocks, 1}), at::ones({1, blocks}, at::kInt)};
        }
        const MobaRouting routing = moba_route_cpu(in.q, in.k, layout, test::ring_moba_params());
        return RingBlockPattern{routing.selected, routing.selected_count};
      }();
      const Composed got = compose_ring(in, sharding, pattern, layout, c.vertical_slash ? vs.columns.get() : nullptr,
                                        query_blocks);
      const double tol = test::ring_tolerance(c.dtype);
      const std::string what = c.name + " cp " + std::to_string(cp);
      EXPECT_LT(max_diff(got.out, oracle.out), tol) << what;
      EXPECT_LT(max_diff(got.lse, oracle.lse), tol) << what;
      EXPECT_LT(max_diff(got.dq, oracle.dq), tol) << what;
      EXPECT_LT(max_diff(got.dk, oracle.dk), tol) << what;
      EXPECT_LT(max_diff(got.dv, oracle.dv), tol) << what;
    }
  }
}

TEST(RingAttention, OneRankThroughAutogradEqualsTheOracle) {
  const PackedSequences sequences = PackedSequences::from_lengths(test::ring_sequence_lengths());
  for (const auto& [moba, vertical_slash, gate] : std::vector<std::tuple<bool, bool, MobaGate>>{
           {false, false, MobaGate::kBlock}, {true, false, MobaGate::kBlock}, {true, false, MobaGate::kToken},
           {false, true, MobaGate::kBlock}}) {
    const test::RingInputs in = test::ring_inputs(at::kDouble, 3);
    auto context = std::make_shared<RingContext>(nullptr, 0, 1, 0, std::chrono::milliseconds(1000));
    at::Tensor q = in.q.clone().requires_grad_(true), k = in.k.clone().requires_grad_(true),
               v = in.v.clone().requires_grad_(true);
    // The token gate under DST's request: budgets per sequence and a floor.
    const bool dst = gate == MobaGate::kToken;
    RingCase c{"one rank", {CpLayoutKind::kStriped, 8}, moba, at::kDouble, 0, test::ring_sequence_lengths(),
               vertical_slash, gate, dst};
    const test::RingOracle oracle = test::ring_oracle(in, c);
    const std::shared_ptr<RingPatternSelector> selector = test::ring_selector(c);
    const RingAttentionResult result = ring_attention(q, k, v, CpSharding::build(sequences, 1, c.layout), *selector,
                                                      test::ring_request(c), test::ring_scale(), context);
    if (dst) {  // the statistics are the one-rank routing's
      const MobaRouting one_rank = moba_route_tokens(in.q, in.k, BlockLayout::build(sequences, sequences,
                                                                                    test::kRingBlock, true),
                                                     test::ring_moba_params(c));
      EXPECT_EQ(result.stats.top_k, one_rank.top_k);
      EXPECT_EQ(result.stats.k_floor, one_rank.k_floor);
      EXPECT_GT(result.stats.k_floor, 1);  // the floor raised some budget
      EXPECT_EQ(result.stats.coverage, one_rank.coverage);
      EXPECT_EQ(result.stats.coverage_curve, one_rank.coverage_curve);
    }
    if (vertical_slash) {  // the ring's index is the one-rank rule's
      const auto expected = test::ring_vertical_slash_index_oracle(in);
      const auto& index = test::ring_last_index(*selector);
      ASSERT_EQ(index.size(), expected.size());
      for (size_t s = 0; s < expected.size(); ++s) {
        for (size_t h = 0; h < expected[s].size(); ++h) {
          EXPECT_EQ(index[s][h].verticals, expected[s][h].verticals);
          EXPECT_EQ(index[s][h].slashes, expected[s][h].slashes);
          EXPECT_NEAR(index[s][h].coverage, expected[s][h].coverage, 1e-12);
        }
      }
    }
    (result.out * in.grad_out).sum().backward();
    EXPECT_LT(max_diff(result.out, oracle.out), 1e-10);
    EXPECT_LT(max_diff(result.lse, oracle.lse), 1e-10);
    EXPECT_LT(max_diff(q.grad(), oracle.dq), 1e-10);
    EXPECT_LT(max_diff(k.grad(), oracle.dk), 1e-10);
    EXPECT_LT(max_diff(v.grad(), oracle.dv), 1e-10);
    // One forward step, one backward step; with MoBA first the block means (step -1),
    // with vertical-slash its index.
    std::vector<RingStepEvent> events = context->take_events();
    ASSERT_EQ(events.size(), moba || vertical_slash ? 3u : 2u);
    if (moba || vertical_slash) {
      EXPECT_EQ(events[0].step, kRingSelectionStep);
      EXPECT_EQ(events[0].kept_pairs, 0);
      events.erase(events.begin());
    }
    EXPECT_FALSE(events[0].backward);
    EXPECT_TRUE(events[1].backward);
    EXPECT_GT(events[0].kept_pairs, 0);
  }
}

// Kept (query, key) pairs per rank for one sequence of length L under a pattern.
std::vector<double> kept_per_rank(int64_t length, int64_t cp, const CpLayout& cp_layout, int64_t block,
                                  const std::function<RingBlockPattern(const BlockLayout&)>& make_pattern) {
  const PackedSequences sequences = PackedSequences::from_lengths({length});
  const BlockLayout layout = BlockLayout::build(sequences, sequences, block, true);
  const CpSharding sharding = CpSharding::build(sequences, cp, cp_layout);
  const RingBlockPattern pattern = make_pattern(layout);
  std::vector<RingShardTiles> shards;
  for (int64_t r = 0; r < cp; ++r) shards.push_back(RingShardTiles::build(sharding.tokens_of(r), layout));
  std::vector<double> kept(cp, 0.0);
  const at::Tensor whole = at::zeros({length, 1, 1}, at::kFloat);  // one head of size 1: counting only
  for (int64_t r = 0; r < cp; ++r) {
    const at::Tensor q = sharding.shard(whole, r).contiguous();
    at::Tensor out = at::empty_like(q), lse = at::empty({q.size(0), 1}, q.options());
    for (int64_t s = 0; s < cp; ++s) {
      const at::Tensor k = sharding.shard(whole, s).contiguous();
      kept[r] += static_cast<double>(ring_step_forward(q, k, k, {shards[r], shards[s], pattern, 1.0}, out, lse));
    }
  }
  return kept;
}

TEST(WorkerImbalance, DenseCausalByHand) {
  const int64_t length = 4096, cp = 4, chunk = length / cp;
  const auto dense = [](const BlockLayout& layout) { return RingBlockPattern::causal(layout); };
  // Contiguous: rank r's queries see r * chunk earlier keys plus a causal triangle.
  const std::vector<double> contiguous = kept_per_rank(length, cp, {CpLayoutKind::kContiguous, 0}, 64, dense);
  std::vector<double> expected;
  for (int64_t r = 0; r < cp; ++r) expected.push_back(static_cast<double>(chunk * r * chunk + chunk * (chunk + 1) / 2));
  EXPECT_EQ(contiguous, expected);
  const double by_hand = static_cast<double>(cp) * expected.back() / (length * (length + 1) / 2.0);
  EXPECT_DOUBLE_EQ(max_over_mean(contiguous), by_hand);
  EXPECT_NEAR(by_hand, 2.0 - 1.0 / cp, 1e-3);
  // Zigzag: chunks r and 2W-1-r carry the same work for every r: exactly 1.
  EXPECT_DOUBLE_EQ(max_over_mean(kept_per_rank(length, cp, {CpLayoutKind::kZigzag, 0}, 64, dense)), 1.0);
  // Striped by 128: rank r holds stripes n = r (mod 4); rank 3 does the most.
  const double striped = max_over_mean(kept_per_rank(length, cp, {CpLayoutKind::kStriped, 128}, 64, dense));
  double top = 0, all = 0;
  for (int64_t n = 0; n < length / 128; ++n) {
    const double work = 128.0 * (n * 128) + 128.0 * 129 / 2;
    all += work;
    if (n % cp == cp - 1) top += work;
  }
  EXPECT_DOUBLE_EQ(striped, cp * top / all);
  EXPECT_LT(striped, 1.1);
}

TEST(WorkerImbalance, BandPatternFavoursStripedOverZigzag) {
  // Query blocks 16..23 (tokens 1024..1535) keep every earlier block, the others only
  // their diagonal: the work clusters in one band, which zigzag gives to one rank.
  const auto band = [](const BlockLayout& layout) {
    RingBlockPattern dense = RingBlockPattern::causal(layout);
    int32_t* count = dense.count.mutable_data_ptr<int32_t>();
    int32_t* selected = dense.selected.mutable_data_ptr<int32_t>();
    const int64_t capacity = dense.selected.size(2);
    for (int64_t b = 0; b < layout.num_blocks(); ++b) {
      if (b >= 16 && b < 24) continue;
      selected[b * capacity] = static_cast<int32_t>(b);
      count[b] = 1;
    }
    return dense;
  };
  const double zigzag = max_over_mean(kept_per_rank(4096, 4, {CpLayoutKind::kZigzag, 0}, 64, band));
  const double striped = max_over_mean(kept_per_rank(4096, 4, {CpLayoutKind::kStriped, 64}, 64, band));
  EXPECT_GT(zigzag, 2.0);
  EXPECT_LT(striped, 1.1);
  RecordProperty("zigzag", std::to_string(zigzag));
  RecordProperty("striped", std::to_string(striped));
}

TEST(WorkerImbalance, MobaLayoutsMeasured) {
  // MoBA (block 64, k 8) routed on random queries and keys of one 4096-token sequence:
  // every query block keeps min(8, b + 1) key blocks, so the work per query block is
  // nearly uniform and the layouts differ only in where the light early blocks go.
  const auto moba = [](const BlockLayout& layout) {
    at::manual_seed(4);
    const at::Tensor q = at::randn({4096, 1, 16}), k = at::randn({4096, 1, 16});  // one head, as counted
    MobaParams params;
    params.block_size = 64;
    params.top_k = {8};
    params.scale = 0.25;
    const MobaRouting routing = moba_route_cpu(q, k, layout, params);
    return RingBlockPattern{routing.selected, routing.selected_count};
  };
  std::map<std::string, double> imbalance;
  for (const CpLayout layout : {CpLayout{CpLayoutKind::kContiguous, 0}, CpLayout{CpLayoutKind::kZigzag, 0},
                                CpLayout{CpLayoutKind::kStriped, 128}}) {
    imbalance[layout.name()] = max_over_mean(kept_per_rank(4096, 4, layout, 64, moba));
    RecordProperty(layout.name(), std::to_string(imbalance[layout.name()]));
    std::printf("MoBA k 8 of 64 blocks, cp 4, %s: worker imbalance %.4f\n", layout.name().c_str(),
                imbalance[layout.name()]);
  }
  // By hand: a full query block keeps 7 earlier blocks (7 * 64 * 64 pairs) and its causal
  // diagonal (64 * 65 / 2); block b < 7 keeps b earlier ones. Contiguous and zigzag both
  // give rank 0 the eight light blocks 0..7 and every other rank 16 full ones.
  const double full = 7.0 * 4096 + 2080, light_rank = 8.0 * 2080 + 4096.0 * 28 + 8 * full;
  const double by_hand = 16 * full * 4 / (light_rank + 3 * 16 * full);
  EXPECT_DOUBLE_EQ(imbalance["contiguous"], by_hand);
  EXPECT_DOUBLE_EQ(imbalance["zigzag"], by_hand);
  EXPECT_LT(imbalance["striped"], imbalance["contiguous"]);  // the light blocks spread over all ranks
}

}  // namespace
}  // namespace sb
