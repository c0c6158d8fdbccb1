#include "harness/runner/run_manifest.h"

#include <functional>
#include <chrono>
#include <optional>
#include <cstdlib>
#include <iostream>
#include <ostream>

#include "common/errors.h"
#include "harness/common/system_info.h"
#include "harness/report/report.h"
#include "harness/latency/run_profiles/method_profiles.h"
#include "harness/runner/fault_injection.h"
#include "harness/runner/interleave_schedule.h"
#include "harness/runner/job_session.h"
#include "harness/runner/local_launcher.h"
#include "harness/runner/profile_ranks.h"
#include "harness/runner/run_evaluation.h"
#include "harness/runner/run_execution.h"
#include "harness/runner/run_preflight.h"

namespace sb {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Runs the plan's runs `indices` to their end: one run whole, or several taking turns in
// blocks of iterations (interleave_schedule.h). A failure is reported while every one of
// their groups still exists: destroying them first would break the peers' connections
// and make them report before this rank.
void execute_runs(JobSession& session, const RunPlan& plan, const std::vector<size_t>& indices,
                         const RunManifestOptions& options, const std::optional<FaultInjection>& fault,
                         std::ostream& log) {
  std::vector<std::unique_ptr<RunExecution>> runs;
  try {
    json interleave;
    if (indices.size() > 1) {
      interleave = {{"block_iterations", plan.interleave_block_iterations}, {"runs", json::array()}};
      for (size_t i : indices) interleave["runs"].push_back(plan.runs[i].spec.name);
    }
    for (size_t i : indices) {
      runs.push_back(std::make_unique<RunExecution>(session, plan.runs[i], plan.manifest_dir / plan.runs[i].spec.name,
                                                    i, plan.runs.size(), options, fault, interleave, log));
    }
    for (auto& run : runs) run->start();
    if (runs.size() == 1) {
      runs.front()->train_until(runs.front()->iterations());
    } else {
      std::vector<int64_t> first, end;
      for (const auto& run : runs) {
        first.push_back(run->next_iteration());
        end.push_back(run->iterations());
      }
      for (const InterleaveStep& step : interleave_schedule(first, end, plan.interleave_block_iterations)) {
        runs[step.run]->train_until(step.end, step);
      }
    }
    for (auto& run : runs) run->finish();
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
        print_interleave_memory(plan, log);
      }
      // Alone (no launcher, no torchrun), the profile is measured in a child process that
      // has exited, its memory freed, before this process trains.
      ensure_method_profiles(pending, !DistEnv::started_as_rank(), log, !started_by_local_launcher(),
                             [](int64_t ranks, const std::vector<std::string>& arguments, std::ostream& out) {
                               return launch_profile_ranks(ranks, arguments, out);
                             });
      return std::string("ok");
    });
    for (const std::vector<size_t>& comparison : plan.comparisons()) {
      std::vector<size_t> pending;
      for (size_t i : comparison) {
        const PlannedRun& planned = plan.runs[i];
        if (planned.decision.disposition != Disposition::kSkip) {
          pending.push_back(i);
          continue;
        }
        if (session.is_leader()) {
          log << "skipping " << (plan.manifest_dir / planned.spec.name).string()
              << ": already complete (pass --force to rerun)\n";
        }
        result.skipped.push_back(planned.spec.name);
      }
      if (plan.interleave_block_iterations > 0 && pending.size() > 1) {
        execute_runs(session, plan, pending, options, fault, log);
      } else {
        for (size_t i : pending) execute_runs(session, plan, {i}, options, fault, log);
      }
      for (size_t i : pending) {
        result.ran.push_back(plan.runs[i].spec.name);
        if (plan.runs[i].decision.disposition == Disposition::kResume) result.resumed.push_back(plan.runs[i].spec.name);
      }
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
