#include "harness/runner/run_execution.h"

#include <chrono>
#include <cstdio>
#include <iostream>
#include <ostream>
#include <unistd.h>

#include "harness/common/system_info.h"
#include "harness/latency/run_profiles/method_profiles.h"
#include "harness/runner/local_launcher.h"
#include "harness/runner/run_folder.h"

namespace sb {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

json run_context(const RunSpec& run, const RunManifestOptions& options, const DistEnv& env, const json& interleave) {
  json context = collect_system_info();
  // The threads the ranks train with: the trainer sets them after this is written.
  if (const std::optional<int64_t> threads = intra_op_threads_to_set(run.manifest.train.threads, env.local_world_size)) {
    context["intra_op_threads"] = *threads;
  }
  context["seed"] = run.manifest.seed;
  context["run"] = run.name;
  context["manifest_name"] = run.manifest.name;
  context["manifest_file"] = run.manifest.file;
  context["command_line"] = options.command_line;
  context["started_at_utc"] = utc_timestamp("%Y-%m-%dT%H:%M:%SZ");
  // What the report needs to compare runs: speedups are against the baseline method's
  // run with the same values of the non-method sweep axes (seed, data, ...).
  context["experiment"] = {{"method", run.method},
                           {"baseline", run.baseline_method},
                           {"is_baseline", run.is_baseline},
                           {"sweep_point", run.sweep_point},
                           {"simulated", false}};
  // Interleaved with the other runs of its sweep point: how (records carry each block).
  if (!interleave.is_null()) context["interleave"] = interleave;
  const ParallelismSection& p = run.manifest.parallelism;
  context["world"] = {{"world_size", p.dp * p.pp * p.cp * p.tp},
                      {"dp", p.dp},
                      {"pp", p.pp},
                      {"cp", p.cp},
                      {"tp", p.tp},
                      {"stage_layers", p.stage_layers},
                      {"device", run.manifest.train.device_name()},
                      {"collective_backend", !run.manifest.train.on_cuda() ? "gloo"
                                             : run.manifest.train.gpus_shared() ? "gloo (host-staged)" : "nccl"},
                      {"launched_by", env.source},
                      {"ranks_per_host", env.local_world_size}};
  return context;
}

// Where the command is: which run of how many, the iteration, its loss and time, and
// the time left in this run. On a terminal one line is redrawn every iteration; in a
// log (or under the launcher, whose output is a pipe) a plain line every `every`.
}  // namespace

class ProgressPrinter {
 public:
  ProgressPrinter(std::ostream& log, const RunSpec& run, size_t index, size_t count, int64_t start,
                  int64_t every)
      : log_(log), run_(run), index_(index), count_(count), start_(start), every_(every),
        redraw_(&log == &std::cerr && isatty(STDERR_FILENO) && !started_by_local_launcher()),
        began_(std::chrono::steady_clock::now()) {}

  void iteration_done(int64_t it, int64_t iterations, const IterationRecord& record) {
    const int64_t done = it + 1;
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - began_).count();
    const double eta = elapsed / static_cast<double>(done - start_) * static_cast<double>(iterations - done);
    char line[320];
    std::snprintf(line, sizeof(line),
                  "[%s] run %zu/%zu %s  iteration %lld/%lld  loss %.4f  %.1f ms  bubble %.3f  imbalance %.2f  "
                  "ETA %s",
                  run_.manifest.name.c_str(), index_ + 1, count_, run_.name.c_str(), static_cast<long long>(done),
                  static_cast<long long>(iterations), record.loss, record.iter_ms, record.bubble_fraction,
                  record.imbalance, duration_text(eta).c_str());
    if (redraw_) {
      log_ << "\r\033[K" << line << (done == iterations ? "\n" : "") << std::flush;
    } else if (it == start_ || done % every_ == 0 || done == iterations) {
      log_ << line << "\n" << std::flush;
    }
  }

 private:
  static std::string duration_text(double seconds) {
    const auto s = static_cast<long long>(seconds + 0.5);
    char text[32];
    if (s >= 3600) {
      std::snprintf(text, sizeof(text), "%lldh%02lldm", s / 3600, (s % 3600) / 60);
    } else {
      std::snprintf(text, sizeof(text), "%lldm%02llds", s / 60, s % 60);
    }
    return text;
  }

  std::ostream& log_;
  const RunSpec& run_;
  size_t index_, count_;
  int64_t start_, every_;
  bool redraw_;
  std::chrono::steady_clock::time_point began_;
};

RunExecution::RunExecution(JobSession& session, const PlannedRun& planned, const fs::path& run_dir, size_t index,
                           size_t count, const RunManifestOptions& options, const std::optional<FaultInjection>& fault,
                           const json& interleave, std::ostream& log)
    : run_(planned.spec) {
  const RunSpec& run = planned.spec;
  const Manifest& m = run.manifest;
  const std::shared_ptr<const LatencyPredictor> predictor = load_method_predictor(run);
  session.agree("prepared/" + run.name, [&] {
    json context = run_context(run, options, session.env(), interleave);
    if (predictor) {
      context["profile"] = {{"kind", predictor->profile().kind},
                            {"file", m.methods.at(0).profile},
                            {"copy", "profile.json"}};
    }
    prepare_run_folder(run_dir, planned.decision, manifest_to_json(m), context, log);
    // The profile the run predicted with stays with its results, even if the file it
    // came from is measured again later.
    if (predictor) fs::copy_file(m.methods.at(0).profile, run_dir / "profile.json", fs::copy_options::overwrite_existing);
    return std::string("ok");
  });
  context_ = session.connect_run(run.name, parallel_layout_of(m),
                                 m.train.on_cuda() ? c10::Device(c10::kCUDA) : c10::Device(c10::kCPU),
                                 m.model.config.tie_word_embeddings,
                                 m.train.gpus_shared() ? CollectiveBackend::kGloo : CollectiveBackend::kNccl);
  TrainingRunOptions& training = options_;
  training.run_dir = run_dir;
  if (planned.decision.disposition == Disposition::kResume) training.resume_from = planned.decision.checkpoint;
  training.predictor = predictor;
  if (fault) {
    training.before_iteration = [this, injection = *fault](int64_t it, Trainer& trainer) {
      injection.fire_if_due(context_.rank, it, &trainer);
    };
  }
  if (session.is_leader()) writer_ = std::make_unique<RunFolderWriter>(run_dir);
  training.on_started = [this, &log, &run, index, count, every = options.progress_every](int64_t first) {
    if (writer_) progress_ = std::make_unique<ProgressPrinter>(log, run, index, count, first, every);
  };
  training.on_iteration = [this, &m](int64_t it, const IterationOutcome& outcome) {
    if (step_) {
      IterationRecord record = outcome.record;
      record.interleave_block = step_->block;
      record.interleave_position = step_->position;
      writer_->append(record, outcome.timeline);
    } else {
      writer_->append(outcome.record, outcome.timeline);
    }
    progress_->iteration_done(it, m.train.iterations, outcome.record);
  };
  training.on_finished = [this, resumed = planned.decision.disposition == Disposition::kResume](
                             const TrainingRunResult& done) {
    if (writer_) writer_->finish(done.iterations, done.seconds, resumed);
  };
}

void RunExecution::start() { training_ = std::make_unique<TrainingRun>(run_, context_, std::move(options_)); }

RunExecution::~RunExecution() = default;

void RunExecution::train_until(int64_t end, std::optional<InterleaveStep> step) {
  step_ = step;
  training_->train_until(end);
}

void RunExecution::finish() { training_->finish(); }

}  // namespace sb
