// Sliding-window attention under context parallelism: CP ranks as threads of this process
// meeting over Gloo, each with its shard of a packed micro-batch, through the ring backend
// (SlidingWindowRingSelector: the coverage completed over the ranks, blocks and the band
// cut inside them). The oracle is the one-rank backend on the whole micro-batch: the same
// windows, floor and coverage on every rank, the same output and gradients (float64). The
// ring's own count of kept pairs per (query rank, key rank) must equal the work model's
// (sliding_window_ring_work), which must equal counting sliding_window_keeps by hand.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "kernels/attention/patterns/sliding_window/sliding_window_backend.h"
#include "kernels/attention/patterns/sliding_window/sliding_window_pattern.h"
#include "kernels/attention/patterns/sliding_window/sliding_window_work_model.h"
#include "kernels/attention/ring/cp_sharding.h"
#include "kernels/attention/ring/ring_attention_backend.h"
#include "tests/support/tensor_parallel_threads.h"

namespace sb {
namespace {

constexpr double kScale = 0.4;
constexpr int64_t kQHeads = 4;

struct Inputs {
  at::Tensor q, k, v, grad;
};
Inputs inputs(int64_t tokens, uint64_t seed) {
  at::manual_seed(seed);
  return {at::randn({tokens, kQHeads, 8}, at::kDouble).mul(3), at::randn({tokens, 2, 8}, at::kDouble),
          at::randn({tokens, 2, 8}, at::kDouble), at::randn({tokens, kQHeads, 8}, at::kDouble)};
}

struct RankRun {
  at::Tensor out, dq, dk, dv;
  AttentionLayerStats stats;
  std::vector<RingStepEvent> steps;
};

RankRun run_rank(const SlidingWindowOptions& options, const std::shared_ptr<const CpSharding>& sharding,
                 const std::shared_ptr<RingContext>& context, const Inputs& in, const AttentionBudgetRequest& request) {
  const int64_t r = context->rank();
  RingAttentionBackend backend(SlidingWindowPattern(options).make_ring_selector(), context);
  backend.set_context_parallel_sharding(sharding);
  backend.set_budget_request(request);
  at::Tensor q = sharding->shard(in.q, r).requires_grad_(true), k = sharding->shard(in.k, r).requires_grad_(true),
             v = sharding->shard(in.v, r).requires_grad_(true);
  RankRun run;
  run.out = backend.forward(q, k, v, PackedSequences::from_lengths({q.size(0)}), kScale, 2);
  (run.out * sharding->shard(in.grad, r)).sum().backward();
  run.dq = q.grad();
  run.dk = k.grad();
  run.dv = v.grad();
  run.stats = backend.take_layer_stats().at(0);
  for (const auto& [mb, work] : backend.take_work()) run.steps.insert(run.steps.end(), work.steps.begin(), work.steps.end());
  return run;
}

std::vector<RankRun> run_ring(const SlidingWindowOptions& options, const std::vector<int64_t>& lengths, int64_t cp,
                              const CpLayout& layout, const Inputs& in, const AttentionBudgetRequest& request) {
  const auto sharding =
      std::make_shared<const CpSharding>(CpSharding::build(PackedSequences::from_lengths(lengths), cp, layout));
  std::vector<RankRun> runs(static_cast<size_t>(cp));
  if (cp == 1) {
    runs[0] = run_rank(options, sharding,
                       std::make_shared<RingContext>(nullptr, 0, 1, 0, std::chrono::milliseconds(30000)), in, request);
    return runs;
  }
  std::mutex lock;
  test::run_group_ranks(cp, [&](c10::intrusive_ptr<c10d::Backend> group, int64_t r) {
    auto context = std::make_shared<RingContext>(std::move(group), r, cp, 0, std::chrono::milliseconds(30000));
    RankRun run = run_rank(options, sharding, context, in, request);
    const std::lock_guard<std::mutex> guard(lock);
    runs[static_cast<size_t>(r)] = std::move(run);
  });
  return runs;
}

double max_diff(const at::Tensor& a, const at::Tensor& b) { return (a - b).abs().max().item<double>(); }

// Brute force: pairs[a][b] = kept (query, key) pairs with the query on rank a and the key
// on rank b, summed over the query heads.
std::vector<std::vector<double>> counted_pairs(const std::vector<int64_t>& lengths, const std::vector<int64_t>& windows,
                                               int64_t sinks, int64_t cp, const CpLayout& layout) {
  const PackedSequences sequences = PackedSequences::from_lengths(lengths);
  const CpSharding sharding = CpSharding::build(sequences, cp, layout);
  std::vector<int64_t> owner(static_cast<size_t>(sequences.total_tokens()));
  for (int64_t r = 0; r < cp; ++r) {
    for (int64_t t : sharding.tokens_of(r)) owner[static_cast<size_t>(t)] = r;
  }
  std::vector<std::vector<double>> pairs(static_cast<size_t>(cp), std::vector<double>(static_cast<size_t>(cp), 0.0));
  for (int64_t s = 0; s < sequences.num_sequences(); ++s) {
    const int64_t begin = sequences.offsets[s];
    for (int64_t p = 0; p < sequences.length(s); ++p) {
      for (int64_t j = 0; j <= p; ++j) {
        if (sliding_window_keeps(p, j, windows[static_cast<size_t>(s)], sinks)) {
          pairs[static_cast<size_t>(owner[begin + p])][static_cast<size_t>(owner[begin + j])] += kQHeads;
        }
      }
    }
  }
  return pairs;
}

struct Layout {
  std::string name;
  CpLayout layout;
};
const std::vector<Layout>& layouts() {
  static const std::vector<Layout> all{{"zigzag", {CpLayoutKind::kZigzag, 0}},
                                       {"striped 8", {CpLayoutKind::kStriped, 8}},
                                       {"contiguous", {CpLayoutKind::kContiguous, 0}}};
  return all;
}

TEST(SlidingWindowRing, EveryRankEqualsTheOneRankBackend) {
  // A window ending inside blocks of 16 (the band cuts them), sinks beyond the window, an
  // empty sequence and one shorter than a block per rank.
  const std::vector<int64_t> lengths{150, 0, 61, 7, 90};
  int64_t tokens = 0;
  for (int64_t n : lengths) tokens += n;
  const Inputs in = inputs(tokens, 31);
  const SlidingWindowOptions options{24, 5, 16};
  AttentionBudgetRequest request;
  request.top_k = {3, 10, 24, 2, 40};
  request.coverage_floor_ratio = 0.8;
  request.coverage_reference_k = 24;
  request.coverage_curve_up_to = 30;

  SlidingWindowAttention one(options);
  one.set_budget_request(request);
  at::Tensor q = in.q.clone().requires_grad_(true), k = in.k.clone().requires_grad_(true),
             v = in.v.clone().requires_grad_(true);
  const at::Tensor want = one.forward(q, k, v, PackedSequences::from_lengths(lengths), kScale, 2);
  (want * in.grad).sum().backward();
  const AttentionLayerStats stats = one.take_layer_stats().at(0);
  ASSERT_GT(stats.k_floor, 3) << "non-vacuous: the floor raises some windows";
  ASSERT_LT(stats.k_floor, 40) << "non-vacuous: some window stays above the floor";

  for (int64_t cp : {1, 2, 3}) {
    for (const Layout& l : layouts()) {
      const std::string what = "cp " + std::to_string(cp) + " " + l.name;
      const std::vector<RankRun> runs = run_ring(options, lengths, cp, l.layout, in, request);
      const CpSharding sharding = CpSharding::build(PackedSequences::from_lengths(lengths), cp, l.layout);
      std::vector<at::Tensor> out, dq, dk, dv;
      for (const RankRun& r : runs) {
        out.push_back(r.out.detach());
        dq.push_back(r.dq);
        dk.push_back(r.dk);
        dv.push_back(r.dv);
        EXPECT_EQ(r.stats.top_k, stats.top_k) << what;
        EXPECT_EQ(r.stats.k_floor, stats.k_floor) << what;
        ASSERT_EQ(r.stats.coverage.size(), stats.coverage.size()) << what;
        for (size_t s = 0; s < stats.coverage.size(); ++s) EXPECT_NEAR(r.stats.coverage[s], stats.coverage[s], 1e-12) << what;
        ASSERT_EQ(r.stats.coverage_curve.size(), stats.coverage_curve.size()) << what;
        for (size_t w = 0; w < stats.coverage_curve.size(); ++w) {
          EXPECT_NEAR(r.stats.coverage_curve[w], stats.coverage_curve[w], 1e-12) << what << " W " << w + 1;
        }
      }
      EXPECT_LT(max_diff(sharding.unshard(out), want.detach()), 1e-10) << what;
      EXPECT_LT(max_diff(sharding.unshard(dq), q.grad()), 1e-10) << what;
      EXPECT_LT(max_diff(sharding.unshard(dk), k.grad()), 1e-10) << what;
      EXPECT_LT(max_diff(sharding.unshard(dv), v.grad()), 1e-10) << what;

      // The ring's forward steps computed exactly the pairs the rule keeps, rank by rank.
      const RingWork model = sliding_window_ring_work(lengths, stats.top_k, options.sink_tokens, cp, l.layout, kQHeads);
      const auto counted = counted_pairs(lengths, stats.top_k, options.sink_tokens, cp, l.layout);
      for (int64_t a = 0; a < cp; ++a) {
        std::vector<double> measured(static_cast<size_t>(cp), 0.0);
        int64_t selections = 0;
        for (const RingStepEvent& e : runs[static_cast<size_t>(a)].steps) {
          if (e.step == kRingSelectionStep) {
            ++selections;
          } else if (!e.backward) {
            measured[static_cast<size_t>(e.source_rank)] += static_cast<double>(e.kept_pairs);
          }
        }
        EXPECT_EQ(selections, 1) << what << " rank " << a;
        for (int64_t b = 0; b < cp; ++b) {
          EXPECT_EQ(measured[static_cast<size_t>(b)], counted[static_cast<size_t>(a)][static_cast<size_t>(b)])
              << what << " pairs of rank " << a << " against " << b;
          EXPECT_EQ(model.pairs[static_cast<size_t>(a)][static_cast<size_t>(b)],
                    counted[static_cast<size_t>(a)][static_cast<size_t>(b)])
              << what << " model pairs of rank " << a << " against " << b;
        }
      }
    }
  }
}

TEST(SlidingWindowRing, WorkModelEqualsCountingForLongSequences) {
  const std::vector<int64_t> lengths{700, 33, 260};
  const std::vector<int64_t> windows{100, 500, 1};
  for (int64_t cp : {2, 4}) {
    for (const Layout& l : layouts()) {
      const RingWork model = sliding_window_ring_work(lengths, windows, 4, cp, l.layout, kQHeads);
      const auto counted = counted_pairs(lengths, windows, 4, cp, l.layout);
      double total = 0;
      for (int64_t a = 0; a < cp; ++a) {
        for (int64_t b = 0; b < cp; ++b) {
          EXPECT_EQ(model.pairs[static_cast<size_t>(a)][static_cast<size_t>(b)],
                    counted[static_cast<size_t>(a)][static_cast<size_t>(b)])
              << l.name << " cp " << cp << " rank " << a << " against " << b;
          total += model.pairs[static_cast<size_t>(a)][static_cast<size_t>(b)];
        }
      }
      double pairs = 0;
      for (size_t s = 0; s < lengths.size(); ++s) pairs += sliding_window_pairs(lengths[s], windows[s], 4);
      EXPECT_EQ(total, kQHeads * pairs) << l.name << " cp " << cp;
    }
  }
  EXPECT_THROW(sliding_window_ring_work(lengths, {1, 2}, 4, 2, layouts()[0].layout, kQHeads), std::invalid_argument);
}

}  // namespace
}  // namespace sb
