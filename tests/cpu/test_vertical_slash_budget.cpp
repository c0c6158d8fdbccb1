// Vertical-slash under DST's budget requests (kernels/attention/patterns/vertical_slash/
// vertical_slash_budget.h) against an oracle written from the rule in docs/vertical_slash.md
// ("Budgets"): the float64 attention of the last queries computed here, each list's
// candidates sorted and cut at a level with plain loops, kept pairs and coverage counted
// pair by pair with vertical_slash_keeps, and every level a list can take enumerated.
// Also: without a request the backend is the params' rule bit for bit; its output and
// gradients under a budget equal the float64 reference on the index it chose; the ring
// (context-parallel) backend refuses budget requests.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kernels/attention/ring/cp_sharding.h"
#include "kernels/attention/ring/ring_attention.h"
#include "kernels/attention/ring/ring_attention_backend.h"
#include "kernels/attention/patterns/vertical_slash/vertical_slash_attention_cpu.h"
#include "kernels/attention/patterns/vertical_slash/vertical_slash_backend.h"
#include "kernels/attention/patterns/vertical_slash/vertical_slash_budget.h"
#include "kernels/attention/patterns/vertical_slash/vertical_slash_index.h"
#include "kernels/attention/patterns/vertical_slash/vertical_slash_reference.h"
#include "tests/cpu/vertical_slash_budget_case.h"
#include "kernels/attention/patterns/vertical_slash/vertical_slash_pattern.h"

namespace sb {
namespace {

using test::budget_case;
using test::budget_params;
using test::BudgetCase;
using test::kHeadDim;
using test::kKeyHeads;
using test::kQueryHeads;
using test::kScale;

// One list as the rule writes it: the forced entries, then the other indices best score
// first (ties: the lower index) as far as the cap allows, with the list's mass before each.
struct OracleList {
  int64_t forced = 0;
  std::vector<int64_t> best_first;
  std::vector<double> mass_before;

  OracleList(const std::vector<double>& score, int64_t forced_entries, int64_t cap) {
    const auto length = static_cast<int64_t>(score.size());
    forced = std::min(forced_entries, length);
    for (int64_t j = forced; j < length; ++j) best_first.push_back(j);
    std::sort(best_first.begin(), best_first.end(), [&](int64_t a, int64_t b) {
      return score[static_cast<size_t>(a)] != score[static_cast<size_t>(b)]
                 ? score[static_cast<size_t>(a)] > score[static_cast<size_t>(b)]
                 : a < b;
    });
    if (static_cast<int64_t>(best_first.size()) > cap - forced) best_first.resize(static_cast<size_t>(cap - forced));
    double mass = 0;
    for (int64_t j = 0; j < forced; ++j) mass += score[static_cast<size_t>(j)];
    for (const int64_t j : best_first) {
      mass_before.push_back(mass);
      mass += score[static_cast<size_t>(j)];
    }
  }

  // Top-p with the threshold p x n = x: take while the mass is below x.
  int64_t taken_at(double x) const {
    int64_t taken = 0;
    while (taken < static_cast<int64_t>(mass_before.size()) && mass_before[static_cast<size_t>(taken)] < x) ++taken;
    return taken;
  }
  std::vector<int64_t> entries(int64_t taken) const {
    std::vector<int64_t> out;
    for (int64_t j = 0; j < forced; ++j) out.push_back(j);
    for (int64_t t = 0; t < taken; ++t) out.push_back(best_first[static_cast<size_t>(t)]);
    std::sort(out.begin(), out.end());
    return out;
  }
};

// One (sequence, query head) as the oracle sees it.
struct OracleHead {
  int64_t length = 0;
  int64_t n = 0;
  int64_t block = 1;
  std::vector<std::vector<double>> attention;  // [n][length]
  std::vector<OracleList> lists;               // {verticals, slashes}
  VerticalSlashHeadIndex reference;            // the params' own rule
  std::map<std::pair<int64_t, int64_t>, int64_t> pairs_seen;  // by (verticals, slashes) taken

