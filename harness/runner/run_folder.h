#pragma once
// One run's folder under results/<manifest>/<run>/ and what a rerun does with it:
//
//   manifest.resolved.json  the manifest narrowed to this run
//   context.json            hardware, versions, git SHA, seed, layout (+ "resumes")
//   records.jsonl           one IterationRecord per iteration (append-only)
//   timeline_events.jsonl   every rank's timed events, one line per iteration
//   timeline.json           Chrome trace of the whole run (written at the end; rows
//                           as harness/trace/chrome_trace.h keeps them)
//   checkpoints/            see harness/train/checkpoint.h
//   status.json             written last: the run is complete
//
// Reruns never overwrite silently:
//   complete, same resolved manifest   -> skipped
//   complete, different manifest       -> ConfigError (exit 2) unless force (replaced)
//   incomplete, same manifest, with a checkpoint -> resumed from its newest checkpoint
//                                         (records after it are dropped and redone)
//   incomplete otherwise, or with force -> moved aside to <run>.interrupted-<UTC time>
//                                         and started from iteration 0

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "harness/common/utc_time.h"
#include "harness/config/manifest.h"
#include "harness/records/iteration_record.h"
#include "harness/trace/chrome_trace.h"
#include "harness/trace/timeline.h"

namespace sb {

enum class Disposition { kFresh, kSkip, kReplaceComplete, kResume, kRestartIncomplete };

struct RunDecision {
  std::string run;
  Disposition disposition = Disposition::kFresh;
  std::string reason;              // why, for the log
  int64_t resume_iteration = 0;    // kResume: the checkpoint's completed iterations
  std::string checkpoint;          // kResume: its folder
};

nlohmann::json run_decision_to_json(const RunDecision& decision);
RunDecision run_decision_from_json(const nlohmann::json& json);

// Decides, without touching anything, so that a conflict in any run stops the
// command before any run starts. Throws ConfigError on a conflict.
RunDecision decide_run(const std::filesystem::path& run_dir, const nlohmann::json& resolved,
                       bool force, const std::string& manifest_file);

// Carries out the decision on the folder (move aside, remove, truncate for a resume)
// and writes manifest.resolved.json and context.json. Logs what it did.
void prepare_run_folder(const std::filesystem::path& run_dir, const RunDecision& decision,
                        const nlohmann::json& resolved, nlohmann::json context, std::ostream& log);

// Rank 0's writer of a run's per-iteration files; appends and flushes line by line,
// so an interrupted run keeps what it measured. The Chrome trace grows with each
// iteration (a resumed run's starts from the iterations it kept), so finishing never
// reads the run's events back.
class RunFolderWriter {
 public:
  explicit RunFolderWriter(std::filesystem::path run_dir);
  void append(const IterationRecord& record, const TimelineIteration& timeline);
  // timeline.json, then status.json (last).
  void finish(int64_t iterations, double wall_seconds, bool resumed);

 private:
  std::filesystem::path run_dir_;
  std::ofstream records_, timeline_;
  ChromeTrace trace_;
};


}  // namespace sb
