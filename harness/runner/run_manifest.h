#pragma once
// Runs the runs of a manifest as this process's part of the job: one process alone
// (dp = pp = 1), or one rank of dp x pp ranks started by the local launcher
// (local_launcher.h), torchrun or srun. Rank 0 owns the results folder (see
// run_folder.h for what a rerun does) and writes, per run, records.jsonl,
// timeline_events.jsonl, timeline.json, checkpoints and status.json, and at the end
// <results>/<manifest>/report.{json,csv,md} over all runs found there.

#include <filesystem>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "harness/config/manifest.h"
#include "harness/runner/run_folder.h"

namespace sb {

struct RunManifestOptions {
  std::filesystem::path manifest_file;  // for messages and context.json
  std::filesystem::path results_root = "results";
  std::optional<std::string> only;  // run just this run
  bool force = false;               // replace complete runs, restart incomplete ones
  std::string command_line;         // recorded in context.json
  int64_t progress_every = 10;      // iterations between progress lines
};

struct RunManifestResult {
  std::vector<std::string> ran;
  std::vector<std::string> skipped;
  std::vector<std::string> resumed;  // also in `ran`
  std::filesystem::path manifest_dir;
};

// The runs `options` selects (ConfigError for an unknown --only), in execution order:
// grouped by their point on the non-method sweep axes (e.g. the seed), so that each run
// executes right next to the baseline it is compared with.
std::vector<RunSpec> select_runs(const Manifest& manifest, const RunManifestOptions& options);

// The selected runs that are not skipped (complete with the same manifest).
std::vector<RunSpec> runs_to_execute(const Manifest& manifest, const RunManifestOptions& options);

// What would happen to each selected run; throws ConfigError on a conflict.
std::vector<RunDecision> decide_runs(const Manifest& manifest, const RunManifestOptions& options);

// In one process, or as one rank when DistEnv::started_as_rank() (then the
// environment's world size must be dp x pp). A rank's runtime failure is printed to
// `log` and then thrown as RankFailure (job_session.h).
RunManifestResult run_manifest(const Manifest& manifest, const RunManifestOptions& options,
                               std::ostream& log);

}  // namespace sb
