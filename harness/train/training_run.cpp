#include "harness/train/training_run.h"

#include <chrono>
#include <stdexcept>

#include "harness/train/checkpoint.h"
#include "harness/train/memory_estimate.h"

namespace sb {

TrainingRun::TrainingRun(const RunSpec& run, const RankContext& context, TrainingRunOptions options)
    : run_(run), context_(context), options_(std::move(options)) {
  const Manifest& m = run.manifest;
  // On a GPU, a micro-batch that cannot fit stops here, before the model is built.
  check_memory_fits_device(m, context.stage(), context.device, context.local_world_size);
  TrainerOptions trainer_options;
  trainer_options.predictor = options_.predictor;
  trainer_ = std::make_unique<Trainer>(run, context, trainer_options);
  result_.iterations = m.train.iterations;
  if (options_.resume_from) {
    const CheckpointState loaded =
        load_checkpoint(*options_.resume_from, run, context, trainer_->stage(), trainer_->optimizer());
    result_.first_iteration = loaded.iterations_done;
    if (trainer_->planner() != nullptr && !loaded.planner_state.is_null()) {
      trainer_->planner()->load_state(loaded.planner_state);
    }
  }
  next_ = result_.first_iteration;
  // Read once: every checkpoint carries the files model.from had when the run started
  // (and an unreadable one stops the run now, not at its first checkpoint).
  if (context.rank == 0 && (m.checkpoint.every_iterations > 0 || m.checkpoint.at_end || m.eval.has_value())) {
    saved_files_ = saved_model_files(m);
  }
  // The generators as the Trainer seeded them (or the checkpoint restored them).
  generators_ = capture_generator_states();
  if (options_.on_started) options_.on_started(result_.first_iteration);
}

TrainingRun::~TrainingRun() = default;

void TrainingRun::train_until(int64_t end) {
  if (end < next_ || end > result_.iterations) {
    throw std::logic_error("TrainingRun::train_until(" + std::to_string(end) + ") outside [" + std::to_string(next_) +
                           ", " + std::to_string(result_.iterations) + "]");
  }
  const Manifest& m = run_.manifest;
  const int64_t every = m.checkpoint.every_iterations;
  const bool save_at_end = m.checkpoint.at_end || m.eval.has_value();
  restore_generator_states(generators_);
  const auto wall_start = std::chrono::steady_clock::now();
  for (; next_ < end; ++next_) {
    const int64_t it = next_;
    if (options_.before_iteration) options_.before_iteration(it, *trainer_);
    const std::optional<IterationOutcome> outcome = trainer_->train_iteration(it);
    if (outcome && options_.on_iteration) options_.on_iteration(it, *outcome);
    const int64_t done = it + 1;
    if ((every > 0 && done % every == 0 && done < result_.iterations) || (done == result_.iterations && save_at_end)) {
      save_checkpoint(options_.run_dir, done, run_, context_, trainer_->stage(), trainer_->optimizer(),
                      trainer_->planner() != nullptr ? trainer_->planner()->state() : nlohmann::json(), saved_files_);
    }
  }
  result_.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  generators_ = capture_generator_states();
}

TrainingRunResult TrainingRun::finish() {
  if (next_ != result_.iterations) {
    throw std::logic_error("TrainingRun::finish at iteration " + std::to_string(next_) + " of " +
                           std::to_string(result_.iterations));
  }
  // The wait for the slowest rank belongs to the run's wall time, as when it trains whole.
  const auto wait_start = std::chrono::steady_clock::now();
  context_.barrier();
  result_.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - wait_start).count();
  if (options_.on_finished) options_.on_finished(result_);
  context_.wait_for_all("finished", std::chrono::milliseconds(
                                        static_cast<int64_t>(run_.manifest.checkpoint.write_timeout_s * 1000)));
  return result_;
}

TrainingRunResult train_run(const RunSpec& run, const RankContext& context, const TrainingRunOptions& options) {
  TrainingRun training(run, context, options);
  training.train_until(training.iterations());
  return training.finish();
}

}  // namespace sb
