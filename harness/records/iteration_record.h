#pragma once
// One line of records.jsonl: what one training iteration did and how long it took,
// over all ranks (written by rank 0). Field definitions (docs/metrics.md); the
// timing formulas are written once, in harness/trace/iteration_metrics.h:
//   iter_ms              max over ranks of the wall time from iteration start to the end
//                        of the optimizer step
//   microbatch_ms[k]     measured forward + backward time of micro-batch k, summed over
//                        the stages of its pipeline; k in plan order (DP rank 0's
//                        micro-batches, then DP rank 1's, ...); microbatch_dp_rank[k]
//                        the DP rank that trained it, microbatch_tokens[k] its tokens
//   imbalance            max / mean of microbatch_ms over the global batch
//   dp_imbalance, slot_imbalance  between DP ranks: of their summed microbatch_ms, and per
//                        pipeline slot (harness/trace/iteration_metrics.h)
//   per_stage_busy_ms[r] compute (forward + backward) time of world rank r = dp_rank * pp
//                        + stage: one entry per (DP rank, stage)
//   per_stage_idle_ms[r] iter_ms - per_stage_busy_ms[r]
//   bubble_fraction      mean over entries of idle / iter_ms; bubble_fraction_max the max
//   balance_overhead_ms  time spent deciding the batching (and budgets): the planner's
//                        time (max over ranks) plus plan_exchange_ms
//   plan_exchange_ms     the all-reduce that brings the planner's observations (and the
//                        loss shares) to every rank, min over ranks: the last rank to
//                        arrive waits for no one (docs/planner_scaling.md)
//   allreduce_ms         time in the data-parallel gradient all-reduce, max over ranks
//   loss                 token mean of the cross-entropy over every predicted token of
//                        the global batch (sum of token losses / loss_tokens)
// Absent when NaN (a simulated iteration trains nothing: harness/sim), read back as NaN:
//   loss, grad_norm
// Present only when meaningful, never made up:
//   microbatch_pred_ms[k] the latency predictor's estimate (when the plan carries one), made
//                        before the iteration ran (calibrated when latency_calibration is on)
//   budgets[k]           the attention budget requested for micro-batch k (0 = the
//                        backend's default), when the attention backend reports statistics
//   coverage[k]          routing-score coverage of micro-batch k, mean over its layers
//   layer_budgets[k][l]  effective budget of layer l (mean over the micro-batch's sequences)
//   layer_coverage[k][l] coverage of layer l (the backend's coverage_mean)
//   layer_floors[k][l]   DST's coverage floor budget of layer l (the smallest k with
//                        C(k) >= (1 - p) C(k0) over the micro-batch), when DST asked for one
//   layer_reference_budgets[k][l]  the budget the pattern's own rule chose in layer l
//                        (mean over the sequences; on the kept-keys axis: kept keys per
//                        query of its rule, DST's reference there), when the backend
//                        reports one
//   sequence_budgets[k][s], sequence_reference_budgets[k][s]  the same two per packed
//                        sequence s of micro-batch k (packing order), the mean over the
//                        layers: what the planner's estimators learn at each sequence's
//                        own length; written with layer_reference_budgets
//   microbatch_lengths[k] the sequence lengths packed into micro-batch k (always written
//                        by the trainer and the simulator; older records lack it)
//   runqueue_wait_ms[r]  how long world rank r's threads were ready to run but had no CPU
//                        during the iteration (harness/common/runqueue_wait.h): time other
//                        processes took from a measured run; written by the trainer when
//                        every rank could read it (Linux), never by the simulator
//   peak_rss_mb[r]       world rank r's process: its resident set's peak during the
//                        iteration, MiB (harness/common/peak_memory.h); when every rank
//                        could measure it (Linux)
//   peak_gpu_allocated_mb[r], peak_gpu_reserved_mb[r]  world rank r's CUDA caching
//                        allocator: peak allocated and reserved bytes during the
//                        iteration, MiB; only on CUDA
//   cp_attention_ms[k][c]  context parallelism: CP rank c's ring attention compute for
//                        micro-batch k (forward and backward steps, summed over stages)
//   cp_kept_pairs[k][c]  the (query, key) pairs those steps computed, summed over heads
//   cp_worker_imbalance[k] max / mean over c of cp_attention_ms[k][c]
//   cp_work_imbalance[k] max / mean over c of cp_kept_pairs[k][c] (the same, by work)
//                        (docs/context_parallel.md, "Worker imbalance"); all only with cp > 1
//   interleave_block,    runs interleaved with the other methods of their sweep point
//   interleave_position  (harness/runner/interleave_schedule.h): the block of iterations
//                        this one trained in, and the run's place in that block's order
//                        (0: first); only when interleaved
//   tp_comm_ms[k][t]     tensor parallelism: TP rank t's time in its TP collectives during
//                        micro-batch k's forwards and backwards, summed over the stages
//                        (docs/tensor_parallel.md); only with tp > 1

