#pragma once
// Runs the runs of a manifest as this process's part of the job: one process alone
// (dp = pp = 1), or one rank of dp x pp ranks started by the local launcher
// (local_launcher.h), torchrun or srun. Rank 0 owns the results folder (see
// run_folder.h for what a rerun does) and writes, per run, records.jsonl,
// timeline_events.jsonl, timeline.json, checkpoints and status.json, and at the end
// <results>/<manifest>/report.{json,csv,md} over all runs found there.

#include <filesystem>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "harness/config/manifest.h"
#include "harness/runner/run_plan.h"

namespace sb {

struct RunManifestOptions : RunSelection {
  std::string command_line;     // recorded in context.json
  int64_t progress_every = 10;  // iterations between progress lines
};

struct RunManifestResult {
  std::vector<std::string> ran;
  std::vector<std::string> skipped;
  std::vector<std::string> resumed;  // also in `ran`
  std::filesystem::path manifest_dir;
  // The results folder's one-writer lock (folder_lock.h) when this process took it: held
  // while the result lives, so that what the command writes after (plots, validation)
  // is covered too.
  std::shared_ptr<const FolderLock> lock;
};

// In one process, or as one rank when DistEnv::started_as_rank() (then the
// environment's world size must be dp x pp): the process alone or rank 0 plans the runs
// (plan_runs) and the other ranks receive that plan. A rank's runtime failure is printed
// to `log` and then thrown as RankFailure (job_session.h).
RunManifestResult run_manifest(const Manifest& manifest, const RunManifestOptions& options, std::ostream& log);

// As one rank of the local launcher, which planned the runs before starting the ranks
// (`options` then only supplies the command line and the progress interval).
RunManifestResult run_planned(const RunPlan& plan, const RunManifestOptions& options, std::ostream& log);

}  // namespace sb
