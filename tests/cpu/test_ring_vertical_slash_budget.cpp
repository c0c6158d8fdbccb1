// DST's budget search over vertical-slash under context parallelism
// (vertical_slash_ring_budget.h) against the one-rank search (vertical_slash_budgeted_index)
// on the whole micro-batch: CP ranks are threads of this process meeting over Gloo, each
// with its own tokens; every rank must end with the one-rank result (the same lists and
// levels, coverage within float64 rounding) for a budget alone, a floor alone, both, and
// budgets so tight that only the forced entries fit. float64 inputs, top-p 0.9 lists.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include <string>
#include <thread>
#include <vector>

#include "harness/parallel/process_group.h"
#include "kernels/attention/patterns/vertical_slash/vertical_slash_ring_budget.h"
#include "tests/support/ring_attention_cases.h"

namespace sb {
namespace {

VerticalSlashParams top_p_params() {
  VerticalSlashParams params = test::ring_vertical_slash_params();
  params.budget = VerticalSlashBudget::kTopP;
  params.p = 0.9;
  return params;
}

// Every rank's result for `request` with `cp` ranks in `layout` (rank order).
std::vector<VerticalSlashBudgetedIndex> ring_results(const test::RingInputs& in, int64_t cp, const CpLayout& layout,
                                                     const VerticalSlashBudgetRequest& request) {
  const PackedSequences sequences = PackedSequences::from_lengths(in.lengths);
  const CpSharding sharding = CpSharding::build(sequences, cp, layout);
  const auto geometry = RingGeometry::build(sharding, test::kRingBlock);
  auto store = c10::make_intrusive<c10d::HashStore>();
  const std::chrono::milliseconds timeout(30000);
  std::vector<VerticalSlashBudgetedIndex> results(static_cast<size_t>(cp));
  std::vector<std::string> errors(static_cast<size_t>(cp));
  std::vector<std::thread> ranks;
  for (int64_t r = 0; r < cp; ++r) {
    ranks.emplace_back([&, r] {
      try {
        RingContext context(create_group(store, "cp/", static_cast<int>(r), static_cast<int>(cp), CollectiveBackend::kGloo,
                                         timeout, "127.0.0.1"),
                            r, cp, 0, timeout);
        results[static_cast<size_t>(r)] =
            vertical_slash_ring_budgeted_index(sharding.shard(in.q, r), sharding.shard(in.k, r), *geometry,
                                               top_p_params(), test::ring_scale(), request, context, 0);
        const auto events = context.take_events();
        if (events.size() != 1 || events[0].step != kRingSelectionStep) errors[static_cast<size_t>(r)] = "one index event expected";
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(r)] = e.what();
      }
    });
  }
  for (auto& t : ranks) t.join();
  for (int64_t r = 0; r < cp; ++r) EXPECT_EQ(errors[static_cast<size_t>(r)], "") << "rank " << r;
  return results;
}

void expect_same(const VerticalSlashBudgetedIndex& ring, const VerticalSlashBudgetedIndex& one, const std::string& what) {
  ASSERT_EQ(ring.index.size(), one.index.size()) << what;
  for (size_t s = 0; s < one.index.size(); ++s) {
    EXPECT_EQ(ring.level[s].has_value(), one.level[s].has_value()) << what << " sequence " << s;
    if (ring.level[s] && one.level[s]) EXPECT_NEAR(*ring.level[s], *one.level[s], 1e-12) << what << " sequence " << s;
    EXPECT_EQ(ring.reference_kept_pairs[s], one.reference_kept_pairs[s]) << what << " sequence " << s;
    ASSERT_EQ(ring.index[s].size(), one.index[s].size()) << what;
    for (size_t h = 0; h < one.index[s].size(); ++h) {
      const std::string where = what + " sequence " + std::to_string(s) + " head " + std::to_string(h);
      EXPECT_EQ(ring.index[s][h].verticals, one.index[s][h].verticals) << where;
      EXPECT_EQ(ring.index[s][h].slashes, one.index[s][h].slashes) << where;
      EXPECT_NEAR(ring.index[s][h].coverage, one.index[s][h].coverage, 1e-12) << where;
      EXPECT_NEAR(ring.reference_coverage[s][h], one.reference_coverage[s][h], 1e-12) << where;
      if (!one.floor_level.empty()) EXPECT_NEAR(ring.floor_level[s][h], one.floor_level[s][h], 1e-12) << where;
    }
  }
  EXPECT_EQ(ring.floor_kept_pairs, one.floor_kept_pairs) << what;
}

TEST(RingVerticalSlashBudget, EveryRankEndsWithTheOneRankSearch) {
  // Sequences of 97, 61, 0, 30 and 7 tokens (an empty one in the middle).
  const test::RingInputs in = test::ring_inputs(at::kDouble, 5, {97, 61, 0, 30, 7});
  const PackedSequences sequences = PackedSequences::from_lengths(in.lengths);
  const std::vector<std::pair<std::string, VerticalSlashBudgetRequest>> requests{
      {"budget", {{30, 20, 4, 0, 5}, 0.0}},
      {"floor", {{}, 0.9}},
      {"budget and floor", {{60, 40, 10, 20, 3}, 0.5}},
      {"forced entries only", {{1, 1, 1, 1, 1}, 0.0}}};
  for (const auto& [name, request] : requests) {
    const VerticalSlashBudgetedIndex one =
        vertical_slash_budgeted_index(in.q, in.k, sequences, top_p_params(), test::ring_scale(), request);
    if (name == "budget and floor") {  // both of a budgeted head's choices occur
      int64_t floored = 0, budgeted = 0;
      for (size_t s = 0; s < one.index.size(); ++s) {
        if (!one.level[s]) continue;
        for (const double floor : one.floor_level[s]) (floor >= *one.level[s] ? floored : budgeted) += 1;
      }
      EXPECT_GT(floored, 0) << "no head ran its floor's lists";
      EXPECT_GT(budgeted, 0) << "no head ran the budget's lists";
    }
    for (const auto& [cp, layout] : std::vector<std::pair<int64_t, CpLayout>>{
             {2, {CpLayoutKind::kStriped, 8}}, {3, {CpLayoutKind::kZigzag, 0}}}) {
      const std::vector<VerticalSlashBudgetedIndex> ring = ring_results(in, cp, layout, request);
      for (size_t r = 0; r < ring.size(); ++r) {
        expect_same(ring[r], one, name + ", cp " + std::to_string(cp) + ", rank " + std::to_string(r));
      }
    }
  }
}

// A sequence long enough that the ring takes its heads in several batches (the CPU's
// 16 MiB of [n, L] rows: 3 of the 4 heads, then 1), beside a short one.
TEST(RingVerticalSlashBudget, ALongSequenceTakesItsHeadsInBatches) {
  const test::RingInputs in = test::ring_inputs(at::kDouble, 6, {33000, 50});
  const PackedSequences sequences = PackedSequences::from_lengths(in.lengths);
  const VerticalSlashBudgetRequest request{{40, 10}, 0.5};
  const VerticalSlashBudgetedIndex one =
      vertical_slash_budgeted_index(in.q, in.k, sequences, top_p_params(), test::ring_scale(), request);
  const std::vector<VerticalSlashBudgetedIndex> ring = ring_results(in, 2, {CpLayoutKind::kZigzag, 0}, request);
  for (size_t r = 0; r < ring.size(); ++r) expect_same(ring[r], one, "rank " + std::to_string(r));
}

// The request is checked as on one rank, before any collective (every rank throws alike).
TEST(RingVerticalSlashBudget, AMalformedRequestIsRefusedOnEveryRank) {
  const test::RingInputs in = test::ring_inputs(at::kDouble, 5);
  const PackedSequences sequences = PackedSequences::from_lengths(in.lengths);
  const auto geometry = RingGeometry::build(CpSharding::build(sequences, 1, {CpLayoutKind::kStriped, 8}), test::kRingBlock);
  RingContext context(nullptr, 0, 1, 0, std::chrono::milliseconds(1000));
  EXPECT_THROW(vertical_slash_ring_budgeted_index(in.q, in.k, *geometry, top_p_params(), test::ring_scale(),
                                                  {{10, 10}, 0.0}, context, 0),
               std::invalid_argument);
}

}  // namespace
}  // namespace sb
