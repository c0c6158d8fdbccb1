#pragma once
// Vertical-slash under a budget request (DST; docs/vertical_slash.md, "Budgets"). The
// budget axis is kept keys per query: a sequence's kept (query, key) pairs under the
// block-form mask, summed over its query heads, over length x query heads.
//
//   level      lambda in [0, 1]: each head's lists are the top-p lists at p = lambda
//              (vertical_slash_select's forced entries, order, ties and caps): a list
//              takes candidates while its mass is below lambda x n. Lists grow with
//              lambda, so kept pairs and coverage never fall; lambda 0 keeps only the
//              forced entries.
//   reference  the params' own rule per head (top_p p or top_k counts, as
//              vertical_slash_index): its coverage C_ref,h and the sequence's pairs.
//   budget     kept_keys[s] > 0: one level lambda_b for every head of sequence s, the
//              largest whose pairs are <= kept_keys[s] x length x heads (0 when even
//              lambda 0 keeps more).
//   floor      coverage_floor_ratio r > 0: per head lambda_f,h, the smallest level whose
//              coverage is >= r x C_ref,h (1 when none reaches it); a budgeted head runs
//              at max(lambda_b, lambda_f,h). A sequence without a budget (kept_keys
//              empty or 0 for it) runs the reference rule.
//   search     exact, over breakpoints: the lists change only at the levels M / n where
//              M is a list's mass before one of its candidates, and between two
//              neighbouring breakpoints they are the upper one's (a list takes a
//              candidate once lambda x n exceeds the mass before it). Kept pairs and
//              coverage are monotone over the sorted breakpoints, so each level is a
//              binary search there: the budget over the sequence's breakpoints (every
//              head's), the floor over the head's own; deterministic.
//
// Work: per (sequence, query head) the last n queries' attention [n, L] in float64, one
// head at a time, computed once for the scores, the reference and the floor and again for
// the budgeted lists' coverage; pair counts per search step for every head of the
// sequence (vertical_slash_kept_pairs). No [L, L] matrix.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "kernels/attention/core/packed_sequences.h"
#include "kernels/attention/patterns/vertical_slash/vertical_slash_index.h"

namespace sb {

// What DST asks of one call (from AttentionBudgetRequest: top_k and coverage_floor_ratio).
struct VerticalSlashBudgetRequest {
  std::vector<int64_t> kept_keys;     // per sequence, kept keys per query; empty or 0: reference
  double coverage_floor_ratio = 0.0;  // r in [0, 1]; 0: no floor

  // No budget and no floor: the backend runs vertical_slash_index unchanged.
  bool empty() const { return kept_keys.empty() && coverage_floor_ratio == 0.0; }
};

struct VerticalSlashBudgetedIndex {
  // [sequence][query head]: the lists each head runs with their coverage.
  std::vector<std::vector<VerticalSlashHeadIndex>> index;
  // Per sequence: lambda_b (nullopt where the sequence runs the reference rule).
  std::vector<std::optional<double>> level;
  // [sequence][query head]: lambda_f,h; empty without a floor.
  std::vector<std::vector<double>> floor_level;
  // [sequence][query head]: C_ref,h, the reference rule's coverage.
  std::vector<std::vector<double>> reference_coverage;
  // Per sequence, summed over query heads: the pairs the reference rule keeps, and the
  // pairs the floor levels alone keep (empty without a floor).
  std::vector<int64_t> reference_kept_pairs;
  std::vector<int64_t> floor_kept_pairs;
};

// q [T, Hq, D], k [T, Hkv, D] packed by `sequences` (any floating dtype; the search runs in
// float64), Hq % Hkv == 0; scale: the softmax scale. Throws std::invalid_argument when
// kept_keys is neither empty nor one entry per sequence, holds a negative entry, or r is
// outside [0, 1]. sum_over_head_shards (tensor parallelism: q and k hold this rank's
// heads): the budget levels are searched with the other ranks' heads
// (vertical_slash_sharded_budget.h), so each rank's lists are the whole call's for its
// heads; the per-sequence pair counts in the result stay this rank's.
VerticalSlashBudgetedIndex vertical_slash_budgeted_index(
    const at::Tensor& q, const at::Tensor& k, const PackedSequences& sequences, const VerticalSlashParams& params,
    double scale, const VerticalSlashBudgetRequest& request,
    const std::function<void(std::vector<double>&)>& sum_over_head_shards = {});

// A sequence's kept keys per query from its pairs summed over query heads, rounded (0 for
// an empty sequence): the statistic a layer reports as top_k.
int64_t vertical_slash_kept_keys_per_query(int64_t pairs, int64_t length, int64_t heads);

// The search's pieces that need no attention, shared with the context-parallel search
// (vertical_slash_ring_budget.h), where every rank holds the same ladders:
//   the level thresholds (lambda x n) of `heads`: 0, every breakpoint in (0, total), and
//   total = n, ascending and distinct;
std::vector<double> vertical_slash_level_thresholds(const std::vector<const VerticalSlashLadders*>& heads,
                                                    double total);
//   lambda_b x n of one sequence whose heads are `heads`: the largest threshold whose
//   kept pairs, summed over the heads, are <= kept_keys x length x heads (0 when even
//   level 0 keeps more).
double vertical_slash_budget_threshold(const std::vector<const VerticalSlashLadders*>& heads, int64_t kept_keys,
                                       int64_t length, double total);
//   the kept pairs of `heads` at one level threshold (lambda x n), summed over the heads;
int64_t vertical_slash_pairs_at(const std::vector<const VerticalSlashLadders*>& heads, double threshold,
                                int64_t length);
//   the request checked against a micro-batch of `num_sequences` (std::invalid_argument).
void vertical_slash_check_budget_request(const VerticalSlashBudgetRequest& request, int64_t num_sequences);

}  // namespace sb
