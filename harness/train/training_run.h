#pragma once
// The whole training of one run on this rank, from the first iteration (or the one a
// checkpoint resumes at) to the last: builds the Trainer, restores the checkpoint when
// asked (weights, AdamW state, random generators, the planner's state), trains each
// iteration, saves checkpoints as the manifest's `checkpoint` section says, and waits for
// every rank at the end. What happens around it (the run folder, progress lines, faults
// on purpose) comes in through the hooks, so the runner owns files and the trainer owns
// the loop. TrainingRun trains in steps, so that several runs can take turns in one
// process (harness/runner/interleave_schedule.h); train_run trains one run whole.
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
#include "harness/train/generator_states.h"
#include "harness/train/saved_model_files.h"
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

class TrainingRun {
 public:
  // Builds the trainer (on a GPU after checking that the micro-batch fits), restores the
  // checkpoint when asked, then calls on_started. Collective over the run's ranks.
  TrainingRun(const RunSpec& run, const RankContext& context, TrainingRunOptions options);
  ~TrainingRun();
  TrainingRun(const TrainingRun&) = delete;
  TrainingRun& operator=(const TrainingRun&) = delete;

  int64_t iterations() const { return result_.iterations; }
  int64_t next_iteration() const { return next_; }

  // Trains iterations [next_iteration(), end), end <= iterations(), with the checkpoints
  // due after them. The process's random generators are this run's own inside the call
  // (restored at its start, kept at its end), whatever other runs drew in between.
  void train_until(int64_t end);

  // Once every iteration is trained: waits for the run's ranks, calls on_finished, and
  // waits for every rank to be done with it.
  TrainingRunResult finish();

 private:
  const RunSpec& run_;
  const RankContext& context_;
  TrainingRunOptions options_;
  std::unique_ptr<Trainer> trainer_;
  std::optional<SavedModelFiles> saved_files_;
  GeneratorStates generators_;
  TrainingRunResult result_;
  int64_t next_ = 0;
};

// One run whole: TrainingRun, trained to its last iteration, finished.
TrainingRunResult train_run(const RunSpec& run, const RankContext& context, const TrainingRunOptions& options);

}  // namespace sb
