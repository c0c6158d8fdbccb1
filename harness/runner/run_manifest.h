#pragma once
// Runs every run of a manifest on this process and writes, per run,
//   <results>/<manifest>/<run>/manifest.resolved.json  the manifest narrowed to this run
//                              context.json            hardware, versions, git SHA, seed, layout
//                              records.jsonl           one IterationRecord per line
//                              status.json             written last: the run is complete
// and then <results>/<manifest>/report.{json,csv,md} over all runs found there.
//
// Reruns never overwrite silently: a complete run with the same resolved manifest is
// skipped; a complete run produced by a different manifest is a ConfigError unless
// force; an incomplete run (no status.json, e.g. interrupted) is moved aside to
// <run>.interrupted-<UTC time> and started again from iteration 0.

#include <filesystem>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "harness/config/manifest.h"

namespace sb {

struct RunManifestOptions {
  std::filesystem::path manifest_file;  // for messages and context.json
  std::filesystem::path results_root = "results";
  std::optional<std::string> only;  // run just this run
  bool force = false;               // replace complete runs
  std::string command_line;         // recorded in context.json
  int64_t progress_every = 10;      // iterations between progress lines
};

struct RunManifestResult {
  std::vector<std::string> ran;
  std::vector<std::string> skipped;
  std::filesystem::path manifest_dir;
};

RunManifestResult run_manifest(const Manifest& manifest, const RunManifestOptions& options,
                               std::ostream& log);

}  // namespace sb
