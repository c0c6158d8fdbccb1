#include "harness/runner/run_manifest.h"

#include <algorithm>
#include <chrono>
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
#include "harness/runner/method_profiles.h"
#include "harness/runner/run_evaluation.h"
#include "harness/runner/run_preflight.h"
#include "harness/train/checkpoint.h"
#include "harness/train/trainer.h"

namespace sb {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

json run_context(const RunSpec& run, const RunManifestOptions& options, const DistEnv& env) {
  json context = collect_system_info();
  context["seed"] = run.manifest.seed;
  context["run"] = run.name;
  context["manifest_name"] = run.manifest.name;
  context["manifest_file"] = options.manifest_file.string();
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
  context["world"] = {{"world_size", p.dp * p.pp},
                      {"dp", p.dp},
                      {"pp", p.pp},
                      {"stage_layers", p.stage_layers},
                      {"device", run.manifest.train.device},
                      {"collective_backend", run.manifest.train.device == "cpu" ? "gloo" : "nccl"},
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
  const RankContext context = session.connect_run(run.name, layout, c10::Device(m.train.device),
                                                  m.model.config.tie_word_embeddings);
  // Failures are reported while this run's groups still exist: destroying them first
  // would break the peers' connections and make them report before this rank.
  try {
    TrainerOptions trainer_options;
    trainer_options.predictor = predictor;
    Trainer trainer(run, context, trainer_options);
    int64_t start = 0;
    if (decision.disposition == Disposition::kResume) {
      const CheckpointState loaded =
          load_checkpoint(decision.checkpoint, run, context, trainer.stage(), trainer.optimizer());
      start = loaded.iterations_done;
      if (trainer.planner() != nullptr && !loaded.planner_state.is_null()) {
        trainer.planner()->load_state(loaded.planner_state);
      }
    }
    std::optional<RunFolderWriter> writer;
    if (session.is_leader()) writer.emplace(run_dir);
    const int64_t iterations = m.train.iterations;
    const auto wall_start = std::chrono::steady_clock::now();
    ProgressPrinter progress(log, run, index, count, start, options.progress_every);
    for (int64_t it = start; it < iterations; ++it) {
      if (fault) fault->fire_if_due(context.rank, it);
      std::optional<IterationOutcome> outcome = trainer.train_iteration(it);
      if (outcome) {
        writer->append(outcome->record, outcome->timeline);
        progress.iteration_done(it, iterations, outcome->record);
      }
      const int64_t done = it + 1;
      const int64_t every = m.checkpoint.every_iterations;
      // The evaluation after training reads the final weights from the last checkpoint.
      const bool at_end = m.checkpoint.at_end || m.eval.has_value();
      if ((every > 0 && done % every == 0 && done < iterations) || (done == iterations && at_end)) {
        save_checkpoint(run_dir, done, run, context, trainer.stage(), trainer.optimizer(),
                        trainer.planner() != nullptr ? trainer.planner()->state() : nlohmann::json());
      }
    }
    context.barrier();
    if (writer) {
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
      writer->finish(iterations, seconds, decision.disposition == Disposition::kResume);
    }
    // timeline.json of a long run takes a while to write: wait as for a checkpoint.
    context.wait_for_all("finished",
                         std::chrono::milliseconds(static_cast<int64_t>(m.checkpoint.write_timeout_s * 1000)));
  } catch (const ConfigError& e) {
    session.report_failure(e, log);
    throw;
  } catch (const std::exception& e) {
    if (session.world_size() == 1) throw;
    throw RankFailure(session.report_failure(e, log));
  }
}

// The runs grouped by their point on the non-method sweep axes (seeds, data, ...), the
// groups in the order they first appear, each group in manifest method order. A speedup
// compares a run with the baseline at the same non-method point, so those runs execute
// back to back: on a machine whose speed drifts over minutes (seen here: 15-25 % within
// one invocation) the comparison is then made close in time.
std::vector<RunSpec> in_execution_order(std::vector<RunSpec> runs) {
  const auto point_key = [](const RunSpec& run) {
    json key = json::object();
    for (const auto& [path, value] : run.sweep_point.items()) {
      if (path.rfind("methods.", 0) != 0) key[path] = value;
    }
    return key.dump();
  };
  std::vector<std::string> keys;
  for (const RunSpec& run : runs) {
    const std::string key = point_key(run);
    if (std::find(keys.begin(), keys.end(), key) == keys.end()) keys.push_back(key);
  }
  std::stable_sort(runs.begin(), runs.end(), [&](const RunSpec& a, const RunSpec& b) {
    return std::find(keys.begin(), keys.end(), point_key(a)) < std::find(keys.begin(), keys.end(), point_key(b));
  });
  return runs;
}

}  // namespace

std::vector<RunSpec> select_runs(const Manifest& manifest, const RunManifestOptions& options) {
  std::vector<RunSpec> runs = in_execution_order(expand_runs(manifest));
  if (!options.only) return runs;
  std::vector<RunSpec> selected;
  std::string names;
  for (auto& run : runs) {
    names += (names.empty() ? "" : ", ") + run.name;
    if (run.name == *options.only) selected.push_back(run);
  }
  if (selected.empty()) {
    throw ConfigError("--only", "", "no run named \"" + *options.only + "\" in " + options.manifest_file.string(),
                      "use one of: " + names);
  }
  return selected;
}

std::vector<RunSpec> runs_to_execute(const Manifest& manifest, const RunManifestOptions& options) {
  const std::vector<RunSpec> runs = select_runs(manifest, options);
  const std::vector<RunDecision> decisions = decide_runs(manifest, options);
  std::vector<RunSpec> selected;
  for (size_t i = 0; i < runs.size(); ++i) {
    if (decisions[i].disposition != Disposition::kSkip) selected.push_back(runs[i]);
  }
  return selected;
}

std::vector<RunDecision> decide_runs(const Manifest& manifest, const RunManifestOptions& options) {
  std::vector<RunDecision> decisions;
  const fs::path manifest_dir = options.results_root / manifest.name;
  for (const RunSpec& run : select_runs(manifest, options)) {
    decisions.push_back(decide_run(manifest_dir / run.name, manifest_to_json(run.manifest), options.force,
                                   options.manifest_file.string()));
  }
  return decisions;
}

RunManifestResult run_manifest(const Manifest& manifest, const RunManifestOptions& options, std::ostream& log) {
  check_runnable_by_trainer(manifest);
  const int64_t world = manifest.parallelism.dp * manifest.parallelism.pp;
  const std::optional<FaultInjection> fault = FaultInjection::from_environment();
  std::unique_ptr<JobSession> session;
  if (DistEnv::started_as_rank()) {
    const DistEnv env = DistEnv::from_environment();
    if (env.world_size != world) {
      throw ConfigError(options.manifest_file.string(), "$.parallelism",
                        "needs dp x pp = " + std::to_string(world) + " ranks but " + env.source + " started " +
                            std::to_string(env.world_size),
                        "start " + std::to_string(world) + " ranks, or change dp and pp");
    }
    const ParallelLayout layout = parallel_layout_of(manifest);
    const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(manifest.parallelism.timeout_s * 1000));
    session = JobSession::connect(env, timeout, [layout](int r) { return layout.describe_rank(r); });
  } else if (world != 1) {
    throw std::logic_error("run_manifest: " + std::to_string(world) +
                           " ranks are needed; start them with the local launcher, torchrun or srun");
  } else {
    session = JobSession::single_process();
  }

