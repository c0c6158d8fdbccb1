// DST's budget over vertical-slash with the query heads split over tensor-parallel ranks
// (kernels/attention/patterns/vertical_slash/vertical_slash_sharded_budget.h). Two threads stand
// for two TP ranks, each holding half the heads (query heads 0-1 with KV head 0, 2-3 with
// KV head 1), their sums exchanged in process as the TP group's all-reduce would. The
// oracle is the one-rank search over every head (vertical_slash_budgeted_index, itself
// tested against a hand-written rule in test_vertical_slash_budget.cpp): the same budget
// level per sequence, bit for bit, and each shard's lists the whole call's for its heads.
// Also the attention backends (one rank and the ring) under a budget: outputs and
// statistics the whole layer's.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <thread>
#include <vector>

#include "kernels/attention/ring/ring_attention_backend.h"
#include "kernels/attention/patterns/vertical_slash/vertical_slash_backend.h"
#include "kernels/attention/patterns/vertical_slash/vertical_slash_budget.h"
#include "kernels/attention/patterns/vertical_slash/vertical_slash_sharded_budget.h"
#include "tests/cpu/vertical_slash_budget_case.h"
#include "kernels/attention/patterns/vertical_slash/vertical_slash_pattern.h"

namespace sb {
namespace {

using test::kScale;
using HeadShardSum = std::function<void(std::vector<double>&)>;

// Sums float64 vectors over `parties` threads: each call blocks until every party has
// made its call of the same round, and every party gets the same sum.
class ThreadSum {
 public:
  explicit ThreadSum(int parties) : parties_(parties) {}

  void operator()(std::vector<double>& values) {
    std::unique_lock<std::mutex> lock(mutex_);
    const uint64_t round = round_;
    if (arrived_ == 0) sum_.assign(values.size(), 0.0);
    if (sum_.size() != values.size()) throw std::logic_error("ThreadSum: parties sum vectors of different lengths");
    for (size_t i = 0; i < values.size(); ++i) sum_[i] += values[i];
    ++calls_;
    if (++arrived_ == parties_) {
      result_ = sum_;
      arrived_ = 0;
      ++round_;
      done_.notify_all();
    } else if (!done_.wait_for(lock, std::chrono::seconds(30), [&] { return round_ != round; })) {
      throw std::runtime_error("ThreadSum: the other party never came");
    }
    values = result_;
  }
  int64_t calls() const { return calls_; }

