#include "harness/train/training_run.h"

#include <chrono>

#include "harness/train/checkpoint.h"
#include "harness/train/memory_estimate.h"

namespace sb {

TrainingRunResult train_run(const RunSpec& run, const RankContext& context, const TrainingRunOptions& options) {
  const Manifest& m = run.manifest;
  // On a GPU, a micro-batch that cannot fit stops here, before the model is built.
  check_memory_fits_device(m, context.stage(), context.device, context.local_world_size);
  TrainerOptions trainer_options;
  trainer_options.predictor = options.predictor;
  Trainer trainer(run, context, trainer_options);
  TrainingRunResult result;
  result.iterations = m.train.iterations;
  if (options.resume_from) {
    const CheckpointState loaded =
        load_checkpoint(*options.resume_from, run, context, trainer.stage(), trainer.optimizer());
    result.first_iteration = loaded.iterations_done;
    if (trainer.planner() != nullptr && !loaded.planner_state.is_null()) {
      trainer.planner()->load_state(loaded.planner_state);
    }
  }
  const int64_t every = m.checkpoint.every_iterations;
  const bool save_at_end = m.checkpoint.at_end || m.eval.has_value();
  // Read once: every checkpoint carries the files model.from had when the run started
  // (and an unreadable one stops the run now, not at its first checkpoint).
  std::optional<SavedModelFiles> saved_files;
  if (context.rank == 0 && (every > 0 || save_at_end)) saved_files = saved_model_files(m);
  if (options.on_started) options.on_started(result.first_iteration);
  const auto wall_start = std::chrono::steady_clock::now();
  for (int64_t it = result.first_iteration; it < result.iterations; ++it) {
    if (options.before_iteration) options.before_iteration(it, trainer);
    const std::optional<IterationOutcome> outcome = trainer.train_iteration(it);
    if (outcome && options.on_iteration) options.on_iteration(it, *outcome);
    const int64_t done = it + 1;
    if ((every > 0 && done % every == 0 && done < result.iterations) || (done == result.iterations && save_at_end)) {
      save_checkpoint(options.run_dir, done, run, context, trainer.stage(), trainer.optimizer(),
                      trainer.planner() != nullptr ? trainer.planner()->state() : nlohmann::json(), saved_files);
    }
  }
  context.barrier();
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  if (options.on_finished) options.on_finished(result);
  context.wait_for_all("finished",
                       std::chrono::milliseconds(static_cast<int64_t>(m.checkpoint.write_timeout_s * 1000)));
  return result;
}

}  // namespace sb
