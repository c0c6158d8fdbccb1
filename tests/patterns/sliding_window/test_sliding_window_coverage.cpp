// The coverage a window keeps (sliding_window_coverage.h) and DST's floor against brute
// force: each last query's softmax over its causal keys written out row by row in float64,
// its mass summed over the keys sliding_window_keeps keeps, for every window. Then the
// backend's choice (request, floor, statistics) and tensor parallelism: two TP ranks
// holding half the heads each, summing their tables over Gloo, choose the whole layer's
// windows and report its coverage.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <cmath>
#include <mutex>
#include <vector>

#include "kernels/attention/patterns/sliding_window/sliding_window_backend.h"
#include "kernels/attention/patterns/sliding_window/sliding_window_coverage.h"
#include "kernels/attention/patterns/sliding_window/sliding_window_reference.h"
#include "kernels/attention/patterns/sliding_window/sliding_window_rule.h"
#include "tests/support/tensor_parallel_threads.h"

namespace sb {
namespace {

constexpr double kScale = 0.4;

// brute[s][W - 1]: the kept mass of sequence s at window W, summed over heads and last queries.
std::vector<std::vector<double>> brute_mass(const at::Tensor& q, const at::Tensor& k, const std::vector<int64_t>& lengths,
                                            int64_t sinks) {
  std::vector<std::vector<double>> mass;
  const int64_t group = q.size(1) / k.size(1);
  int64_t begin = 0;
  for (int64_t length : lengths) {
    std::vector<double> kept(static_cast<size_t>(length), 0.0);
    const int64_t n = std::min<int64_t>(kSlidingWindowCoverageQueries, length);
    for (int64_t h = 0; h < q.size(1); ++h) {
      for (int64_t p = length - n; p < length; ++p) {
        const at::Tensor scores =
            at::mv(k.narrow(0, begin, p + 1).select(1, h / group), q[begin + p][h]).mul(kScale);  // keys 0 .. p
        const at::Tensor attention = at::softmax(scores, 0);
        const double* a = attention.const_data_ptr<double>();
        for (int64_t w = 1; w <= length; ++w) {
          for (int64_t j = 0; j <= p; ++j) kept[static_cast<size_t>(w - 1)] += sliding_window_keeps(p, j, w, sinks) ? a[j] : 0.0;
        }
      }
    }
    mass.push_back(kept);
    begin += length;
  }
  return mass;
}

struct Inputs {
  at::Tensor q, k, v;
};
Inputs inputs(const std::vector<int64_t>& lengths, uint64_t seed) {
  int64_t tokens = 0;
  for (int64_t n : lengths) tokens += n;
  at::manual_seed(seed);
  // Sharp scores (x 3): windows keep clearly different masses.
  return {at::randn({tokens, 4, 8}, at::kDouble).mul(3), at::randn({tokens, 2, 8}, at::kDouble),
          at::randn({tokens, 2, 8}, at::kDouble)};
}

TEST(SlidingWindowCoverage, EveryWindowsMassEqualsBruteForce) {
  const std::vector<int64_t> lengths{150, 0, 40, 1, 70};
  const Inputs in = inputs(lengths, 21);
  for (int64_t sinks : {0, 4, 60}) {
    const SlidingWindowMass mass =
        sliding_window_mass(in.q, in.k, PackedSequences::from_lengths(lengths), sinks, kScale);
    const auto brute = brute_mass(in.q, in.k, lengths, sinks);
    ASSERT_EQ(mass.kept.size(), lengths.size());
    for (size_t s = 0; s < lengths.size(); ++s) {
      EXPECT_EQ(mass.rows[s], 4.0 * std::min<int64_t>(64, lengths[s]));
      ASSERT_EQ(mass.kept[s].size(), brute[s].size());
      for (size_t w = 0; w < brute[s].size(); ++w) {
        EXPECT_NEAR(mass.kept[s][w], brute[s][w], 1e-10) << "sinks " << sinks << " sequence " << s << " W " << w + 1;
      }
      if (lengths[s] > 0) EXPECT_NEAR(mass.coverage(s, lengths[s]), 1.0, 1e-12) << "the whole sequence keeps everything";
    }
    EXPECT_EQ(mass.coverage(1, 5), 1.0) << "an empty sequence";
  }
}

TEST(SlidingWindowCoverage, TheFloorIsTheSmallestWindowReachingTheTarget) {
  const std::vector<int64_t> lengths{150, 40, 70};
  const Inputs in = inputs(lengths, 22);
  const SlidingWindowMass mass = sliding_window_mass(in.q, in.k, PackedSequences::from_lengths(lengths), 4, kScale);
  for (double ratio : {0.3, 0.6, 0.9, 0.99, 1.0}) {
    for (int64_t reference : {8, 32, 100, 400}) {
      const double target = ratio * mass.call_coverage(reference);
      int64_t want = 1;
      while (mass.call_coverage(want) < target) ++want;  // C grows with W
      EXPECT_EQ(mass.floor_window(ratio, reference), want) << "ratio " << ratio << " reference " << reference;
    }
  }
  // Non-vacuous: the floors spread over several windows.
  EXPECT_LT(mass.floor_window(0.6, 32), mass.floor_window(0.99, 32));
}

TEST(SlidingWindowBackend, RunsTheRequestRaisedToTheFloorAndReportsItsCoverage) {
  const std::vector<int64_t> lengths{150, 40, 70};
  const PackedSequences sequences = PackedSequences::from_lengths(lengths);
  const Inputs in = inputs(lengths, 23);
  const SlidingWindowMass mass = sliding_window_mass(in.q, in.k, sequences, 4, kScale);
  SlidingWindowAttention backend(SlidingWindowOptions{48, 4, 64});

  // No request: the default window everywhere, no floor.
  at::Tensor out = backend.forward(in.q, in.k, in.v, sequences, kScale, 3);
  EXPECT_LT((out - sliding_window_reference(in.q, in.k, in.v, sequences, {48, 48, 48}, 4, kScale).out).abs().max().item<double>(),
            1e-12);
  std::vector<AttentionLayerStats> stats = backend.take_layer_stats();
  ASSERT_EQ(stats.size(), 1u);
  EXPECT_EQ(stats[0].layer, 3);
  EXPECT_EQ(stats[0].top_k, (std::vector<int64_t>{48, 48, 48}));
  EXPECT_EQ(stats[0].k_floor, 0);
  EXPECT_NEAR(stats[0].coverage[1], mass.coverage(1, 48), 1e-12);
  EXPECT_NEAR(stats[0].coverage_mean, mass.call_coverage(48), 1e-12);

  // A request with a floor: W_s = max(request, floor); coverage at the windows run.
  AttentionBudgetRequest request;
  request.top_k = {2, 100, 9};
  request.coverage_floor_ratio = 0.9;
  request.coverage_reference_k = 64;
  request.coverage_curve_up_to = 20;
  backend.set_budget_request(request);
  out = backend.forward(in.q, in.k, in.v, sequences, kScale, 0);
  stats = backend.take_layer_stats();
  const int64_t floor = mass.floor_window(0.9, 64);
  ASSERT_GT(floor, 9) << "non-vacuous: the floor raises two of the three windows";
  ASSERT_LT(floor, 100);
  const std::vector<int64_t> windows{floor, 100, floor};
  EXPECT_EQ(stats[0].k_floor, floor);
  EXPECT_EQ(stats[0].top_k, windows);
  for (size_t s = 0; s < 3; ++s) EXPECT_NEAR(stats[0].coverage[s], mass.coverage(s, windows[s]), 1e-12);
  ASSERT_EQ(stats[0].coverage_curve.size(), 20u);
  EXPECT_NEAR(stats[0].coverage_curve[19], mass.call_coverage(20), 1e-12);
  EXPECT_LT((out - sliding_window_reference(in.q, in.k, in.v, sequences, windows, 4, kScale).out).abs().max().item<double>(),
            1e-12);

  request.top_k = {5, 5};  // two budgets for three sequences
  backend.set_budget_request(request);
  EXPECT_THROW(backend.forward(in.q, in.k, in.v, sequences, kScale, 0), std::invalid_argument);
}

TEST(SlidingWindowBackend, TensorParallelShardsChooseTheWholeLayersWindows) {
  const std::vector<int64_t> lengths{150, 40, 70};
  const PackedSequences sequences = PackedSequences::from_lengths(lengths);
  Inputs in = inputs(lengths, 24);
  in.q.narrow(1, 2, 2).mul_(3.0);  // the second shard's heads sharper: alone, its floor differs
  AttentionBudgetRequest request;
  request.top_k = {2, 3, 4};
  request.coverage_floor_ratio = 0.9;
  request.coverage_reference_k = 64;
  SlidingWindowAttention whole_backend(SlidingWindowOptions{64, 4, 64});
  whole_backend.set_budget_request(request);
  const at::Tensor whole_out = whole_backend.forward(in.q, in.k, in.v, sequences, kScale, 0);
  const AttentionLayerStats whole = whole_backend.take_layer_stats().at(0);

  const auto shard = [](const at::Tensor& t, int64_t s) { return t.narrow(1, s * t.size(1) / 2, t.size(1) / 2).contiguous(); };
  std::vector<int64_t> alone_floor(2);
  for (int64_t s = 0; s < 2; ++s) {
    SlidingWindowAttention alone(SlidingWindowOptions{64, 4, 64});
    alone.set_budget_request(request);
    alone.forward(shard(in.q, s), shard(in.k, s), shard(in.v, s), sequences, kScale, 0);
    alone_floor[static_cast<size_t>(s)] = alone.take_layer_stats().at(0).k_floor;
  }
  ASSERT_NE(alone_floor[0], alone_floor[1]) << "non-vacuous: alone, the shards would choose different floors";

  std::mutex lock;
  std::vector<AttentionLayerStats> shard_stats(2);
  std::vector<at::Tensor> shard_out(2);
  test::run_tp_ranks(2, [&](std::shared_ptr<TensorParallelGroup> group) {
    const int64_t s = group->rank();
    SlidingWindowAttention backend(SlidingWindowOptions{64, 4, 64});
    backend.set_budget_request(request);
    backend.set_head_shard_sum([&group](std::vector<double>& sums) {
      at::Tensor t = at::tensor(sums, at::kDouble);
      group->all_reduce(t);
      std::copy(t.const_data_ptr<double>(), t.const_data_ptr<double>() + t.numel(), sums.begin());
    });
    at::Tensor out = backend.forward(shard(in.q, s), shard(in.k, s), shard(in.v, s), sequences, kScale, 0);
    const std::lock_guard<std::mutex> guard(lock);
    shard_stats[static_cast<size_t>(s)] = backend.take_layer_stats().at(0);
    shard_out[static_cast<size_t>(s)] = out;
  });
  for (size_t s = 0; s < 2; ++s) {
    EXPECT_EQ(shard_stats[s].k_floor, whole.k_floor) << "shard " << s;
    EXPECT_EQ(shard_stats[s].top_k, whole.top_k) << "shard " << s;
    EXPECT_NEAR(shard_stats[s].coverage_mean, whole.coverage_mean, 1e-12) << "shard " << s;
    EXPECT_LT((shard_out[s] - whole_out.narrow(1, 2 * static_cast<int64_t>(s), 2)).abs().max().item<double>(), 1e-12)
        << "shard " << s;
  }
}

}  // namespace
}  // namespace sb
