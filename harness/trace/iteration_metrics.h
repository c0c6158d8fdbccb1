#pragma once
// The per-iteration timing metrics, one written formula each (docs/metrics.md,
// docs/sparsebalance.md section 1.7), computed from the ranks' timelines:
//
//   iter_ms            max over ranks of (end of its optimizer step - its iteration start)
//   busy_ms[r]         sum of rank r's forward and backward durations (its compute)
//   idle_ms[r]         iter_ms - busy_ms[r]
//   bubble_fraction    mean over ranks (every stage of every DP rank) of idle_ms[r] / iter_ms;
//                      bubble_fraction_max the max
//   microbatch_ms[k]   forward + backward durations of micro-batch k summed over the
//                      stages of its pipeline; k runs over the global batch in plan
//                      order (DP rank 0's micro-batches, then DP rank 1's, ...)
//   imbalance          max / mean of microbatch_ms
//   dp_imbalance       max / mean over DP ranks d of S_d = the sum of microbatch_ms of d's
//                      micro-batches (each DP rank's compute, all its stages); 1 with one
//                      DP rank
//   slot_imbalance     mean over slots j < n of max / mean over DP ranks d of the
//                      microbatch_ms of d's j-th micro-batch, n the fewest micro-batches
//                      of any DP rank (the micro-batches the DP ranks' pipelines run side
//                      by side); 1 with one DP rank or n = 0
//
// A rank's timeline covers exactly one iteration; world rank r = dp_rank * pp + stage.

#include <cstdint>
#include <vector>

#include "harness/trace/timeline.h"

namespace sb {

struct PipelineMetrics {
  double iter_ms = 0;
  std::vector<double> busy_ms;  // [world rank]
  std::vector<double> idle_ms;  // [world rank]
  double bubble_fraction = 0;
  double bubble_fraction_max = 0;
  std::vector<double> microbatch_ms;         // [global micro-batch]
  std::vector<int64_t> microbatch_dp_rank;   // [global micro-batch]
  double imbalance = 1;
  double dp_imbalance = 1;
  double slot_imbalance = 1;
};

// dp_imbalance and slot_imbalance of the micro-batch latencies and their DP ranks (in
// plan order: each DP rank's micro-batches in its own order). Throws
// std::invalid_argument when the sizes differ or a DP rank is negative.
struct RankImbalance {
  double dp = 1;
  double slot = 1;
};
RankImbalance rank_imbalance(const std::vector<double>& microbatch_ms, const std::vector<int64_t>& microbatch_dp_rank);

// max / mean of the values; 1 for an empty list or a non-positive mean.
double max_over_mean(const std::vector<double>& values);

double iteration_ms(const std::vector<RankTimeline>& ranks);
double compute_busy_ms(const RankTimeline& rank);

// Fills busy/idle/bubble fields of `metrics` from busy_ms and iter_ms.
void derive_bubbles(const std::vector<double>& busy_ms, double iter_ms, PipelineMetrics& metrics);

// ranks: one timeline per pipeline lane, lane = dp_rank * pp + stage (size dp * pp; under
// context parallelism one CP rank's timeline stands for its lane, so its world rank may
// differ from the lane). microbatches_per_dp_rank[d]: how many
// micro-batches DP rank d trained (the plan's counts; every stage of pipeline d must
// have a forward and a backward event for each). Throws std::invalid_argument when the
// timelines do not fit the layout or the counts.
PipelineMetrics compute_pipeline_metrics(const std::vector<RankTimeline>& ranks, int64_t dp, int64_t pp,
                                         const std::vector<int64_t>& microbatches_per_dp_rank);

}  // namespace sb