  VerticalSlashHeadIndex taking(int64_t verticals, int64_t slashes) const {
    VerticalSlashHeadIndex out;
    out.verticals = lists[0].entries(verticals);
    out.slashes = lists[1].entries(slashes);
    out.block_size = block;
    return out;
  }
  VerticalSlashHeadIndex at(double x) const { return taking(lists[0].taken_at(x), lists[1].taken_at(x)); }

  int64_t pairs(const VerticalSlashHeadIndex& index) const {
    int64_t kept = 0;
    for (int64_t i = 0; i < length; ++i) {
      for (int64_t j = 0; j <= i; ++j) kept += vertical_slash_keeps(index, length, i, j) ? 1 : 0;
    }
    return kept;
  }
  int64_t pairs_at(double x) {
    const std::pair<int64_t, int64_t> key{lists[0].taken_at(x), lists[1].taken_at(x)};
    const auto found = pairs_seen.find(key);
    if (found != pairs_seen.end()) return found->second;
    return pairs_seen[key] = pairs(taking(key.first, key.second));
  }
  double coverage(const VerticalSlashHeadIndex& index) const {
    double kept = 0;
    for (int64_t i = 0; i < n; ++i) {
      const int64_t p = length - n + i;
      for (int64_t j = 0; j <= p; ++j) {
        if (vertical_slash_keeps(index, length, p, j)) {
          kept += attention[static_cast<size_t>(i)][static_cast<size_t>(j)];
        }
      }
    }
    return kept / static_cast<double>(n);
  }
  // The thresholds x = level x n at which some list takes its next candidate, in (0, n).
  std::vector<double> breakpoints() const {
    std::vector<double> out;
    for (const OracleList& list : lists) {
      for (const double m : list.mass_before) {
        if (m > 0 && m < static_cast<double>(n)) out.push_back(m);
      }
    }
    return out;
  }
};

OracleHead oracle_head(const BudgetCase& c, int64_t s, int64_t h, const VerticalSlashParams& params) {
  OracleHead head;
  const int64_t offset = c.sequences.offsets[static_cast<size_t>(s)];
  head.length = c.lengths[static_cast<size_t>(s)];
  head.n = std::min(params.last_queries, head.length);
  head.block = params.block_size;
  const at::Tensor queries = c.q.narrow(0, offset + head.length - head.n, head.n).select(1, h);
  const at::Tensor keys = c.k.narrow(0, offset, head.length).select(1, h / (kQueryHeads / kKeyHeads));
  at::Tensor scores = queries.matmul(keys.t()) * kScale;
  for (int64_t i = 0; i < head.n; ++i) {
    const int64_t p = head.length - head.n + i;
    if (p + 1 < head.length) {
      scores[i].narrow(0, p + 1, head.length - p - 1).fill_(-std::numeric_limits<double>::infinity());
    }
  }
  const at::Tensor attention = at::softmax(scores, 1).contiguous();
  const auto a = attention.accessor<double, 2>();
  std::vector<double> vertical(static_cast<size_t>(head.length), 0.0), slash(vertical);
  for (int64_t i = 0; i < head.n; ++i) {
    const int64_t p = head.length - head.n + i;
    head.attention.emplace_back(static_cast<size_t>(head.length), 0.0);
    for (int64_t j = 0; j <= p; ++j) {
      head.attention.back()[static_cast<size_t>(j)] = a[i][j];
      vertical[static_cast<size_t>(j)] += a[i][j];
      slash[static_cast<size_t>(p - j)] += a[i][j];
    }
  }
  head.lists.emplace_back(vertical, params.sink_tokens, params.max_verticals);
  head.lists.emplace_back(slash, params.local_window, params.max_slashes);
  if (params.budget == VerticalSlashBudget::kTopP) {
    head.reference = head.at(params.p * static_cast<double>(head.n));
  } else {
    head.reference = head.taking(std::min<int64_t>(params.vertical_count, head.lists[0].best_first.size()),
                                 std::min<int64_t>(params.slash_count, head.lists[1].best_first.size()));
  }
  head.reference.coverage = head.coverage(head.reference);
  return head;
}

// A sequence's heads and every level threshold its lists can take: 0, the breakpoints, n.
struct OracleSequence {
  std::vector<OracleHead> heads;
  std::vector<double> thresholds;
  int64_t length = 0;
  double total = 0;  // n

