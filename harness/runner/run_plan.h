#pragma once
// What one `sparsebalance run` invocation does, decided once: the manifest's runs
// (its methods times its sweep, narrowed by --only, in execution order) and what happens
// to each run's folder (run_folder.h: fresh, skip, replace, resume, restart).
//
// Who makes it: the one process alone; the local launcher, before it starts the ranks
// (they read the file it writes, never the original manifest); or rank 0 under torchrun
// or srun, which sends it to the other ranks. Every rank therefore trains from the same
// resolved run manifests and acts on the same decisions.
//
// The file (run_plan_to_json):
//   {"manifest_name", "manifest_file", "manifest_dir", "interleave_block_iterations",
//    "runs": [{"run": <run_spec_json.h>, "decision": <run_decision_to_json>}, ...]}

#include <nlohmann/json.hpp>

#include <filesystem>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "harness/common/folder_lock.h"
#include "harness/config/manifest.h"
#include "harness/parallel/parallel_layout.h"
#include "harness/runner/run_folder.h"

namespace sb {

// What selects and decides the runs.
struct RunSelection {
  std::filesystem::path manifest_file;  // for messages
  std::filesystem::path results_root = "results";
  std::optional<std::string> only;  // just this run
  bool force = false;               // replace complete runs, restart incomplete ones
};

struct PlannedRun {
  RunSpec spec;
  RunDecision decision;
};

struct RunPlan {
  std::string manifest_name;
  std::string manifest_file;
  std::filesystem::path manifest_dir;  // <results>/<manifest name>
  std::vector<PlannedRun> runs;        // in execution order; never empty
  // The manifest's "interleave" block length; 0: runs train one after another.
  int64_t interleave_block_iterations = 0;

  // The job's ranks: every run has the manifest's parallelism (plan_runs checks it).
  const ParallelismSection& parallelism() const { return runs.front().spec.manifest.parallelism; }
  ParallelLayout layout() const { return parallel_layout_of(runs.front().spec.manifest); }
  int64_t world_size() const { return layout().world_size(); }  // dp x pp x cp x tp
  // The runs that are not skipped.
  std::vector<RunSpec> pending() const;
  // Indices into `runs`, one list per comparison: the runs at one point of the non-method
  // sweep axes (the baseline and the methods compared with it), consecutive in `runs`.
  std::vector<std::vector<size_t>> comparisons() const;
};

// The runs `selection` selects (ConfigError for an unknown --only), in execution order:
// grouped by their point on the non-method sweep axes (e.g. the seed), so that each run
// executes right next to the baseline it is compared with. The simulator selects with it
// too.
std::vector<RunSpec> select_runs(const Manifest& manifest, const RunSelection& selection);

// Expands and selects the runs once and decides each one's folder. ConfigError on a
// conflict (a complete run with another manifest, without --force) and for a sweep that
// changes the ranks (parallelism.dp, .pp, .cp or .tp): one job has one set of ranks.
RunPlan plan_runs(const Manifest& manifest, const RunSelection& selection);

// Takes the one-writer lock of <results>/<manifest> (folder_lock.h), to be held while
// anything plans or writes runs there: ConfigError (exit 2) naming the holder when
// another command holds it. Says on `log` when the previous writer died holding it.
FolderLock lock_results_folder(const std::filesystem::path& manifest_dir, const std::string& command_line,
                               std::ostream& log);

nlohmann::json run_plan_to_json(const RunPlan& plan);
RunPlan run_plan_from_json(const nlohmann::json& json);
// The file the local launcher hands its ranks (written atomically).
void write_run_plan(const std::filesystem::path& file, const RunPlan& plan);
RunPlan read_run_plan(const std::filesystem::path& file);

}  // namespace sb
