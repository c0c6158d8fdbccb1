#pragma once
// What each rank sends to rank 0 after an iteration, and how rank 0 turns all of
// them into the iteration's record (records.jsonl) and timeline line.

#include <nlohmann/json.hpp>

#include <vector>

#include "harness/balance/batch_plan.h"
#include "harness/common/peak_memory.h"
#include "harness/parallel/parallel_layout.h"
#include "harness/records/iteration_record.h"
#include "harness/trace/timeline.h"
#include "kernels/attention/core/attention_backend.h"

namespace sb {

struct RankIterationReport {
  RankTimeline timeline;
  double loss_sum = 0;         // last stages: summed token cross-entropy of their micro-batches
  // The squared L2 norm of this rank's share of the gradients (what the global norm sums),
  // so that a non-finite norm names the rank it came from.
  double grad_norm_squared = 0;
  double balance_ms = 0;       // time in the batching policy
  double plan_exchange_ms = 0;  // time in the planner's observation exchange (its wait included)
  double allreduce_ms = 0;     // time in the gradient all-reduce
  // How long this rank's threads waited for a CPU over the iteration
  // (harness/common/runqueue_wait.h); negative when it could not be read.
  double runqueue_wait_ms = -1;
  PeakMemory peak_memory;  // over the iteration (harness/common/peak_memory.h)
  // [micro-batch of this rank's pipeline] statistics of this stage's layers; empty
  // lists when the attention backend reports none (dense).
  std::vector<std::vector<AttentionLayerStats>> layer_stats;
  // Under CP: [micro-batch of this rank's pipeline] this rank's ring attention compute
  // (forward and backward steps), ms; empty without CP.
  std::vector<double> cp_attention_ms;
  std::vector<int64_t> cp_kept_pairs;  // the same steps' kept (query, key) pairs
  // Under TP: [micro-batch of this rank's pipeline] time in TP collectives, ms; empty without TP.
  std::vector<double> tp_comm_ms;
};

std::string rank_iteration_report_to_json(const RankIterationReport& report);
RankIterationReport rank_iteration_report_from_json(const std::string& json);

// Fills, from every rank's report (indexed by world rank) and the iteration's plan:
// loss (sum of loss_sum / record.loss_tokens), the timing metrics
// (harness/trace/iteration_metrics.h), microbatch_tokens, plan_exchange_ms (min over
// ranks: the last rank to arrive waits for no one), balance_overhead_ms (the planner's
// time, max over ranks, plus plan_exchange_ms), allreduce_ms (max over ranks), microbatch_pred_ms (when every planned micro-batch
// has a prediction), runqueue_wait_ms and the peak memory figures (per world rank,
// each when every rank read it), and
// budgets / coverage / layer_budgets / layer_coverage (when
// any stage reported statistics; then every layer of every micro-batch must have), and
// layer_floors (when any layer applied DST's coverage floor), tp_comm_ms (tp > 1).
// Under TP the loss and the attention statistics of a stage come from its TP rank 0
// (every TP rank computes the same loss), except the coverage, which is the mean over
// the TP ranks: each computes its own share of the heads, all shares the same size.
// `record` arrives with iteration, warmup, loss_tokens, tokens, sequences, lr and
// grad_norm set. Throws std::invalid_argument when the reports do not fit the plan.
void assemble_iteration_record(const std::vector<RankIterationReport>& reports,
                               const GlobalBatchPlan& plan, const ParallelLayout& layout,
                               int64_t num_layers, IterationRecord& record);

}  // namespace sb
