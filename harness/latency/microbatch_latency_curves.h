#pragma once
// Micro-batches' predicted latencies as functions of their budget:
// LatencyPredictor::microbatch_ms(lengths, k, total_layers) for many k, bitwise equal to
// it, with every term that does not depend on k computed once per micro-batch (each
// sequence's place on the length grid and its rest term; the micro-batch's rest, head,
// overhead and calibration scale at its total tokens), all micro-batches in flat arrays.
// DST's searches ask for about 190,000 (micro-batch, budget) latencies per global batch
// at 16,384 micro-batches; this answers each in a few table lookups, with no allocation.

#include <cstdint>
#include <vector>

#include "harness/latency/latency_predictor.h"

namespace sb {

class MicrobatchLatencyCurves {
 public:
  // The predictor must outlive the curves. Budgets in [lowest_budget, highest_budget]
  // are located on the profile's budget grid once, here; others as they are asked for.
  MicrobatchLatencyCurves(const LatencyPredictor& predictor, int64_t total_layers, int64_t lowest_budget,
                          int64_t highest_budget);

  // Adds the micro-batch of samples[i] (positions into sample_lengths); returns its index.
  size_t add(const std::vector<int64_t>& samples, const std::vector<int64_t>& sample_lengths);
  // Adds every micro-batch of `microbatches` (each a list of positions into
  // sample_lengths), in order, as add() would one by one; their terms are computed on the
  // intra-op threads. Throws std::invalid_argument as add() does.
  void add_all(const std::vector<const std::vector<int64_t>*>& microbatches, const std::vector<int64_t>& sample_lengths);
  // Micro-batch m's predicted latency with budget k for every sequence (ms).
  double at(size_t m, int64_t budget) const;
  size_t size() const { return microbatches_.size(); }

 private:
  struct Microbatch {
    size_t first = 0, count = 0;  // its sequences in points_ / rest_
    double rest_total = 0, head_total = 0, overhead_total = 0, scale = 1;
  };

  LatencyPredictor::BudgetPoint budget_point(int64_t budget) const;
  // Fills microbatches_[m]'s sequences (points_, rest_ from its `first`) and totals.
  void fill(Microbatch& mb, const std::vector<int64_t>& samples, const std::vector<int64_t>& sample_lengths);

  const LatencyPredictor* predictor_;
  double layers_;
  int64_t lowest_budget_;
  std::vector<LatencyPredictor::BudgetPoint> budget_points_;  // [budget - lowest_budget]
  bool add_head_, scaled_;
  std::vector<LatencyPredictor::LengthPoint> points_;  // [sequence of every micro-batch]
  std::vector<double> rest_;                           // [sequence] rest_ms(length)
  std::vector<Microbatch> microbatches_;
};

}  // namespace sb
