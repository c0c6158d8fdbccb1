#include <CLI/CLI.hpp>

#include <iostream>
#include <optional>

#include "harness/apps/commands.h"
#include "harness/config/manifest.h"
#include "harness/report/run_summary.h"
#include "harness/runner/run_manifest.h"

namespace sb::cli {
namespace {

struct RunFlags {
  std::string manifest;
  std::string results = "results";
  std::string only;
  bool force = false;
  int64_t progress_every = 10;
};

}  // namespace

Command register_run(CLI::App& app) {
  auto flags = std::make_shared<RunFlags>();
  CLI::App* sub = app.add_subcommand("run", "Run the runs of an experiment manifest");
  sub->footer(
      "Writes results/<manifest>/<run>/ (manifest.resolved.json, context.json, records.jsonl, "
      "status.json) and results/<manifest>/report.{json,csv,md}.\n"
      "Reruns: a run that already completed with the same resolved manifest is SKIPPED; one "
      "that completed with a different manifest is an error (exit 2) unless --force, which "
      "replaces it; an incomplete run is moved aside to <run>.interrupted-<time> and "
      "restarted from iteration 0.");
  sub->add_option("manifest", flags->manifest, "Experiment manifest (JSON)")->required();
  sub->add_option("--results", flags->results, "Folder that receives results/<manifest>/")
      ->capture_default_str();
  sub->add_option("--only", flags->only, "Run only the run with this name (a method name)");
  sub->add_flag("--force", flags->force, "Rerun and replace runs that already completed");
  sub->add_option("--progress-every", flags->progress_every,
                  "Print a progress line every N iterations")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  return [flags]() {
    const Manifest manifest = load_manifest(flags->manifest);
    RunManifestOptions options;
    options.manifest_file = flags->manifest;
    options.results_root = flags->results;
    if (!flags->only.empty()) options.only = flags->only;
    options.force = flags->force;
    options.progress_every = flags->progress_every;
    options.command_line = "sparsebalance run " + flags->manifest;
    const RunManifestResult result = run_manifest(manifest, options, std::cerr);
    const std::vector<RunSummary> runs = summarize_manifest_results(result.manifest_dir);
    std::cout << report_to_markdown(manifest.name, runs);
    std::cout << "\nwrote " << (result.manifest_dir / "report.md").string() << " (ran "
              << result.ran.size() << ", skipped " << result.skipped.size() << ")\n";
    return 0;
  };
}

}  // namespace sb::cli