  int64_t pairs_at(double x) {
    int64_t pairs = 0;
    for (OracleHead& head : heads) pairs += head.pairs_at(x);
    return pairs;
  }
  // The largest threshold whose pairs are <= limit, or 0.
  double largest_within(int64_t limit) {
    double best = 0.0;
    for (const double x : thresholds) {
      if (pairs_at(x) <= limit) best = x;
    }
    return best;
  }
};

std::vector<double> with_ends(std::vector<double> breakpoints, double total) {
  breakpoints.push_back(0.0);
  breakpoints.push_back(total);
  std::sort(breakpoints.begin(), breakpoints.end());
  breakpoints.erase(std::unique(breakpoints.begin(), breakpoints.end()), breakpoints.end());
  return breakpoints;
}

OracleSequence oracle_sequence(const BudgetCase& c, int64_t s, const VerticalSlashParams& params) {
  OracleSequence out;
  out.length = c.lengths[static_cast<size_t>(s)];
  std::vector<double> breakpoints;
  for (int64_t h = 0; h < kQueryHeads; ++h) {
    out.heads.push_back(oracle_head(c, s, h, params));
    const std::vector<double> own = out.heads.back().breakpoints();
    breakpoints.insert(breakpoints.end(), own.begin(), own.end());
  }
  out.total = static_cast<double>(out.heads[0].n);
  out.thresholds = with_ends(std::move(breakpoints), out.total);
  return out;
}

// The smallest threshold among the head's own levels whose coverage reaches target (n if none).
double smallest_reaching(const OracleHead& head, double target) {
  for (const double x : with_ends(head.breakpoints(), static_cast<double>(head.n))) {
    if (head.coverage(head.at(x)) >= target) return x;
  }
  return static_cast<double>(head.n);
}

double previous_threshold(const OracleHead& head, double x) {
  const std::vector<double> levels = with_ends(head.breakpoints(), static_cast<double>(head.n));
  const auto at = std::lower_bound(levels.begin(), levels.end(), x);
  return at == levels.begin() ? x : *(at - 1);
}

void expect_lists(const VerticalSlashHeadIndex& got, const VerticalSlashHeadIndex& expected, const std::string& what) {
  EXPECT_EQ(got.verticals, expected.verticals) << what;
  EXPECT_EQ(got.slashes, expected.slashes) << what;
  EXPECT_EQ(got.block_size, expected.block_size) << what;
}

std::string where(int64_t s, int64_t h) { return "sequence " + std::to_string(s) + " head " + std::to_string(h); }

AttentionBudgetRequest budget_request(std::vector<int64_t> top_k, double floor_ratio = 0.0) {
  AttentionBudgetRequest request;
  request.top_k = std::move(top_k);
  request.coverage_floor_ratio = floor_ratio;
  return request;
}

double max_diff(const at::Tensor& a, const at::Tensor& b) {
  return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>();
}

TEST(VerticalSlashBudget, WithoutARequestTheBackendIsTheParamsRuleBitForBit) {
  const BudgetCase c = budget_case(21);
  for (const VerticalSlashBudget rule : {VerticalSlashBudget::kTopP, VerticalSlashBudget::kTopK}) {
    const VerticalSlashParams params = budget_params(rule);
    for (const at::ScalarType dtype : {at::kDouble, at::kFloat}) {
      const at::Tensor q = c.q.to(dtype), k = c.k.to(dtype), v = c.v.to(dtype);
      const auto index = vertical_slash_index(q, k, c.sequences, params, kScale);
      const VerticalSlashAttentionResult direct = vertical_slash_attention_cpu(q, k, v, c.sequences, index, kScale);
      const AttentionLayerStats expected =
          vertical_slash_layer_stats(2, index, c.sequences, direct.kept_pairs_per_sequence);
      // Never set, set empty, and budgets of 0 (each sequence: the params' rule).
      for (const int variant : {0, 1, 2}) {
        SCOPED_TRACE("variant " + std::to_string(variant) + (dtype == at::kDouble ? " float64" : " float32"));
        VerticalSlashAttention backend(params);
        if (variant == 1) backend.set_budget_request(AttentionBudgetRequest{});
        if (variant == 2) backend.set_budget_request(budget_request(std::vector<int64_t>(c.lengths.size(), 0)));
        EXPECT_TRUE(backend.forward(q, k, v, c.sequences, kScale, 2).equal(direct.out));
        const auto stats = backend.take_layer_stats();
        ASSERT_EQ(stats.size(), 1u);
        EXPECT_EQ(stats[0].top_k, expected.top_k);
        EXPECT_EQ(stats[0].coverage, expected.coverage);
        EXPECT_EQ(stats[0].coverage_mean, expected.coverage_mean);
        EXPECT_EQ(stats[0].reference_top_k, stats[0].top_k);
        EXPECT_EQ(stats[0].k_floor, 0);
      }
      // A request, then an empty one: back to the params' rule.
      VerticalSlashAttention backend(params);
      backend.set_budget_request(budget_request(std::vector<int64_t>(c.lengths.size(), 3), 0.9));
      EXPECT_FALSE(backend.forward(q, k, v, c.sequences, kScale, 0).equal(direct.out)) << "the budget moves the mask";
      backend.set_budget_request(AttentionBudgetRequest{});
      EXPECT_TRUE(backend.forward(q, k, v, c.sequences, kScale, 0).equal(direct.out));
    }
  }
}

// Under tensor parallelism a budgeted layer's statistics (kept pairs, coverage, heads, and
// the budget's reference and floor pairs) cross the TP group in one all-reduce. A hook that
// stands for two identical head shards (it doubles every count) is called once, and the
// per-query figures it gives equal one shard's own.
TEST(VerticalSlashBudget, ABudgetedLayersStatisticsTakeOneSumOverTheHeadShards) {
  const BudgetCase c = budget_case(23);
  const VerticalSlashParams params = budget_params(VerticalSlashBudget::kTopP);
  const VerticalSlashBudgetedIndex chosen = vertical_slash_budgeted_index(
      c.q, c.k, c.sequences, params, kScale, {std::vector<int64_t>(c.lengths.size(), 3), 0.9});
  const VerticalSlashAttentionResult kept = vertical_slash_attention_cpu(c.q, c.k, c.v, c.sequences, chosen.index, kScale);
  const int64_t heads = c.q.size(1);
  const AttentionLayerStats alone =
      vertical_slash_layer_stats(1, chosen.index, c.sequences, kept.kept_pairs_per_sequence, {}, &chosen, heads);
  int calls = 0;
  const auto two_shards = [&calls](std::vector<double>& sums) {
    ++calls;
    for (double& x : sums) x *= 2;
  };
  const AttentionLayerStats summed =
      vertical_slash_layer_stats(1, chosen.index, c.sequences, kept.kept_pairs_per_sequence, two_shards, &chosen, heads);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(summed.top_k, alone.top_k);
  EXPECT_EQ(summed.reference_top_k, alone.reference_top_k);
  EXPECT_EQ(summed.k_floor, alone.k_floor);
  EXPECT_GT(alone.k_floor, 0) << "the floor's statistics took part";
  ASSERT_EQ(summed.coverage.size(), alone.coverage.size());
  for (size_t s = 0; s < alone.coverage.size(); ++s) EXPECT_NEAR(summed.coverage[s], alone.coverage[s], 1e-15);
}

TEST(VerticalSlashBudget, LevelIsTheLargestWithinTheBudget) {
  const BudgetCase c = budget_case(22);
  const VerticalSlashParams params = budget_params(VerticalSlashBudget::kTopP);
  std::vector<OracleSequence> oracle;
  for (int64_t s = 0; s < c.sequences.num_sequences(); ++s) {
    oracle.push_back(c.lengths[static_cast<size_t>(s)] > 0 ? oracle_sequence(c, s, params) : OracleSequence{});
  }
  std::vector<int64_t> previous_pairs(c.lengths.size(), -1);
  int64_t inner_levels = 0, moved_from_reference = 0;
  // Budgets from 1 key per query (below the forced entries) to the whole sequence.
  for (const double share : {0.0, 0.1, 0.2, 0.3, 0.4, 0.55, 0.7, 1.0}) {
    std::vector<int64_t> budgets;
    for (const int64_t length : c.lengths) budgets.push_back(std::max<int64_t>(1, std::llround(share * length)));
    const VerticalSlashBudgetedIndex chosen =
        vertical_slash_budgeted_index(c.q, c.k, c.sequences, params, kScale, {budgets, 0.0});
    VerticalSlashAttention backend(params);
    backend.set_budget_request(budget_request(budgets));
    backend.forward(c.q, c.k, c.v, c.sequences, kScale, 0);
    const AttentionLayerStats stats = backend.take_layer_stats().at(0);
    ASSERT_EQ(chosen.index.size(), c.lengths.size());
    for (size_t s = 0; s < c.lengths.size(); ++s) {
      const int64_t length = c.lengths[s];
      if (length == 0) continue;
      SCOPED_TRACE("share " + std::to_string(share) + " sequence " + std::to_string(s));
      OracleSequence& o = oracle[s];
      const int64_t limit = budgets[s] * length * kQueryHeads;
      const double best = o.largest_within(limit);
      ASSERT_TRUE(chosen.level[s].has_value());
      EXPECT_DOUBLE_EQ(*chosen.level[s], best / o.total);
      int64_t pairs = 0, reference_pairs = 0;
      for (int64_t h = 0; h < kQueryHeads; ++h) {
        const VerticalSlashHeadIndex& got = chosen.index[s][static_cast<size_t>(h)];
        expect_lists(got, o.heads[static_cast<size_t>(h)].at(best), where(static_cast<int64_t>(s), h));
        EXPECT_NEAR(got.coverage, o.heads[static_cast<size_t>(h)].coverage(got), 1e-12);
        pairs += o.heads[static_cast<size_t>(h)].pairs(got);
        reference_pairs += o.heads[static_cast<size_t>(h)].pairs(o.heads[static_cast<size_t>(h)].reference);
        moved_from_reference += got.verticals != o.heads[static_cast<size_t>(h)].reference.verticals ||
                                got.slashes != o.heads[static_cast<size_t>(h)].reference.slashes;
      }
      // Within the budget, and the next level is not (unless level 1, or level 0 already over).
      const auto next = std::upper_bound(o.thresholds.begin(), o.thresholds.end(), best);
      if (pairs <= limit && next != o.thresholds.end()) EXPECT_GT(o.pairs_at(*next), limit);
      if (best > 0) EXPECT_LE(pairs, limit);
      if (best == 0) EXPECT_TRUE(pairs <= limit || o.pairs_at(0.0) > limit);
      if (best > 0 && best < o.total) ++inner_levels;
      // Statistics: the pairs kept and the reference's, per query.
      const double rows = static_cast<double>(length * kQueryHeads);
      EXPECT_EQ(stats.top_k[s], std::llround(static_cast<double>(pairs) / rows));
      EXPECT_EQ(stats.reference_top_k[s], std::llround(static_cast<double>(reference_pairs) / rows));
      EXPECT_EQ(chosen.reference_kept_pairs[s], reference_pairs);
      // Monotonic: a larger budget never keeps fewer pairs.
      EXPECT_GE(pairs, previous_pairs[s]);
      previous_pairs[s] = pairs;
    }
    EXPECT_EQ(stats.k_floor, 0);
    EXPECT_TRUE(chosen.floor_level.empty());
  }
  EXPECT_GE(inner_levels, 8) << "the budgets must land strictly between level 0 and level 1";
  EXPECT_GT(moved_from_reference, 0);
}

TEST(VerticalSlashBudget, CoverageFloorKeepsEachHeadAtItsSmallestLevel) {
  const BudgetCase c = budget_case(23);
  const double ratio = 0.9;
  for (const VerticalSlashBudget rule : {VerticalSlashBudget::kTopP, VerticalSlashBudget::kTopK}) {
    SCOPED_TRACE(rule == VerticalSlashBudget::kTopP ? "reference top-p" : "reference top-k");
    const VerticalSlashParams params = budget_params(rule);
    std::vector<int64_t> lowest(c.lengths.size(), 1), middle;  // 1: level 0 for the budget
    for (const int64_t length : c.lengths) middle.push_back(std::max<int64_t>(1, length * 3 / 10));
    const VerticalSlashBudgetedIndex floored =
        vertical_slash_budgeted_index(c.q, c.k, c.sequences, params, kScale, {lowest, ratio});
    const VerticalSlashBudgetedIndex both =
        vertical_slash_budgeted_index(c.q, c.k, c.sequences, params, kScale, {middle, ratio});
    const VerticalSlashBudgetedIndex floor_only =
        vertical_slash_budgeted_index(c.q, c.k, c.sequences, params, kScale, {{}, ratio});
    const auto reference = vertical_slash_index(c.q, c.k, c.sequences, params, kScale);
    int64_t raised = 0, sequences_counted = 0;
    double floor_keys = 0;
    for (int64_t s = 0; s < c.sequences.num_sequences(); ++s) {
      const int64_t length = c.lengths[static_cast<size_t>(s)];
      if (length == 0) continue;
      OracleSequence o = oracle_sequence(c, s, params);
      ASSERT_EQ(*floored.level[static_cast<size_t>(s)], 0.0) << "1 key per query is below the forced entries";
      EXPECT_FALSE(floor_only.level[static_cast<size_t>(s)].has_value());
      const double budget_x = o.largest_within(middle[static_cast<size_t>(s)] * length * kQueryHeads);
      EXPECT_DOUBLE_EQ(*both.level[static_cast<size_t>(s)], budget_x / o.total);
      int64_t floor_pairs = 0;
      for (int64_t h = 0; h < kQueryHeads; ++h) {
        const std::string what = where(s, h);
        const OracleHead& head = o.heads[static_cast<size_t>(h)];
        EXPECT_NEAR(floored.reference_coverage[static_cast<size_t>(s)][static_cast<size_t>(h)], head.reference.coverage,
                    1e-12);
        const double target = ratio * head.reference.coverage;
        const double x = smallest_reaching(head, target);
        EXPECT_DOUBLE_EQ(floored.floor_level[static_cast<size_t>(s)][static_cast<size_t>(h)], x / o.total) << what;
        const VerticalSlashHeadIndex& got = floored.index[static_cast<size_t>(s)][static_cast<size_t>(h)];
        expect_lists(got, head.at(x), what);
        EXPECT_GE(head.coverage(got), target) << what;
        EXPECT_NEAR(got.coverage, head.coverage(got), 1e-12) << what;
        if (x > 0) {  // minimal: one level lower breaks the floor
          EXPECT_LT(head.coverage(head.at(previous_threshold(head, x))), target) << what;
          ++raised;
        }
        floor_pairs += head.pairs(got);
        // With a budget too: the larger of the two levels, and never below the floor.
        const VerticalSlashHeadIndex& combined = both.index[static_cast<size_t>(s)][static_cast<size_t>(h)];
        expect_lists(combined, head.at(std::max(x, budget_x)), what + " (budget and floor)");
        EXPECT_GE(head.coverage(combined), target) << what;
        // A floor without a budget: the params' rule.
        expect_lists(floor_only.index[static_cast<size_t>(s)][static_cast<size_t>(h)],
                     reference[static_cast<size_t>(s)][static_cast<size_t>(h)], what + " (floor only)");
      }
      EXPECT_EQ(floored.floor_kept_pairs[static_cast<size_t>(s)], floor_pairs);
      EXPECT_EQ(both.floor_kept_pairs[static_cast<size_t>(s)], floor_pairs);
      floor_keys += static_cast<double>(floor_pairs) / static_cast<double>(length * kQueryHeads);
      ++sequences_counted;
    }
    EXPECT_GT(raised, 4) << "the floor must raise some heads above level 0";
    // k_floor: the call's mean over its sequences of the floor levels' kept keys per query.
    for (const std::vector<int64_t>& budgets : {lowest, middle, std::vector<int64_t>{}}) {
      VerticalSlashAttention backend(params);
      backend.set_budget_request(budget_request(budgets, ratio));
      backend.forward(c.q, c.k, c.v, c.sequences, kScale, 1);
      EXPECT_EQ(backend.take_layer_stats().at(0).k_floor,
                std::llround(floor_keys / static_cast<double>(sequences_counted)));
    }
  }
}

TEST(VerticalSlashBudget, BudgetedBackendEqualsTheReferenceOnItsIndex) {
  // Output and gradients of the backend under budgets and a floor against the float64
  // reference on the index the budget chose; statistics from that index.
  const BudgetCase c = budget_case(24);
  const VerticalSlashParams params = budget_params(VerticalSlashBudget::kTopP);
  const at::Tensor grad_out = at::randn_like(c.q);
  std::vector<int64_t> budgets;
  for (const int64_t length : c.lengths) budgets.push_back(length / 4);
  for (const at::ScalarType dtype : {at::kDouble, at::kFloat}) {
    SCOPED_TRACE(dtype == at::kDouble ? "float64" : "float32");
    const double tol = dtype == at::kDouble ? 1e-10 : 1e-5;
    const at::Tensor q0 = c.q.to(dtype), k0 = c.k.to(dtype), v0 = c.v.to(dtype);
    const VerticalSlashBudgetedIndex chosen =
        vertical_slash_budgeted_index(q0, k0, c.sequences, params, kScale, {budgets, 0.9});
    at::Tensor qr = q0.to(at::kDouble).requires_grad_(true), kr = k0.to(at::kDouble).requires_grad_(true),
               vr = v0.to(at::kDouble).requires_grad_(true);
    const VerticalSlashReferenceResult ref = vertical_slash_reference(qr, kr, vr, c.sequences, chosen.index, kScale);
    const auto ref_grads = torch::autograd::grad({ref.out}, {qr, kr, vr}, {grad_out});

    VerticalSlashAttention backend(params);
    backend.set_budget_request(budget_request(budgets, 0.9));
    at::Tensor q = q0.clone().requires_grad_(true), k = k0.clone().requires_grad_(true),
               v = v0.clone().requires_grad_(true);
    const at::Tensor out = backend.forward(q, k, v, c.sequences, kScale, 5);
    EXPECT_LT(max_diff(out, ref.out), tol);
    const auto grads = torch::autograd::grad({out}, {q, k, v}, {grad_out.to(dtype)});
    for (size_t i = 0; i < 3; ++i) {
      const double magnitude = std::max(1.0, ref_grads[i].abs().max().item<double>());
      EXPECT_LT(max_diff(grads[i], ref_grads[i]), tol * magnitude) << "gradient " << i;
    }
    const AttentionLayerStats stats = backend.take_layer_stats().at(0);
    EXPECT_EQ(stats.layer, 5);
    for (size_t s = 0; s < c.lengths.size(); ++s) {
      int64_t pairs = 0;
      double coverage = 0;
      for (const VerticalSlashHeadIndex& head : chosen.index[s]) {
        pairs += c.lengths[s] > 0 ? vertical_slash_mask(head, c.lengths[s]).sum().item<int64_t>() : 0;
        coverage += head.coverage;
      }
      EXPECT_EQ(stats.top_k[s], vertical_slash_kept_keys_per_query(pairs, c.lengths[s], kQueryHeads));
      EXPECT_EQ(stats.coverage[s], coverage / kQueryHeads);
    }
  }
}

TEST(VerticalSlashBudget, BadRequestsAreRejected) {
  const BudgetCase c = budget_case(25);
  VerticalSlashAttention backend(budget_params(VerticalSlashBudget::kTopP));
  for (const AttentionBudgetRequest& request :
       {budget_request({4, 4}), budget_request({4, 4, 4, -1, 4}), budget_request({}, 1.5), budget_request({}, -0.1)}) {
    backend.set_budget_request(request);
    EXPECT_THROW(backend.forward(c.q, c.k, c.v, c.sequences, kScale, 0), std::invalid_argument);
  }
}

// The context-parallel backend on one rank takes a budget or a floor as the one-rank
// backend does: the same output and the same layer statistics (the multi-rank search:
// test_ring_vertical_slash_budget.cpp; the model on CP ranks: test_ring_attention_dist.cpp).
TEST(VerticalSlashBudget, RingBackendRunsARequestAsTheOneRankBackend) {
  const BudgetCase c = budget_case(26, {37, 61, 6});
  const AttentionOptions options = vertical_slash_attention_options(budget_params(VerticalSlashBudget::kTopP));
  auto context = std::make_shared<RingContext>(nullptr, 0, 1, 0, std::chrono::milliseconds(1000));
  RingAttentionBackend ring(options.pattern().make_ring_selector(), context);
  ring.set_context_parallel_sharding(
      std::make_shared<const CpSharding>(CpSharding::build(c.sequences, 1, {CpLayoutKind::kStriped, 8})));
  VerticalSlashAttention one(budget_params(VerticalSlashBudget::kTopP));
  int64_t layer = 0;
  for (const AttentionBudgetRequest& request :
       {budget_request({4, 0, 4}), budget_request({}, 0.9), budget_request({3, 6, 2}, 0.7), AttentionBudgetRequest{}}) {
    ring.set_budget_request(request);
    one.set_budget_request(request);
    const at::Tensor expected = one.forward(c.q, c.k, c.v, c.sequences, kScale, layer);
    const at::Tensor got = ring.forward(c.q, c.k, c.v, c.sequences, kScale, layer);
    EXPECT_LT((got - expected).abs().max().item<double>(), 1e-10) << "layer " << layer;
    const auto want = one.take_layer_stats(), have = ring.take_layer_stats();
    ASSERT_EQ(have.size(), 1u);
    ASSERT_EQ(want.size(), 1u);
    EXPECT_EQ(have[0].top_k, want[0].top_k) << "layer " << layer;
    EXPECT_EQ(have[0].reference_top_k, want[0].reference_top_k) << "layer " << layer;
    EXPECT_EQ(have[0].k_floor, want[0].k_floor) << "layer " << layer;
    EXPECT_NEAR(have[0].coverage_mean, want[0].coverage_mean, 1e-12) << "layer " << layer;
    ++layer;
  }
}

}  // namespace
}  // namespace sb
