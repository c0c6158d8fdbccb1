// Context and tensor parallelism together: each TP rank's ring carries its share of the
// heads, and RingAttentionBackend::set_head_shard_sum makes what reads the whole layer
// (MoBA's DST floor, vertical-slash's statistics) see every head, as in the one-rank
// backends. Two head shards (query heads 0-1 with KV head 0, 2-3 with KV head 1) stand
// for two TP ranks on a one-rank ring: a first pass records each shard's own sums, a
// second adds the other shard's. The oracle is the same ring backend holding every head.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <vector>

#include "kernels/attention/patterns/moba/moba_pattern.h"
#include "kernels/attention/patterns/vertical_slash/vertical_slash_pattern.h"
#include "kernels/attention/ring/ring_attention_backend.h"
#include "tests/cpu/test_moba_support.h"

namespace sb {
namespace {

constexpr double kScale = 0.35;

std::unique_ptr<RingAttentionBackend> one_rank_ring(const AttentionOptions& options, const PackedSequences& sequences) {
  auto context = std::make_shared<RingContext>(nullptr, 0, 1, 0, std::chrono::milliseconds(1000));
  auto ring = std::make_unique<RingAttentionBackend>(options.pattern().make_ring_selector(), context);
  ring->set_context_parallel_sharding(
      std::make_shared<const CpSharding>(CpSharding::build(sequences, 1, {CpLayoutKind::kStriped, 8})));
  return ring;
}

at::Tensor head_shard(const at::Tensor& t, int64_t s) { return t.narrow(1, s * t.size(1) / 2, t.size(1) / 2).contiguous(); }

struct ShardRun {
  at::Tensor out;
  AttentionLayerStats stats;
};

// Each shard's forward and statistics: alone (no sum), and sharing its sums with the other.
struct ShardRuns {
  std::vector<ShardRun> alone, sharing;
};

ShardRuns run_shards(const AttentionOptions& options, const PackedSequences& sequences, const at::Tensor& q,
                     const at::Tensor& k, const at::Tensor& v, const AttentionBudgetRequest& request) {
  ShardRuns runs;
  std::vector<std::vector<double>> own(2);
  for (int64_t s = 0; s < 2; ++s) {
    auto ring = one_rank_ring(options, sequences);
    ring->set_budget_request(request);
    ring->set_head_shard_sum([&own, s](std::vector<double>& sums) { own[static_cast<size_t>(s)] = sums; });
    const at::Tensor out = ring->forward(head_shard(q, s), head_shard(k, s), head_shard(v, s), sequences, kScale, 0);
    runs.alone.push_back({out, ring->take_layer_stats().at(0)});
  }
  for (int64_t s = 0; s < 2; ++s) {
    auto ring = one_rank_ring(options, sequences);
    ring->set_budget_request(request);
    const std::vector<double>& other = own[static_cast<size_t>(1 - s)];
    ring->set_head_shard_sum([&other](std::vector<double>& sums) {
      ASSERT_EQ(sums.size(), other.size());
      for (size_t i = 0; i < sums.size(); ++i) sums[i] += other[i];
    });
    const at::Tensor out = ring->forward(head_shard(q, s), head_shard(k, s), head_shard(v, s), sequences, kScale, 0);
    runs.sharing.push_back({out, ring->take_layer_stats().at(0)});
  }
  return runs;
}

TEST(RingBackendHeadShards, MobaShardsSharingTheirCoverageChooseTheWholeLayersFloor) {
  const std::vector<int64_t> lengths = {120, 64, 30};
  const PackedSequences sequences = PackedSequences::from_lengths(lengths);
  const auto in = test::moba_random_inputs(lengths, lengths, 4, 2, 8, at::kFloat, 17);
  const at::Tensor q = in.q.clone();
  q.narrow(1, 2, 2).mul_(4.0);  // sharper gate scores on the second shard: alone, the floors differ
  const AttentionOptions options = moba_attention_options(8, 2);
  AttentionBudgetRequest request;
  request.top_k = {1, 2, 3};
  request.coverage_floor_ratio = 0.9;
  request.coverage_reference_k = 8;
  request.coverage_curve_up_to = 6;

  auto whole_ring = one_rank_ring(options, sequences);
  whole_ring->set_budget_request(request);
  const at::Tensor whole_out = whole_ring->forward(q, in.k, in.v, sequences, kScale, 0);
  const AttentionLayerStats whole = whole_ring->take_layer_stats().at(0);
  ASSERT_GT(whole.k_floor, 1) << "non-vacuous: the floor moves the budgets";

  const ShardRuns runs = run_shards(options, sequences, q, in.k, in.v, request);
  EXPECT_NE(runs.alone[0].stats.k_floor, runs.alone[1].stats.k_floor)
      << "non-vacuous: alone, the two shards would choose different floors";
  for (int64_t s = 0; s < 2; ++s) {
    const ShardRun& r = runs.sharing[static_cast<size_t>(s)];
    EXPECT_EQ(r.stats.k_floor, whole.k_floor) << "shard " << s;
    EXPECT_EQ(r.stats.top_k, whole.top_k) << "shard " << s;
    ASSERT_EQ(r.stats.coverage_curve.size(), whole.coverage_curve.size());
    for (size_t k = 0; k < whole.coverage_curve.size(); ++k) {
      EXPECT_NEAR(r.stats.coverage_curve[k], whole.coverage_curve[k], 1e-12) << "shard " << s << " k " << k + 1;
    }
    // The shard's output is the whole layer's for its heads (its routing is).
    EXPECT_LT((r.out - whole_out.narrow(1, 2 * s, 2)).abs().max().item<double>(), 1e-6) << "shard " << s;
  }
}

TEST(RingBackendHeadShards, VerticalSlashShardsSharingTheirSumsReportTheWholeLayer) {
  at::manual_seed(9);
  const PackedSequences sequences = PackedSequences::from_lengths({40, 24, 33});
  const auto opts = at::TensorOptions().dtype(at::kDouble);
  at::Tensor q = at::randn({97, 4, 8}, opts);
  const at::Tensor k = at::randn({97, 2, 8}, opts), v = at::randn({97, 2, 8}, opts);
  q.narrow(1, 2, 2).mul_(3.0);  // sharper attention on the second shard: alone, the kept keys differ
  VerticalSlashParams params;
  params.budget = VerticalSlashBudget::kTopK;
  params.sink_tokens = 2;
  params.local_window = 3;
  params.vertical_count = 3;
  params.slash_count = 2;
  params.last_queries = 8;
  params.block_size = 4;
  const AttentionOptions options = vertical_slash_attention_options(params);

  auto whole_ring = one_rank_ring(options, sequences);
  const at::Tensor whole_out = whole_ring->forward(q, k, v, sequences, kScale, 0);
  const AttentionLayerStats whole = whole_ring->take_layer_stats().at(0);

  const ShardRuns runs = run_shards(options, sequences, q, k, v, AttentionBudgetRequest{});
  EXPECT_NE(runs.alone[0].stats.top_k, runs.alone[1].stats.top_k)
      << "non-vacuous: alone, the shards report different kept keys";
  for (int64_t s = 0; s < 2; ++s) {
    const ShardRun& r = runs.sharing[static_cast<size_t>(s)];
    EXPECT_LT((r.out - whole_out.narrow(1, 2 * s, 2)).abs().max().item<double>(), 1e-12) << "shard " << s;
    EXPECT_EQ(r.stats.top_k, whole.top_k) << "shard " << s;
    EXPECT_EQ(r.stats.reference_top_k, whole.top_k) << "shard " << s;
    ASSERT_EQ(r.stats.coverage.size(), whole.coverage.size());
    for (size_t i = 0; i < whole.coverage.size(); ++i) EXPECT_NEAR(r.stats.coverage[i], whole.coverage[i], 1e-15);
    EXPECT_NEAR(r.stats.coverage_mean, whole.coverage_mean, 1e-15);
  }
}

}  // namespace
}  // namespace sb
