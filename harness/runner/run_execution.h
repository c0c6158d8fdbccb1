#pragma once
// One run of a plan on this rank, from its folder to its closing files: rank 0 prepares
// the folder (context.json, the resolved manifest, the profile it predicts with), every
// rank connects the run's groups and builds its TrainingRun, rank 0 appends each
// iteration's records and prints progress, and finish() closes the run. Runs execute one
// after another (each whole), or several at once taking turns in blocks of iterations
// (interleave_schedule.h): then records carry the block and the run's place in it.

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <iosfwd>
#include <memory>
#include <optional>

#include "harness/runner/fault_injection.h"
#include "harness/runner/interleave_schedule.h"
#include "harness/runner/job_session.h"
#include "harness/runner/run_manifest.h"
#include "harness/train/training_run.h"

namespace sb {

class RunFolderWriter;
class ProgressPrinter;

class RunExecution {
 public:
  // Prepares the run's folder and connects its groups. `index` of `count`: the run's
  // place in the plan, for progress lines. `interleave`: null when the run trains alone,
  // else {"block_iterations", "runs"} for context.json. Collective over the job's ranks.
  RunExecution(JobSession& session, const PlannedRun& planned, const std::filesystem::path& run_dir, size_t index,
               size_t count, const RunManifestOptions& options, const std::optional<FaultInjection>& fault,
               const nlohmann::json& interleave, std::ostream& log);
  ~RunExecution();
  RunExecution(const RunExecution&) = delete;
  RunExecution& operator=(const RunExecution&) = delete;

  // Builds the run's TrainingRun (the trainer, the checkpoint it resumes from). Apart from
  // the constructor so that a failure here is reported while the groups exist.
  void start();

  int64_t next_iteration() const { return training_->next_iteration(); }
  int64_t iterations() const { return training_->iterations(); }

  // Trains up to iteration `end` (exclusive); the step's block and position, when it is one
  // of an interleaved schedule, go into the records it writes.
  void train_until(int64_t end, std::optional<InterleaveStep> step = std::nullopt);
  void finish();

 private:
  const RunSpec& run_;
  RankContext context_;  // the run's groups, alive as long as its TrainingRun
  TrainingRunOptions options_;  // until start()
  std::unique_ptr<RunFolderWriter> writer_;      // rank 0
  std::unique_ptr<ProgressPrinter> progress_;    // rank 0
  std::optional<InterleaveStep> step_;
  std::unique_ptr<TrainingRun> training_;
};

}  // namespace sb
