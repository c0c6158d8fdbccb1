#pragma once
// The training loop of one rank: per iteration it draws the global batch, plans it
// with the run's batching policy (every rank computes the same plan), runs its
// pipeline's micro-batches through its stage with the 1F1B schedule, sums the
// gradients over the data-parallel ranks, clips by the global gradient norm, steps
// AdamW, and sends what it measured to rank 0, which assembles the iteration's record.
// With dp = pp = 1 the same code runs in one process without any communication.
//
// Loss: token mean of the cross-entropy over the global batch; each micro-batch's
// summed loss is divided by the global batch's predicted-token count, so the gradients
// summed over micro-batches and DP ranks are those of one big batch.

#include <torch/optim/adamw.h>

#include <functional>
#include <memory>
#include <optional>

#include "harness/balance/batch_planner.h"
#include "harness/balance/batching_policy.h"
#include "harness/config/manifest.h"
#include "harness/data/dataset.h"
#include "harness/parallel/pipeline/pipeline_engine.h"
#include "kernels/attention/ring/ring_attention_backend.h"
#include "harness/parallel/data_parallel/gradient_sync.h"
#include "harness/parallel/pipeline/pipeline_channel.h"
#include "harness/parallel/pipeline/pipeline_stage.h"
#include "harness/parallel/rank_context.h"
#include "harness/parallel/tensor_parallel/tensor_parallel_group.h"
#include "harness/records/iteration_record.h"
#include "harness/trace/timeline.h"
#include "harness/train/iteration_report.h"

namespace sb {

struct TrainerOptions {
  // Builds the run's attention backend from the method's options; default the pattern's own (AttentionOptions::make_backend). Tests
  // pass one that reports statistics, to check their way into the records.
  std::function<std::shared_ptr<AttentionBackend>(const AttentionOptions&)> make_backend;
  // Tests only: a batching policy that replaces the run's planner (batching and budget
  // policies) and sets budgets and predictions itself, to check their way to the
  // backend and the records.
  std::function<std::unique_ptr<BatchingPolicy>(BatchingKind)> make_batching;
  // The latency predictor of the method's profile (null without one); the runner
  // loads the profile the manifest names (or measures it on first use).
  std::shared_ptr<const LatencyPredictor> predictor;
};

// What rank 0 knows after an iteration (other ranks get std::nullopt).
struct IterationOutcome {
  IterationRecord record;
  TimelineIteration timeline;
};

// The gradients of one iteration before clipping and the optimizer step.
struct GradientPass {
  GlobalBatchPlan plan;
  std::vector<int64_t> lengths;  // of the global batch's samples
  RankIterationReport report;  // this rank's part (timeline still open)
  int64_t loss_tokens = 0;
  int64_t tokens = 0;
  int64_t sequences = 0;
};

class Trainer {
 public:
  // run.manifest has exactly one method (see expand_runs). Seeds LibTorch's generator
  // with the manifest seed before building the model, so every layout starts from the
  // one-process run's weights.
  Trainer(const RunSpec& run, const RankContext& context, TrainerOptions options = {});
  ~Trainer();

  // Forward and backward of the iteration's global batch on this rank, gradients
  // summed over DP and CP ranks (and tied-embedding stages). Leaves them in the parameters.
  GradientPass compute_gradients(int64_t iteration);

  // compute_gradients, then global gradient norm, clipping, AdamW step at the
  // scheduled learning rate, and the exchange of reports (collective). A non-finite
  // gradient norm skips the step; a non-finite loss or norm then throws ConfigError on
  // every rank alike under train.nonfinite "stop" (the record is not returned), or is
  // recorded with skipped_step under "skip".
  std::optional<IterationOutcome> train_iteration(int64_t iteration);

  PipelineStage& stage() { return *stage_; }
  // The run's planner (null when a test replaced it); its state goes into checkpoints.
  BatchPlanner* planner() { return planner_.get(); }
  torch::optim::AdamW& optimizer() { return *optimizer_; }
  const RankContext& context() const { return context_; }
  const RunSpec& run() const { return run_; }

 private:
  // The global norm; this rank's squared share into *local_squared (what it summed).
  double global_grad_norm(double* local_squared);
  // Under CP: this rank's tokens of the micro-batch (global positions kept) and the
  // sharding the ring attention needs.
  StageMicroBatch shard_for_context_parallelism(StageMicroBatch mb) const;

  RunSpec run_;
  RankContext context_;
  std::unique_ptr<Dataset> dataset_;
  std::unique_ptr<BatchPlanner> planner_;
  std::unique_ptr<BatchingPolicy> test_batching_;  // TrainerOptions::make_batching
  std::unique_ptr<PipelineStage> stage_;
  std::unique_ptr<PipelineChannel> channel_;
  std::shared_ptr<RingAttentionBackend> ring_backend_;  // cp > 1: the stage's backend
  std::shared_ptr<TensorParallelGroup> tensor_parallel_;  // tp > 1: this stage's TP group
  std::unique_ptr<GradientSync> gradients_;
  std::vector<StageParameter> trained_;  // this stage's parameters that train (all, or LoRA's)
  std::unique_ptr<torch::optim::AdamW> optimizer_;
  TimelineRecorder timeline_;
};

}  // namespace sb
