#pragma once
// `sparsebalance simulate`: every run of a manifest simulated (run_simulator.h) into
// <results>/<manifest>/<run>/ with the files a real run writes (run_folder.h: the same
// resume/skip/force decisions; a simulation never checkpoints, so an incomplete one
// restarts), context.json marked experiment.simulated = true with the profile, cluster
// and coverage model used, then the report (write_report). A folder holding a measured
// run (context.json experiment.simulated false) is never replaced by a simulation.

#include <nlohmann/json.hpp>

#include <filesystem>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "harness/config/manifest.h"
#include "harness/runner/run_manifest.h"

namespace sb {

struct SimulateOptions {
  RunManifestOptions run;                 // manifest file, results root, --only, --force, command line
  std::optional<std::string> profile;     // --profile FILE
  double fixed_plan_ms = -1;              // tests: a fixed planner time instead of the measured one
};

RunManifestResult simulate_manifest(const Manifest& manifest, const SimulateOptions& options, std::ostream& log);

// The runs `simulate` would run (options.only), their simulation blocks carrying the
// values fitted to measured runs (simulation.*.fit_from); the fits are reported to log.
// profile: --profile FILE, as simulate_manifest's (the ring compute fit predicts with it).
std::vector<RunSpec> simulated_runs(const Manifest& manifest, const RunManifestOptions& options,
                                    const std::optional<std::string>& profile, std::ostream& log);

// The cluster a manifest's simulation uses: its cluster block, else the h200 preset.
ClusterSection simulation_cluster(const Manifest& manifest);

}  // namespace sb
