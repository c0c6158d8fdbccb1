#pragma once
// What the planner learns from an iteration, and the one all-reduce that brings it to every
// rank (docs/planner_scaling.md, "Where the planner runs"). Every rank plans the next global
// batch itself from the same observations, so no plan is broadcast and no rank waits for
// another's planner.
//
// The exchanged vector (float64) has slots laid out by the iteration's plan, with k the
// global micro-batches in plan order (DP rank 0's, then rank 1's, ...), P stages, N samples
// of the global batch and W world ranks:
//   latency    [k][s][2]  forward and backward ms of micro-batch k on stage s (its lane:
//                         CP rank 0, TP rank 0)
//   budgets    [k][3]     over the micro-batch's layers on every stage: the effective
//                         budgets summed over layers and sequences, the layers that reported
//                         statistics, DST's floors summed over layers
//   samples    [i][2]     per sample: its effective budget and the pattern's own budget,
//                         summed over layers (only where the backend reports the latter)
//   references [1]        layers that reported the pattern's own budget
//   ranks      [r][2]     rank r's loss share (summed token losses of a last stage's TP
//                         rank 0, 0 elsewhere) and its squared gradient-norm share
// Each latency and rank slot is written by one rank and is 0 on every other, and every
// budget slot sums integers: the sum is exact in whatever order the collective adds, so
// every rank reads the same bits. A micro-batch's latency is its slots added in stage order,
// forward before backward: bit for bit the record's microbatch_ms
// (harness/trace/iteration_metrics.h).

#include <cstdint>
#include <vector>

#include "harness/balance/batch_plan.h"
#include "harness/parallel/parallel_layout.h"
#include "harness/trace/timeline.h"
#include "kernels/attention/core/attention_backend.h"

namespace sb {

// An iteration's observations, as every rank reads them from the summed slots.
struct PlanObservations {
  // [DP rank][micro-batch], shaped as the plan (BatchPlanner::observe's arguments):
  // the mean effective budget over layers and sequences (the planned budget where the
  // backend reported none), the mean over layers of DST's floor (0 where none), and
  // forward + backward ms summed over the stages.
  std::vector<std::vector<double>> budgets, floors, latency_ms;
  // [sample of the global batch]: its budget and the pattern's own budget, each the mean
  // over layers; empty unless some layer reported the pattern's own budget.
  std::vector<double> sample_budgets, sample_references;
  std::vector<double> loss_shares, grad_norm_squared;  // [world rank]

  double loss_sum() const;  // loss_shares added in rank order (as the record's loss)
};

class PlanObservationSlots {
 public:
  // `samples`: the global batch's sample count (the plan's sample indices are below it).
  // Keeps a reference to `plan`, which must outlive it.
  PlanObservationSlots(const GlobalBatchPlan& plan, const ParallelLayout& layout, size_t samples);

  size_t size() const { return size_; }
  double bytes() const { return 8.0 * static_cast<double>(size_); }

  // The slots world rank `rank` writes, zeros elsewhere. events: its timeline of the
  // iteration (forward and backward events by its micro-batch index); layer_stats: per
  // micro-batch of its pipeline, this stage's layers (empty lists for a backend without
  // statistics). Throws std::invalid_argument for statistics that do not fit the plan.
  std::vector<double> share(int64_t rank, const std::vector<TimelineEvent>& events,
                            const std::vector<std::vector<AttentionLayerStats>>& layer_stats, double loss_sum,
                            double grad_norm_squared) const;

  // The observations in the element-wise sum of every rank's share. Throws
  // std::invalid_argument when the sum does not fit the layout (a wrong size, a micro-batch
  // whose stages reported statistics for some of its num_layers layers only).
  PlanObservations read(const std::vector<double>& summed, int64_t num_layers) const;

 private:
  size_t latency_slot(size_t k, int64_t stage) const { return k * static_cast<size_t>(2 * layout_.pp()) + static_cast<size_t>(2 * stage); }
  size_t budget_slot(size_t k) const { return budgets_ + 3 * k; }
  size_t sample_slot(int64_t sample) const { return samples_ + 2 * static_cast<size_t>(sample); }
  size_t rank_slot(int64_t rank) const { return ranks_ + 2 * static_cast<size_t>(rank); }

  const GlobalBatchPlan& plan_;
  ParallelLayout layout_;
  size_t sample_count_;
  std::vector<size_t> first_microbatch_;  // [DP rank] its first k
  size_t microbatches_ = 0;
  size_t budgets_ = 0, samples_ = 0, references_ = 0, ranks_ = 0, size_ = 0;  // offsets
};

}  // namespace sb
