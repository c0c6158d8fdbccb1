#include "harness/runner/run_manifest.h"

#include <functional>
#include <chrono>
#include <optional>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <unistd.h>
#include <ostream>

#include "common/errors.h"
#include "harness/common/system_info.h"
#include "harness/report/report.h"
#include "harness/runner/fault_injection.h"
#include "harness/runner/job_session.h"
#include "harness/runner/local_launcher.h"
#include "harness/runner/profile_ranks.h"
#include "harness/latency/run_profiles/method_profiles.h"
#include "harness/runner/run_evaluation.h"
#include "harness/runner/run_preflight.h"
#include "harness/train/training_run.h"

namespace sb {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

json run_context(const RunSpec& run, const RunManifestOptions& options, const DistEnv& env) {
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

void execute_run(JobSession& session, const RunSpec& run, size_t index, size_t count, const RunDecision& decision,
                 const fs::path& run_dir, const RunManifestOptions& options,
                 const std::optional<FaultInjection>& fault, std::ostream& log) {
  const Manifest& m = run.manifest;
  const json resolved = manifest_to_json(m);
  const std::shared_ptr<const LatencyPredictor> predictor = load_method_predictor(run);
  session.agree("prepared/" + run.name, [&] {
    json context = run_context(run, options, session.env());
    if (predictor) {
      context["profile"] = {{"kind", predictor->profile().kind},
                            {"file", m.methods.at(0).profile},
                            {"copy", "profile.json"}};
    }
    prepare_run_folder(run_dir, decision, resolved, context, log);
    // The profile the run predicted with stays with its results, even if the file it
    // came from is measured again later.
    if (predictor) fs::copy_file(m.methods.at(0).profile, run_dir / "profile.json", fs::copy_options::overwrite_existing);
    return std::string("ok");
  });
  const ParallelLayout layout = parallel_layout_of(m);
  const RankContext context =
      session.connect_run(run.name, layout, m.train.on_cuda() ? c10::Device(c10::kCUDA) : c10::Device(c10::kCPU),
                          m.model.config.tie_word_embeddings,
                          m.train.gpus_shared() ? CollectiveBackend::kGloo : CollectiveBackend::kNccl);
  // Failures are reported while this run's groups still exist: destroying them first
  // would break the peers' connections and make them report before this rank.
  try {
    TrainingRunOptions training;
    training.run_dir = run_dir;
    if (decision.disposition == Disposition::kResume) training.resume_from = decision.checkpoint;
    training.predictor = predictor;
    if (fault) training.before_iteration = [&](int64_t it, Trainer& trainer) { fault->fire_if_due(context.rank, it, &trainer); };
    std::optional<RunFolderWriter> writer;
    std::optional<ProgressPrinter> progress;
    if (session.is_leader()) writer.emplace(run_dir);
    training.on_started = [&](int64_t first) {
      if (writer) progress.emplace(log, run, index, count, first, options.progress_every);
    };
    training.on_iteration = [&](int64_t it, const IterationOutcome& outcome) {
      writer->append(outcome.record, outcome.timeline);
      progress->iteration_done(it, m.train.iterations, outcome.record);
    };
    training.on_finished = [&](const TrainingRunResult& done) {
      if (writer) writer->finish(done.iterations, done.seconds, decision.disposition == Disposition::kResume);
    };
    train_run(run, context, training);
  } catch (const ConfigError& e) {
    session.report_failure(e, log);
    throw;
  } catch (const std::exception& e) {
    if (session.world_size() == 1) throw;
    throw RankFailure(session.report_failure(e, log));
  }
}

// The job's processes: this one alone, or this rank connected to the others.
std::unique_ptr<JobSession> open_session(int64_t world, const ParallelLayout& layout, double timeout_s,
                                         const std::string& manifest_file) {
  if (DistEnv::started_as_rank()) {
    const DistEnv env = DistEnv::from_environment();
    if (env.world_size != world) {
      throw ConfigError(manifest_file, "$.parallelism",
                        "needs dp x pp x cp x tp = " + std::to_string(world) + " ranks but " + env.source + " started " +
                            std::to_string(env.world_size),
                        "start " + std::to_string(world) + " ranks, or change dp, pp, cp or tp");
    }
    const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
    return JobSession::connect(env, timeout, [layout](int r) { return layout.describe_rank(r); });
  }
  if (world != 1) {
    throw std::logic_error("run_manifest: " + std::to_string(world) +
                           " ranks are needed; start them with the local launcher, torchrun or srun");
  }
  return JobSession::single_process();
}

// Runs the plan `plan_of_this_rank` gives, the same on every rank (called inside the
// failure handling, so that a rank that cannot get it stops the others).
RunManifestResult run_job(JobSession& session, const std::function<RunPlan()>& plan_of_this_rank,
                          const RunManifestOptions& options, std::ostream& log) {
  const std::optional<FaultInjection> fault = FaultInjection::from_environment();
  RunManifestResult result;
  try {
    if (session.is_leader()) {
      if (std::string warning = debug_build_warning(); !warning.empty()) log << warning << "\n";
    }
    const RunPlan plan = plan_of_this_rank();
    result.manifest_dir = plan.manifest_dir;
    // Rank 0 checks (or, alone, measures) the latency profiles before any run starts.
    session.agree("profiles", [&] {
      // Under the local launcher, which checked the inputs and profiles before starting
      // the ranks, silently.
      const std::vector<RunSpec> pending = plan.pending();
      if (!started_by_local_launcher()) {
        check_run_inputs(pending);
        print_memory_estimate(pending, log);
      }
      // Alone (no launcher, no torchrun), the profile is measured in a child process that
      // has exited, its memory freed, before this process trains.
      ensure_method_profiles(pending, !DistEnv::started_as_rank(), log, !started_by_local_launcher(),
                             [](int64_t ranks, const std::vector<std::string>& arguments, std::ostream& out) {
                               return launch_profile_ranks(ranks, arguments, out);
                             });
      return std::string("ok");
    });
    for (size_t i = 0; i < plan.runs.size(); ++i) {
      const PlannedRun& planned = plan.runs[i];
      const fs::path run_dir = plan.manifest_dir / planned.spec.name;
      if (planned.decision.disposition == Disposition::kSkip) {
        if (session.is_leader()) {
          log << "skipping " << run_dir.string() << ": already complete (pass --force to rerun)\n";
        }
        result.skipped.push_back(planned.spec.name);
        continue;
      }
      execute_run(session, planned.spec, i, plan.runs.size(), planned.decision, run_dir, options, fault, log);
      result.ran.push_back(planned.spec.name);
      if (planned.decision.disposition == Disposition::kResume) result.resumed.push_back(planned.spec.name);
    }
    session.shutdown();
    // After every rank has finished (and left): rank 0 evaluates the runs whose manifest
    // asks for it, however long that takes, then writes the report.
    if (session.is_leader()) {
      for (const PlannedRun& planned : plan.runs) {
        const fs::path run_dir = plan.manifest_dir / planned.spec.name;
        if (evaluation_pending(planned.spec, run_dir)) evaluate_run(planned.spec, run_dir, log);
      }
      write_report(plan.manifest_dir);
    }
  } catch (const RankFailure&) {
    throw;
  } catch (const ConfigError& e) {
    session.report_failure(e, log);
    throw;
  } catch (const std::exception& e) {
    if (session.world_size() == 1) throw;
    throw RankFailure(session.report_failure(e, log));
  }
  return result;
}

}  // namespace

RunManifestResult run_manifest(const Manifest& manifest, const RunManifestOptions& options, std::ostream& log) {
  check_runnable_by_trainer(manifest);
  const std::unique_ptr<JobSession> session =
      open_session(parallel_layout_of(manifest).world_size(), parallel_layout_of(manifest),
                   manifest.parallelism.timeout_s, options.manifest_file.string());
  // Alone, this process plans; as a rank of torchrun or srun, rank 0 plans and sends it.
  // The planner holds the results folder's one-writer lock until the job ends.
  std::optional<FolderLock> lock;
  const auto locked_plan = [&] {
    lock.emplace(lock_results_folder(options.results_root / manifest.name, options.command_line, log));
    return plan_runs(manifest, options);
  };
  const auto plan_of_this_rank = [&]() -> RunPlan {
    if (session->world_size() == 1) return locked_plan();
    return run_plan_from_json(
        json::parse(session->agree("plan", [&] { return run_plan_to_json(locked_plan()).dump(); })));
  };
  RunManifestResult result = run_job(*session, plan_of_this_rank, options, log);
  if (lock) result.lock = std::make_shared<const FolderLock>(std::move(*lock));
  return result;
}

RunManifestResult run_planned(const RunPlan& plan, const RunManifestOptions& options, std::ostream& log) {
  const std::unique_ptr<JobSession> session =
      open_session(plan.world_size(), plan.layout(), plan.parallelism().timeout_s, plan.manifest_file);
  // Every rank read the same file, written before any of them started.
  return run_job(*session, [&] { return plan; }, options, log);
}

}  // namespace sb