 private:
  int parties_;
  std::mutex mutex_;
  std::condition_variable done_;
  int arrived_ = 0;
  uint64_t round_ = 0;
  int64_t calls_ = 0;
  std::vector<double> sum_, result_;
};

// Runs body(shard, sum) for shards 0 and 1 on two threads sharing one ThreadSum.
void on_two_shards(const std::function<void(int64_t, const HeadShardSum&)>& body) {
  auto sum = std::make_shared<ThreadSum>(2);
  const HeadShardSum hook = [sum](std::vector<double>& values) { (*sum)(values); };
  std::exception_ptr failed[2];
  std::thread other([&] {
    try {
      body(1, hook);
    } catch (...) {
      failed[1] = std::current_exception();
    }
  });
  try {
    body(0, hook);
  } catch (...) {
    failed[0] = std::current_exception();
  }
  other.join();
  for (const std::exception_ptr& e : failed) {
    if (e) std::rethrow_exception(e);
  }
}

at::Tensor head_shard(const at::Tensor& t, int64_t s) { return t.narrow(1, s * t.size(1) / 2, t.size(1) / 2).contiguous(); }

// The budget tests' packed case (one sequence shorter than the forced entries, one
// empty), with the second KV head's queries sharper, so that the shards' lists differ.
test::BudgetCase shard_case(uint64_t seed, std::vector<int64_t> lengths = {37, 61, 6, 0, 50}) {
  test::BudgetCase c = test::budget_case(seed, std::move(lengths));
  c.q.narrow(1, 2, 2).mul_(2.0);
  return c;
}

VerticalSlashParams shard_params() { return test::budget_params(VerticalSlashBudget::kTopP); }

void expect_same_lists(const VerticalSlashHeadIndex& got, const VerticalSlashHeadIndex& want, const std::string& where) {
  EXPECT_EQ(got.verticals, want.verticals) << where;
  EXPECT_EQ(got.slashes, want.slashes) << where;
  EXPECT_NEAR(got.coverage, want.coverage, 1e-12) << where;
}

TEST(VerticalSlashShardedBudget, LevelsAndListsEqualTheOneRankSearchOverEveryHead) {
  const VerticalSlashParams params = shard_params();
  bool shards_alone_differ = false;
  bool level_zero = false, level_one = false, level_between = false;  // the cases the requests reach
  for (const uint64_t seed : {26u, 27u, 28u}) {
    const test::BudgetCase c = shard_case(seed);
    // Per sequence: forced-only (1), in between, everything (1000); with and without a floor.
    for (const VerticalSlashBudgetRequest& request :
         {VerticalSlashBudgetRequest{{1, 9, 3, 0, 14}, 0.0}, VerticalSlashBudgetRequest{{12, 20, 4, 0, 1000}, 0.0},
          VerticalSlashBudgetRequest{{8, 11, 2, 0, 16}, 0.85}, VerticalSlashBudgetRequest{{1000, 6, 5, 0, 10}, 0.6}}) {
      SCOPED_TRACE("seed " + std::to_string(seed) + ", budget of sequence 0: " + std::to_string(request.kept_keys[0]) +
                   ", floor " + std::to_string(request.coverage_floor_ratio));
      const VerticalSlashBudgetedIndex whole =
          vertical_slash_budgeted_index(c.q, c.k, c.sequences, params, kScale, request);
      std::vector<VerticalSlashBudgetedIndex> shards(2), alone(2);
      on_two_shards([&](int64_t s, const HeadShardSum& sum) {
        shards[static_cast<size_t>(s)] = vertical_slash_budgeted_index(head_shard(c.q, s), head_shard(c.k, s),
                                                                       c.sequences, params, kScale, request, sum);
      });
      for (const std::optional<double>& level : whole.level) {
        if (!level) continue;
        level_zero = level_zero || *level == 0.0;
        level_one = level_one || *level == 1.0;
        level_between = level_between || (*level > 0.0 && *level < 1.0);
      }
      for (int64_t s = 0; s < 2; ++s) {
        alone[static_cast<size_t>(s)] =
            vertical_slash_budgeted_index(head_shard(c.q, s), head_shard(c.k, s), c.sequences, params, kScale, request);
      }
      for (int64_t s = 0; s < 2; ++s) {
        const VerticalSlashBudgetedIndex& shard = shards[static_cast<size_t>(s)];
        EXPECT_EQ(shard.level, whole.level) << "shard " << s;
        shards_alone_differ = shards_alone_differ || alone[static_cast<size_t>(s)].level != whole.level;
        ASSERT_EQ(shard.index.size(), whole.index.size());
        for (size_t q = 0; q < whole.index.size(); ++q) {
          ASSERT_EQ(shard.index[q].size(), whole.index[q].size() / 2) << "sequence " << q;
          for (size_t h = 0; h < shard.index[q].size(); ++h) {
            expect_same_lists(shard.index[q][h], whole.index[q][static_cast<size_t>(2 * s) + h],
                              "shard " + std::to_string(s) + " sequence " + std::to_string(q) + " head " +
                                  std::to_string(h));
          }
        }
      }
      for (size_t q = 0; q < whole.reference_kept_pairs.size(); ++q) {
        EXPECT_EQ(shards[0].reference_kept_pairs[q] + shards[1].reference_kept_pairs[q], whole.reference_kept_pairs[q]);
      }
    }
  }
  EXPECT_TRUE(shards_alone_differ) << "non-vacuous: alone, a shard's heads would choose other levels";
  EXPECT_TRUE(level_zero && level_one && level_between) << "levels 0, 1 and one between them reached";
}

TEST(VerticalSlashShardedBudget, SearchEndsInFewRoundsAndRejectsEmptyTargets) {
  const test::BudgetCase c = shard_case(31, {64, 40});
  const VerticalSlashParams params = shard_params();
  std::vector<std::vector<VerticalSlashLadders>> ladders(2);  // [shard][sequence x head]
  const auto build = [&](int64_t s) {
    const at::Tensor q = head_shard(c.q, s), k = head_shard(c.k, s);
    for (int64_t seq = 0; seq < 2; ++seq) {
      const VerticalSlashSequenceInputs inputs(q, k, c.sequences, seq, params.last_queries);
      for (int64_t h = 0; h < 2; ++h) {
        const VerticalSlashScores scores = vertical_slash_scores(inputs.attention(h, kScale), inputs.length);
        ladders[static_cast<size_t>(s)].emplace_back(scores.vertical, scores.slash, params);
      }
    }
  };
  build(0);
  build(1);
  const auto targets_of = [&](int64_t s) {
    std::vector<VerticalSlashBudgetTarget> targets;
    const auto& mine = ladders[static_cast<size_t>(s)];
    for (int64_t seq = 0; seq < 2; ++seq) {
      const int64_t length = c.sequences.length(seq);
      targets.push_back({{&mine[static_cast<size_t>(2 * seq)], &mine[static_cast<size_t>(2 * seq + 1)]},
                         seq == 0 ? 13 : 9, length, static_cast<double>(std::min<int64_t>(16, length))});
    }
    return targets;
  };
  // The one-rank search over all four heads of each sequence.
  std::vector<double> expected;
  for (int64_t seq = 0; seq < 2; ++seq) {
    const int64_t length = c.sequences.length(seq);
    std::vector<const VerticalSlashLadders*> all;
    for (int64_t s = 0; s < 2; ++s) {
      for (int64_t h = 0; h < 2; ++h) all.push_back(&ladders[static_cast<size_t>(s)][static_cast<size_t>(2 * seq + h)]);
    }
    expected.push_back(vertical_slash_budget_threshold(all, seq == 0 ? 13 : 9, length, std::min<int64_t>(16, length)));
    EXPECT_GT(expected.back(), 0.0) << "non-vacuous: strictly inside (0, n)";
    EXPECT_LT(expected.back(), static_cast<double>(std::min<int64_t>(16, length)));
  }
  auto sum = std::make_shared<ThreadSum>(2);
  std::vector<std::vector<double>> got(2);
  std::thread other([&] { got[1] = vertical_slash_budget_thresholds(targets_of(1), [&](std::vector<double>& v) { (*sum)(v); }); });
  got[0] = vertical_slash_budget_thresholds(targets_of(0), [&](std::vector<double>& v) { (*sum)(v); });
  other.join();
  EXPECT_EQ(got[0], expected);
  EXPECT_EQ(got[1], expected);
  // Both parties' calls: the ends, then at most 14 rounds of 31 probes (intervals of under
  // 2^63 bit patterns).
  EXPECT_LE(sum->calls(), 2 * 15) << "rounds of the search";
  EXPECT_GE(sum->calls(), 2 * 2);

  std::vector<VerticalSlashBudgetTarget> bad = targets_of(0);
  bad[1].kept_keys = 0;
  EXPECT_THROW(vertical_slash_budget_thresholds(bad, {}), std::invalid_argument);
}

// The one-rank backend and the ring (one CP rank) under a budget and a floor: each shard's
// output is the whole layer's for its heads, and its statistics the whole layer's.
TEST(VerticalSlashShardedBudget, BackendsUnderABudgetReportTheWholeLayer) {
  const test::BudgetCase c = shard_case(29);
  const VerticalSlashParams params = shard_params();
  const AttentionOptions options = vertical_slash_attention_options(params);
  AttentionBudgetRequest request;
  request.top_k = {8, 11, 2, 0, 16};
  request.coverage_floor_ratio = 0.7;
  const auto one_rank = [&](bool ring) -> std::unique_ptr<AttentionBackend> {
    if (!ring) return std::make_unique<VerticalSlashAttention>(params);
    auto context = std::make_shared<RingContext>(nullptr, 0, 1, 0, std::chrono::milliseconds(1000));
    auto backend = std::make_unique<RingAttentionBackend>(options.pattern().make_ring_selector(), context);
    backend->set_context_parallel_sharding(
        std::make_shared<const CpSharding>(CpSharding::build(c.sequences, 1, {CpLayoutKind::kStriped, 8})));
    return backend;
  };
  for (const bool ring : {false, true}) {
    SCOPED_TRACE(ring ? "ring backend" : "one-rank backend");
    auto whole_backend = one_rank(ring);
    whole_backend->set_budget_request(request);
    const at::Tensor whole_out = whole_backend->forward(c.q, c.k, c.v, c.sequences, kScale, 0);
    const AttentionLayerStats whole = whole_backend->take_layer_stats().at(0);
    ASSERT_GT(whole.k_floor, 0);
    std::vector<at::Tensor> outs(2);
    std::vector<AttentionLayerStats> stats(2);
    on_two_shards([&](int64_t s, const HeadShardSum& sum) {
      auto backend = one_rank(ring);
      backend->set_head_shard_sum(sum);
      backend->set_budget_request(request);
      outs[static_cast<size_t>(s)] =
          backend->forward(head_shard(c.q, s), head_shard(c.k, s), head_shard(c.v, s), c.sequences, kScale, 0);
      stats[static_cast<size_t>(s)] = backend->take_layer_stats().at(0);
    });
    for (int64_t s = 0; s < 2; ++s) {
      const AttentionLayerStats& mine = stats[static_cast<size_t>(s)];
      EXPECT_LT((outs[static_cast<size_t>(s)] - whole_out.narrow(1, 2 * s, 2)).abs().max().item<double>(), 1e-12)
          << "shard " << s;
      EXPECT_EQ(mine.top_k, whole.top_k) << "shard " << s;
      EXPECT_EQ(mine.reference_top_k, whole.reference_top_k) << "shard " << s;
      EXPECT_EQ(mine.k_floor, whole.k_floor) << "shard " << s;
      ASSERT_EQ(mine.coverage.size(), whole.coverage.size());
      for (size_t i = 0; i < whole.coverage.size(); ++i) EXPECT_NEAR(mine.coverage[i], whole.coverage[i], 1e-12);
      EXPECT_NEAR(mine.coverage_mean, whole.coverage_mean, 1e-12);
    }
  }
}

}  // namespace
}  // namespace sb
