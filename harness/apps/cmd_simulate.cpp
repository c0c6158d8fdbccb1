#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>

#include "common/statistics.h"
#include "harness/apps/cli_checks.h"
#include "harness/apps/commands.h"
#include "harness/apps/manifest_set_option.h"
#include "harness/common/atomic_file.h"
#include "harness/common/system_info.h"
#include "harness/config/manifest.h"
#include "harness/sim/run_simulator.h"
#include "harness/sim/sim_runner.h"
#include "harness/sim/sim_validation.h"
#include "models/qwen2/qwen2_config.h"

namespace sb::cli {
namespace {

struct SimulateFlags {
  std::string manifest;
  std::vector<std::string> sets;  // --set PATH=VALUE
  std::string results = "results";
  std::string only;
  bool force = false;
  std::string profile;
  std::string validate_against;
  int64_t progress_every = 10;
  bool bench = false;
  int64_t bench_iterations = 5;
};

// Times simulate_iteration (data + planner + event simulation) per run; writes nothing.
int bench(const Manifest& manifest, const SimulateFlags& flags, const RunManifestOptions& options) {
  if (std::string warning = debug_build_warning(); !warning.empty()) std::cout << warning << "\n";
  // The same fitted values as `simulate` (noise and overhead change the simulated time).
  const std::optional<std::string> profile = flags.profile.empty() ? std::nullopt : std::optional(flags.profile);
  const std::vector<RunSpec> runs = simulated_runs(manifest, options, profile, std::cout);
  std::cout.flush();
  std::printf("| run | ranks (dp x pp x tp x cp) | micro-batches | iteration ms (simulated) | wall ms / iteration "
              "(median) | planner ms | event simulation ms |\n|---|---|---|---|---|---|---|\n");
  for (const RunSpec& run : runs) {
    const Manifest& m = run.manifest;
    const Qwen2Config& config = m.model.config;
    const int64_t longest =
        make_dataset(m.data, m.seed, dataset_limits(m))->max_length();
    RunSimulator sim(m, load_sim_profile(m, longest, profile), simulation_cluster(m));
    std::vector<double> wall, plan, des;
    double iter_ms = 0;
    size_t microbatches = 0;
    for (int64_t it = 0; it < flags.bench_iterations; ++it) {
      const auto start = std::chrono::steady_clock::now();
      SimulatedIteration step = sim.simulate_iteration(it);
      wall.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
      plan.push_back(step.record.balance_overhead_ms);
      des.push_back(step.simulate_ms);
      iter_ms = step.record.iter_ms;
      microbatches = step.record.microbatch_ms.size();
    }
    std::printf("| %s | %lld (%lld x %lld x %lld x %lld) | %zu | %.1f | %.2f | %.2f | %.2f |\n", run.name.c_str(),
                static_cast<long long>(m.parallelism.dp * m.parallelism.pp * m.parallelism.tp * m.parallelism.cp),
                static_cast<long long>(m.parallelism.dp), static_cast<long long>(m.parallelism.pp),
                static_cast<long long>(m.parallelism.tp), static_cast<long long>(m.parallelism.cp), microbatches, iter_ms, median_of(wall), median_of(plan),
                median_of(des));
  }
  std::printf("(%lld iterations per run; wall = drawing the global batch + planning + event simulation + metrics)\n",
              static_cast<long long>(flags.bench_iterations));
  return 0;
}

}  // namespace

Command register_simulate(CLI::App& app) {
  auto flags = std::make_shared<SimulateFlags>();
  CLI::App* sub = app.add_subcommand(
      "simulate", "Simulate the runs of a manifest on a modelled cluster (DP x PP x TP, 1F1B, the same planner)");
  sub->footer(
      "Writes results/<manifest>/<run>/ like `run` (records.jsonl, timelines, context.json with "
      "experiment.simulated = true, the profile, cluster and coverage model) and the report. Compute times come "
      "from a latency profile (--profile, simulation.profile or the method's profile), communication from the "
      "manifest's cluster block (default: the h200 preset). See docs/simulator.md.\n"
      "Reruns behave as for `run` (skip complete, error on a changed manifest unless --force); a folder that holds "
      "a measured run is never replaced: use --results for another folder.");
  sub->add_option("manifest", flags->manifest, "Experiment manifest (JSON)")->required();
  sub->add_option("--results", flags->results, "Folder that receives <manifest>/")->capture_default_str();
  sub->add_option("--only", flags->only, "Simulate only the run with this name");
  add_manifest_set_option(*sub, flags->sets);
  sub->add_flag("--force", flags->force, "Replace complete simulated runs");
  sub->add_option("--profile", flags->profile, "Latency profile (JSON) for every run, over the manifest's choice");
  sub->add_option("--validate-against", flags->validate_against,
                  "Measured results/<manifest> of the same manifest: writes validation.json (relative errors of "
                  "median iter_ms and mean bubble fraction)");
  sub->add_option("--progress-every", flags->progress_every, "Print a progress line every N iterations")
      ->check(at_least(1))
      ->capture_default_str();
  sub->add_flag("--bench", flags->bench, "Time simulated iterations per run (writes nothing)");
  sub->add_option("--bench-iterations", flags->bench_iterations, "Iterations per run for --bench")
      ->check(at_least(1))
      ->capture_default_str();
  return [flags]() {
    check_results_folder(flags->results);
    const Manifest manifest = load_manifest(flags->manifest, parse_manifest_overrides(flags->sets));
    SimulateOptions options;
    options.run.manifest_file = flags->manifest;
    options.run.results_root = flags->results;
    if (!flags->only.empty()) options.run.only = flags->only;
    options.run.force = flags->force;
    options.run.progress_every = flags->progress_every;
    options.run.command_line = manifest_command_line("simulate", flags->manifest, flags->sets);
    if (!flags->profile.empty()) options.profile = flags->profile;
    if (flags->bench) return bench(manifest, *flags, options.run);
    const RunManifestResult result = simulate_manifest(manifest, options, std::cerr);
    std::cout << read_file(result.manifest_dir / "report.md");
    std::cout << "\nwrote " << (result.manifest_dir / "report.md").string() << " (simulated " << result.ran.size()
              << ", skipped " << result.skipped.size() << ")\n";
    if (!flags->validate_against.empty()) {
      const nlohmann::json validation = validate_simulation(result.manifest_dir, flags->validate_against);
      std::cout << "\nvalidation against " << flags->validate_against << ":\n" << validation_to_text(validation);
      std::cout << "wrote " << (result.manifest_dir / "validation.json").string() << "\n";
    }
    return 0;
  };
}

}  // namespace sb::cli
