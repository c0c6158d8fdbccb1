#pragma once
// DST's budget level for vertical-slash when a call's query heads are split over
// tensor-parallel ranks (docs/vertical_slash.md, "Budgets", "Under tensor parallelism").
//
// The budget level lambda_b of a sequence is one for all its query heads: the largest
// level threshold (0, a breakpoint of any head, or n) whose kept pairs, summed over every
// head, stay within kept_keys x length x heads. Each rank holds the ladders of its own
// heads only, so neither the thresholds nor the pair counts are whole on any rank.
// [our rule] The ranks search the level together with sums only: kept pairs P(t) are a
// step function of the threshold t, constant on (b_i, b_i+1] between neighbouring
// breakpoints and never falling, so "P(t) <= limit" holds up to one breakpoint b and
// fails after it. Every rank evaluates its heads' pairs at the same probe thresholds, a
// sum over the ranks gives P there, and the interval [lo, hi] (holds at lo, fails at hi)
// narrows over the ordered bit patterns of the non-negative doubles: 31 probes per round
// cut it about 32-fold, so at most 14 rounds (13 seen at n = 16) reach neighbouring
// doubles, and then b = lo exactly (a breakpoint lies in [lo, hi) and no double lies between them). The result is
// the one-rank search's over the union of every rank's thresholds, bit for bit: the
// summed pair counts are integers below 2^53.
// Collectives: one sum for the head count and the ends (P(0), P(n) of every target), then
// one per round for the targets still searching, all targets of the call together.

#include <cstdint>
#include <functional>
#include <vector>

#include "kernels/attention/patterns/vertical_slash/vertical_slash_index.h"

namespace sb {

// One budgeted sequence of a call, as this rank holds it.
struct VerticalSlashBudgetTarget {
  std::vector<const VerticalSlashLadders*> heads;  // this rank's query heads of the sequence
  int64_t kept_keys = 0;                           // the budget, kept keys per query (> 0)
  int64_t length = 0;                              // the sequence's tokens (> 0)
  double total = 0.0;                              // n, its last queries (level 1)
};

// lambda_b x n of every target (vertical_slash_budget_threshold over every rank's heads).
// sum_over_head_shards adds a float64 vector over the ranks holding the call's heads;
// null: this rank holds every head (the one-rank search, target by target). Every rank
// calls it with the same targets in the same order (their own heads).
std::vector<double> vertical_slash_budget_thresholds(const std::vector<VerticalSlashBudgetTarget>& targets,
                                                     const std::function<void(std::vector<double>&)>& sum_over_head_shards);

}  // namespace sb
