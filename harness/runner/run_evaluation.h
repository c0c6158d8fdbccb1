#pragma once
// The evaluation of a trained run (the manifest's `eval` block): rank 0 alone, after
// every rank has finished training, loads the run's final checkpoint (an HF model
// folder, harness/train/checkpoint.h) with the method's attention backend (MoBA with its
// block size and default budget, or dense) on the training device and precision, runs
// the eval suite (harness/eval/eval_suite.h) into <run>/eval/, and so gives the report
// its accuracy columns (<run>/eval/eval_columns.json, written last).
//
// Resumable like training: a run whose eval_columns.json exists is not evaluated again;
// predictions already written are kept (the suite resumes its prediction files).

#include <filesystem>
#include <ostream>

#include "harness/config/manifest.h"

namespace sb {

std::filesystem::path evaluation_dir(const std::filesystem::path& run_dir);

// The manifest has an eval block, the run is complete and its eval_columns.json is missing.
bool evaluation_pending(const RunSpec& run, const std::filesystem::path& run_dir);

// ConfigError when the run has no checkpoint to evaluate.
void evaluate_run(const RunSpec& run, const std::filesystem::path& run_dir, std::ostream& log);

}  // namespace sb
