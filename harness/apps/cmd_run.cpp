#include <CLI/CLI.hpp>

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>

#include <unistd.h>

#include "common/errors.h"
#include "harness/apps/cli_checks.h"
#include "harness/apps/commands.h"
#include "harness/apps/manifest_set_option.h"
#include "harness/common/atomic_file.h"
#include "harness/common/system_info.h"
#include "harness/config/manifest.h"
#include "harness/parallel/parallel_layout.h"
#include "harness/parallel/process_group.h"
#include "harness/report/report_plots.h"
#include "harness/runner/job_session.h"
#include "harness/runner/local_launcher.h"
#include "harness/runner/profile_ranks.h"
#include "harness/latency/run_profiles/method_profiles.h"
#include "harness/runner/run_manifest.h"
#include "harness/runner/run_preflight.h"

namespace sb::cli {
namespace {

struct RunFlags {
  std::string manifest;
  std::string results = "results";
  std::string only;
  bool force = false;
  int64_t progress_every = 10;
  int64_t max_local_ranks = 0;  // 0: default_max_local_ranks
  bool plots = true;
  std::string plan;  // set by the local launcher for its ranks
  std::vector<std::string> sets;  // --set PATH=VALUE
};

// The report's figures (docs/reports.md) into <results>/<manifest>/plots/. Without a
// Python that has matplotlib this is a warning: the results and the report stand.
// SB_NO_PLOTS=1 (the test suite sets it) skips them, as --no-plots does.
void draw_plots(const std::filesystem::path& manifest_dir, bool wanted) {
  const char* off = std::getenv("SB_NO_PLOTS");
  if (!wanted || (off != nullptr && std::string(off) == "1")) return;
  const std::string redo = "; draw them later with: sparsebalance report " + manifest_dir.string() + " --plots";
  std::cout << std::flush;
  try {
    PlotRequest request;
    request.results_dir = manifest_dir;
    const int rc = run_plot_script(request);
    if (rc == 0) {
      std::cout << "drew the plots into " << (manifest_dir / "plots").string() << "\n";
    } else {
      std::cerr << "warning: the plot script exited with status " << rc << redo << "\n";
    }
  } catch (const std::exception& e) {
    std::cerr << "warning: no plots drawn: " << e.what() << redo << "\n";
  }
}

// counts: whether `result` says what ran (the launcher only knows the folder).
// Prints report.md as the ranks wrote it (the launcher process never holds the Report).
void print_report(const RunManifestResult& result, bool counts) {
  std::cout << read_file(result.manifest_dir / "report.md");
  std::cout << "\nwrote " << (result.manifest_dir / "report.md").string();
  if (counts) {
    std::cout << " (ran " << result.ran.size() << ", resumed " << result.resumed.size() << ", skipped "
              << result.skipped.size() << ")";
  }
  std::cout << "\n";
}

// dp x pp > 1 without torchrun/srun: this process becomes the launcher of the ranks. It
// plans the runs once and hands the ranks that plan (run_plan.h), not the manifest.
int launch(const Manifest& manifest, const RunFlags& flags, const RunManifestOptions& options) {
  // Conflicts and missing inputs are reported once, before any rank starts; missing
  // latency profiles are measured here, with the ranks' thread count, while no rank
  // competes for the cores.
  check_local_world_fits(manifest, flags.max_local_ranks);
  // Held until the ranks have exited: they write into the folder, the launcher does not.
  const FolderLock lock = lock_results_folder(options.results_root / manifest.name, options.command_line, std::cerr);
  const RunPlan plan = plan_runs(manifest, options);
  const std::vector<RunSpec> pending = plan.pending();
  check_run_inputs(pending);
  print_memory_estimate(pending, std::cerr);
  print_interleave_memory(plan, std::cerr);
  ensure_method_profiles(pending, true, std::cerr, true,
                         [](int64_t ranks, const std::vector<std::string>& arguments, std::ostream& log) {
                           return launch_profile_ranks(ranks, arguments, log);
                         });
  std::filesystem::create_directories(plan.manifest_dir);
  const std::filesystem::path plan_file = plan.manifest_dir / (".run_plan." + std::to_string(::getpid()) + ".json");
  write_run_plan(plan_file, plan);
  // Removed however this function is left (a failed start, an exception, the ranks' exit).
  const std::unique_ptr<const std::filesystem::path, void (*)(const std::filesystem::path*)> remove_plan(
      &plan_file, [](const std::filesystem::path* file) {
        std::error_code ignored;
        std::filesystem::remove(*file, ignored);
      });
  const ParallelLayout layout = plan.layout();
  LaunchOptions launch;
  launch.world_size = static_cast<int>(layout.world_size());
  launch.describe_rank = [layout](int r) { return layout.describe_rank(r); };
  launch.arguments = {current_executable(), "run", flags.manifest, "--plan", plan_file.string(), "--progress-every",
                      std::to_string(flags.progress_every)};
  std::cerr << "starting " << launch.world_size << " ranks (dp " << layout.dp() << " x pp " << layout.pp()
            << " x cp " << layout.cp() << " x tp " << layout.tp() << ") on this machine\n";
  // The ranks read the runs from the plan; the --set arguments only go into their
  // recorded command line.
  for (const std::string& set : flags.sets) {
    launch.arguments.push_back("--set");
    launch.arguments.push_back(set);
  }
  const int code = launch_local_ranks(launch, std::cerr);
  if (code != 0) return code;
  RunManifestResult result;
  result.manifest_dir = plan.manifest_dir;
  print_report(result, false);
  draw_plots(result.manifest_dir, flags.plots);
  return 0;
}

}  // namespace

Command register_run(CLI::App& app) {
  auto flags = std::make_shared<RunFlags>();
  CLI::App* sub = app.add_subcommand("run", "Run the runs of an experiment manifest");
  sub->footer(
      "Writes results/<manifest>/<run>/ (manifest.resolved.json, context.json, records.jsonl, "
      "timeline_events.jsonl, timeline.json, checkpoints/, status.json) and "
      "results/<manifest>/report.{json,csv,md}.\n"
      "Ranks: with parallelism dp x pp > 1 this command starts the dp x pp ranks on this machine "
      "(output prefixed with the rank; all stop on the first failure or Ctrl-C). Started by "
      "torchrun or srun (RANK/WORLD_SIZE or SLURM_PROCID in the environment) it runs as one rank.\n"
      "Reruns: a run that already completed with the same resolved manifest is SKIPPED; one "
      "that completed with a different manifest is an error (exit 2) unless --force, which "
      "replaces it; an incomplete run resumes from its newest checkpoint, or, without one (or "
      "with --force), is moved aside to <run>.interrupted-<time> and restarted from iteration 0.");
  sub->add_option("manifest", flags->manifest, "Experiment manifest (JSON)")->required();
  sub->add_option("--results", flags->results, "Folder that receives results/<manifest>/")
      ->capture_default_str();
  sub->add_option("--only", flags->only, "Run only the run with this name (a method name)");
  sub->add_flag("--force", flags->force,
                "Rerun and replace runs that already completed; restart incomplete runs from iteration 0");
  sub->add_option("--progress-every", flags->progress_every, "Print a progress line every N iterations")
      ->check(at_least(1))
      ->capture_default_str();
  sub->add_option("--max-local-ranks", flags->max_local_ranks,
                  "Most ranks to start on this machine (default: one per visible GPU for CUDA runs, " +
                      std::to_string(kLocalRanksPerCore) + " per CPU core otherwise)")
      ->check(at_least(1));
  sub->add_flag("!--no-plots", flags->plots, "Do not draw the report's figures into <results>/<manifest>/plots/");
  add_manifest_set_option(*sub, flags->sets);
  // The local launcher's ranks read the plan it made instead of the manifest (hidden).
  sub->add_option("--plan", flags->plan)->group("");
  return [flags]() {
    const bool as_rank = DistEnv::started_as_rank();
    if (as_rank) arm_parent_death_signal();
    if (!flags->plan.empty()) {
      if (!started_by_local_launcher()) {
        throw ConfigError("--plan", "", "is for the ranks the local launcher starts",
                          "run the manifest: sparsebalance run " + flags->manifest);
      }
      RunManifestOptions options;
      options.manifest_file = flags->manifest;
      options.command_line = manifest_command_line("run", flags->manifest, flags->sets);
      options.progress_every = flags->progress_every;
      try {
        run_planned(read_run_plan(flags->plan), options, std::cerr);
      } catch (const RankFailure&) {
        return 1;  // already printed, naming the rank
      }
      return 0;  // the launcher prints the report
    }
    check_results_folder(flags->results);
    const Manifest manifest = load_manifest(flags->manifest, parse_manifest_overrides(flags->sets));
    check_runnable_by_trainer(manifest);
    RunManifestOptions options;
    options.manifest_file = flags->manifest;
    options.results_root = flags->results;
    if (!flags->only.empty()) options.only = flags->only;
    options.force = flags->force;
    options.progress_every = flags->progress_every;
    options.command_line = manifest_command_line("run", flags->manifest, flags->sets);
    if (!as_rank && parallel_layout_of(manifest).world_size() > 1) {
      return launch(manifest, *flags, options);
    }
    RunManifestResult result;
    try {
      result = run_manifest(manifest, options, std::cerr);
    } catch (const RankFailure&) {
      return 1;  // already printed, naming the rank
    }
    // Under a launcher only rank 0 prints the report (the launcher prints its own).
    const bool prints_report = !as_rank || (DistEnv::from_environment().rank == 0 && !started_by_local_launcher());
    if (prints_report) {
      print_report(result, true);
      draw_plots(result.manifest_dir, flags->plots);
    }
    return 0;
  };
}

}  // namespace sb::cli