  RunManifestResult result;
  result.manifest_dir = options.results_root / manifest.name;
  try {
    if (session->is_leader()) {
      if (std::string warning = debug_build_warning(); !warning.empty()) log << warning << "\n";
    }
    const json shared = json::parse(session->agree("decisions", [&] {
      json list = json::array();
      for (const RunDecision& d : decide_runs(manifest, options)) list.push_back(run_decision_to_json(d));
      return list.dump();
    }));
    const std::vector<RunSpec> runs = select_runs(manifest, options);
    // Rank 0 checks (or, alone, measures) the latency profiles before any run starts.
    session->agree("profiles", [&] {
      std::vector<RunSpec> pending;
      for (size_t i = 0; i < runs.size(); ++i) {
        if (run_decision_from_json(shared.at(i)).disposition != Disposition::kSkip) pending.push_back(runs[i]);
      }
      // Under the local launcher, which checked the inputs and profiles before starting
      // the ranks, silently.
      if (!started_by_local_launcher()) check_run_inputs(pending);
      ensure_method_profiles(pending, !DistEnv::started_as_rank(), log, !started_by_local_launcher());
      return std::string("ok");
    });
    for (size_t i = 0; i < runs.size(); ++i) {
      const RunDecision decision = run_decision_from_json(shared.at(i));
      const fs::path run_dir = result.manifest_dir / runs[i].name;
      if (decision.disposition == Disposition::kSkip) {
        if (session->is_leader()) {
          log << "skipping " << run_dir.string() << ": already complete (pass --force to rerun)\n";
        }
        result.skipped.push_back(runs[i].name);
        continue;
      }
      execute_run(*session, runs[i], i, runs.size(), decision, run_dir, options, fault, log);
      result.ran.push_back(runs[i].name);
      if (decision.disposition == Disposition::kResume) result.resumed.push_back(runs[i].name);
    }
    session->shutdown();
    // After every rank has finished (and left): rank 0 evaluates the runs whose manifest
    // asks for it, however long that takes, then writes the report.
    if (session->is_leader()) {
      for (const RunSpec& run : runs) {
        const fs::path run_dir = result.manifest_dir / run.name;
        if (evaluation_pending(run, run_dir)) evaluate_run(run, run_dir, log);
      }
      write_report(result.manifest_dir);
    }
  } catch (const RankFailure&) {
    throw;
  } catch (const ConfigError& e) {
    session->report_failure(e, log);
    throw;
  } catch (const std::exception& e) {
    if (session->world_size() == 1) throw;
    throw RankFailure(session->report_failure(e, log));
  }
  return result;
}

}  // namespace sb