#include <nlohmann/json.hpp>

#include <cstdint>
#include <limits>
#include <filesystem>
#include <vector>

namespace sb {

struct PipelineMetrics;  // harness/trace/iteration_metrics.h

struct IterationRecord {
  int64_t iteration = 0;
  bool warmup = false;  // excluded from medians and rates
  double loss = 0;
  int64_t loss_tokens = 0;
  int64_t tokens = 0;  // all tokens processed (prompt included)
  int64_t sequences = 0;
  double lr = 0;
  double grad_norm = 0;  // global L2 norm before clipping
  // The optimizer step was skipped: the gradient norm was not finite and
  // train.nonfinite is "skip" (written only when true).
  bool skipped_step = false;
  int64_t interleave_block = -1;     // -1: the run trained alone
  int64_t interleave_position = -1;
  double iter_ms = 0;
  std::vector<double> microbatch_ms;
  std::vector<int64_t> microbatch_tokens;
  std::vector<int64_t> microbatch_dp_rank;
  double imbalance = 0;
  // harness/trace/iteration_metrics.h; NaN until the metrics are set (and when read from
  // an older record), and then left out of the JSON.
  double dp_imbalance = std::numeric_limits<double>::quiet_NaN();
  double slot_imbalance = std::numeric_limits<double>::quiet_NaN();
  std::vector<double> per_stage_busy_ms;
  std::vector<double> per_stage_idle_ms;
  double bubble_fraction = 0;
  double bubble_fraction_max = 0;
  double balance_overhead_ms = 0;
  double plan_exchange_ms = 0;  // 0 in records written before the exchange existed
  double allreduce_ms = 0;
  // Absent from the JSON when empty (see above).
  std::vector<double> microbatch_pred_ms;
  std::vector<int64_t> budgets;
  std::vector<double> coverage;
  std::vector<std::vector<double>> layer_budgets;
  std::vector<std::vector<double>> layer_coverage;
  std::vector<std::vector<int64_t>> layer_floors;
  std::vector<std::vector<double>> layer_reference_budgets;
  std::vector<std::vector<double>> sequence_budgets;
  std::vector<std::vector<double>> sequence_reference_budgets;
  std::vector<std::vector<int64_t>> microbatch_lengths;
  std::vector<double> runqueue_wait_ms;
  std::vector<double> peak_rss_mb;
  std::vector<double> peak_gpu_allocated_mb;
  std::vector<double> peak_gpu_reserved_mb;
  std::vector<std::vector<double>> cp_attention_ms;
  std::vector<std::vector<int64_t>> cp_kept_pairs;
  std::vector<double> cp_worker_imbalance;
  std::vector<double> cp_work_imbalance;
  std::vector<std::vector<double>> tp_comm_ms;

  // Fills imbalance, per-stage busy/idle and bubble fractions from iter_ms and
  // microbatch_ms for one process running one pipeline stage.
  void derive_single_stage_metrics();
  // Takes iter_ms, per-stage busy/idle, bubble fractions, microbatch_ms,
  // microbatch_dp_rank and imbalance from the pipeline's metrics (real or simulated).
  void set_pipeline_metrics(const PipelineMetrics& metrics);
};

nlohmann::json iteration_record_to_json(const IterationRecord& record);
IterationRecord iteration_record_from_json(const nlohmann::json& json);

// Every record of a records.jsonl (one JSON object per line; empty lines skipped; a last
// line without its newline, cut off by a killed writer, is not a record). Throws
// ConfigError naming file:line for a line that is not a record, std::runtime_error when
// the file cannot be read.
std::vector<IterationRecord> read_iteration_records(const std::filesystem::path& file);

}  // namespace sb
