#pragma once
// The whole training of one run on this rank, from the first iteration (or the one a
// checkpoint resumes at) to the last: builds the Trainer, restores the checkpoint when
// asked (weights, AdamW state, random generators, the planner's state), trains each
// iteration, saves checkpoints as the manifest's `checkpoint` section says, and waits for
// every rank at the end. What happens around it (the run folder, progress lines, faults
// on purpose) comes in through the hooks, so the runner owns files and the trainer owns
// the loop.
//
// Checkpoints: every `checkpoint.every_iterations` before the last iteration, and after
// the last when `checkpoint.at_end` or the manifest evaluates the run (the evaluation
// reads the final weights from there).

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>

#include "harness/config/manifest.h"
#include "harness/latency/latency_predictor.h"
#include "harness/parallel/rank_context.h"
#include "harness/train/trainer.h"

namespace sb {

struct TrainingRunResult {
  int64_t first_iteration = 0;  // 0, or where the checkpoint resumed
  int64_t iterations = 0;       // the run's total (train.iterations)
  double seconds = 0.0;         // wall time of this invocation's iterations
};

struct TrainingRunOptions {
  std::filesystem::path run_dir;  // checkpoints go to run_dir/checkpoints/
  // A checkpoint folder to resume from; none: start at iteration 0.
  std::optional<std::filesystem::path> resume_from;
  // The method profile's predictor (null without one).
  std::shared_ptr<const LatencyPredictor> predictor;
  // Every rank, once the trainer is built and the checkpoint restored, with the first
  // iteration this invocation runs.
  std::function<void(int64_t first_iteration)> on_started;
  // Every rank, before each iteration (faults on purpose).
  std::function<void(int64_t iteration, Trainer& trainer)> before_iteration;
  // Rank 0, with each iteration's outcome (records, timeline, progress).
  std::function<void(int64_t iteration, const IterationOutcome& outcome)> on_iteration;
  // Every rank, once all ranks have run the last iteration and before they wait for each
  // other to finish (rank 0 writes the run's closing files here, however long it takes:
  // the others wait up to checkpoint.write_timeout_s).
  std::function<void(const TrainingRunResult& result)> on_finished;
};

TrainingRunResult train_run(const RunSpec& run, const RankContext& context, const TrainingRunOptions& options);

}  // namespace sb
