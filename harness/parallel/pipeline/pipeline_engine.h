#pragma once
// Runs one iteration of the 1F1B schedule on this rank's stage: forwards and
// backwards of its pipeline's micro-batches, the exchanges with the neighbouring
// stages, and the timeline of all of it. Gradients accumulate into the parameters'
// .grad (see GradientSync); nothing is summed over DP ranks here.
//
// Loss: the last stage computes each micro-batch's summed token cross-entropy and
// back-propagates it divided by `loss_divisor` (the global batch's count of predicted
// tokens), so the accumulated gradients are those of the token mean over the global
// batch.
//
// Attention budget: before each micro-batch's forward, and again before its backward
// (activation checkpointing runs the attention again there), the backend gets that
// micro-batch's request (set_budget_request) and, under CP, its sharding; after the
// forward, the statistics of this stage's layers are taken (take_layer_stats).
//
// Timing: on a GPU every forward and backward ends with a device synchronisation, so
// the recorded durations are the kernels' time rather than the launch time.

#include <memory>
#include <vector>

#include "harness/data/packed_microbatch.h"
#include "harness/parallel/pipeline/pipeline_channel.h"
#include "harness/parallel/pipeline/pipeline_stage.h"
#include "harness/trace/timeline.h"
#include "kernels/attention/core/attention_backend.h"

namespace sb {

struct StageMicroBatch {
  PackedMicroBatch packed;  // tensors on the stage's device (under CP: this rank's tokens)
  AttentionBudgetRequest budget;
  std::shared_ptr<const CpSharding> cp_sharding;  // under CP: how the whole micro-batch is dealt
};

struct PipelineIterationResult {
  double loss_sum = 0;  // last stage: summed token cross-entropy of its micro-batches
  std::vector<std::vector<AttentionLayerStats>> layer_stats;  // [micro-batch] this stage's layers
  // Under TP: [micro-batch] time in this rank's TP collectives during its forward and
  // backward, ms (events of kind kTensorParallel on the timeline); empty without TP.
  std::vector<double> tp_comm_ms;
};

// channel may be null when the pipeline has one stage.
PipelineIterationResult run_one_f_one_b(PipelineStage& stage, PipelineChannel* channel,
                                        const std::vector<StageMicroBatch>& microbatches,
                                        double loss_divisor, TimelineRecorder& timeline);

}  // namespace sb
