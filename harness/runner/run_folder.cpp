#include "harness/runner/run_folder.h"

#include <cerrno>
#include <cstring>
#include <ostream>
#include <sstream>

#include "common/errors.h"
#include "harness/common/atomic_file.h"
#include "harness/common/jsonl_file.h"
#include "harness/trace/chrome_trace.h"
#include "harness/train/checkpoint.h"
#include "harness/config/stored_manifest.h"

namespace sb {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// What decides whether stored results answer the same question: the resolved run
// manifest without its free-text description.
json comparable_manifest(json manifest) {
  manifest.erase("description");
  return manifest;
}

std::string first_difference(const json& stored, const json& current) {
  const json patch = json::diff(stored, current);
  if (patch.empty()) return "";
  return patch.at(0).value("path", "");
}

const char* disposition_name(Disposition d) {
  switch (d) {
    case Disposition::kFresh:
      return "fresh";
    case Disposition::kSkip:
      return "skip";
    case Disposition::kReplaceComplete:
      return "replace";
    case Disposition::kResume:
      return "resume";
    case Disposition::kRestartIncomplete:
      return "restart";
  }
  throw std::logic_error("disposition_name: unhandled Disposition");
}

// Keeps the lines of a JSONL file whose "iteration" is below `limit` (atomic rewrite).
void truncate_jsonl(const fs::path& file, int64_t limit) {
  if (!fs::exists(file)) return;
  std::string kept;
  bool cut = false;  // past a line cut short by the interruption: nothing after it is kept
  for_each_jsonl_line(file, read_file(file), [&](const std::string& line, const std::string&) {
    if (cut) return;
    json j;
    try {
      j = json::parse(line);
    } catch (const json::parse_error&) {
      cut = true;
      return;
    }
    if (j.at("iteration").get<int64_t>() < limit) kept += line + "\n";
  });
  write_file_atomic(file, kept);
}

}  // namespace

json run_decision_to_json(const RunDecision& d) {
  return {{"run", d.run},
          {"disposition", disposition_name(d.disposition)},
          {"reason", d.reason},
          {"resume_iteration", d.resume_iteration},
          {"checkpoint", d.checkpoint}};
}

RunDecision run_decision_from_json(const json& j) {
  RunDecision d;
  d.run = j.at("run").get<std::string>();
  const std::string name = j.at("disposition").get<std::string>();
  for (Disposition candidate : {Disposition::kFresh, Disposition::kSkip, Disposition::kReplaceComplete,
                                Disposition::kResume, Disposition::kRestartIncomplete}) {
    if (name == disposition_name(candidate)) d.disposition = candidate;
  }
  d.reason = j.at("reason").get<std::string>();
  d.resume_iteration = j.at("resume_iteration").get<int64_t>();
  d.checkpoint = j.at("checkpoint").get<std::string>();
  return d;
}

RunDecision decide_run(const fs::path& run_dir, const json& resolved, bool force,
                       const std::string& manifest_file) {
  RunDecision d;
  d.run = run_dir.filename().string();
  if (!fs::exists(run_dir)) return d;
  const fs::path stored_file = run_dir / "manifest.resolved.json";
  const bool complete = fs::exists(run_dir / "status.json");
  if (complete) {
    if (force) {
      d.disposition = Disposition::kReplaceComplete;
      d.reason = "--force";
      return d;
    }
    const json stored = read_stored_manifest_json(stored_file);
    if (comparable_manifest(stored) == comparable_manifest(resolved)) {
      d.disposition = Disposition::kSkip;
      return d;
    }
    throw ConfigError(manifest_file, first_difference(stored, resolved),
                      "differs from the manifest that produced the complete results in " + run_dir.string(),
                      "pass --force to replace those results, or rename the manifest "
                      "(\"name\") to keep both");
  }
  d.disposition = Disposition::kRestartIncomplete;
  if (force) {
    d.reason = "--force starts it afresh";
    return d;
  }
  if (!fs::exists(stored_file) ||
      comparable_manifest(read_stored_manifest_json(stored_file)) != comparable_manifest(resolved)) {
    d.reason = "it was started with a different manifest";
    return d;
  }
  const std::optional<fs::path> checkpoint = latest_checkpoint(run_dir);
  if (!checkpoint) {
    d.reason = "it has no checkpoint to resume from";
    return d;
  }
  d.disposition = Disposition::kResume;
  d.checkpoint = checkpoint->string();
  d.resume_iteration = checkpoint_iterations(*checkpoint);
  return d;
}

namespace {

void write_run_files(const fs::path& run_dir, const json& resolved, const json& context) {
  fs::create_directories(run_dir);
  write_file_atomic(run_dir / "manifest.resolved.json", resolved.dump(2) + "\n");
  write_file_atomic(run_dir / "context.json", context.dump(2) + "\n");
}

}  // namespace

void prepare_run_folder(const fs::path& run_dir, const RunDecision& decision, const json& resolved,
                        json context, std::ostream& log) {
  switch (decision.disposition) {
    case Disposition::kSkip:
      return;
    case Disposition::kFresh:
      return write_run_files(run_dir, resolved, context);
    case Disposition::kReplaceComplete:
      log << "replacing complete results in " << run_dir.string() << " (--force)\n";
      fs::remove_all(run_dir);
      return write_run_files(run_dir, resolved, context);
    case Disposition::kRestartIncomplete: {
      fs::path aside = run_dir;
      aside += ".interrupted-" + utc_timestamp("%Y%m%dT%H%M%SZ");
      fs::rename(run_dir, aside);
      log << "found an incomplete run in " << run_dir.string() << "; " << decision.reason << ", so moved it to "
          << aside.string() << " and starting again from iteration 0\n";
      return write_run_files(run_dir, resolved, context);
    }
    case Disposition::kResume: {
      log << "found an incomplete run in " << run_dir.string() << "; resuming from its checkpoint "
          << decision.checkpoint << " at iteration " << decision.resume_iteration << "\n";
      truncate_jsonl(run_dir / "records.jsonl", decision.resume_iteration);
      truncate_jsonl(run_dir / "timeline_events.jsonl", decision.resume_iteration);
      // The context of the first start stays; each resume is listed with its own.
      json stored = json::parse(read_file(run_dir / "context.json"));
      json resumes = stored.value("resumes", json::array());
      context["resumed_at_iteration"] = decision.resume_iteration;
      resumes.push_back(context);
      stored["resumes"] = resumes;
      write_file_atomic(run_dir / "context.json", stored.dump(2) + "\n");
      return;
    }
  }
  throw std::logic_error("prepare_run_folder: unhandled disposition");
}

RunFolderWriter::RunFolderWriter(fs::path run_dir)
    : run_dir_(std::move(run_dir)),
      records_(run_dir_ / "records.jsonl", std::ios::out | std::ios::app),
      timeline_(run_dir_ / "timeline_events.jsonl", std::ios::out | std::ios::app) {
  if (!records_ || !timeline_) throw std::runtime_error("cannot write into " + run_dir_.string());
  // A resumed run's kept iterations (prepare_run_folder cut the file at its checkpoint).
  for (const TimelineIteration& kept : read_timeline_events(run_dir_ / "timeline_events.jsonl")) trace_.add(kept);
}

void RunFolderWriter::append(const IterationRecord& record, const TimelineIteration& timeline) {
  // errno is read right after the stream's write fails: ENOSPC says "No space left on device".
  const auto write_line = [this](std::ofstream& out, const char* file, const std::string& line) {
    errno = 0;
    out << line << '\n';
    out.flush();
    if (out) return;
    const std::string cause = errno != 0 ? std::strerror(errno) : "the stream reported a failure";
    throw std::runtime_error("cannot write " + (run_dir_ / file).string() + ": " + cause +
                             " (free space there, or pass --results on another file system, and rerun: the run "
                             "resumes from its newest checkpoint)");
  };
  write_line(records_, "records.jsonl", iteration_record_to_json(record).dump());
  write_line(timeline_, "timeline_events.jsonl", timeline_iteration_to_json(timeline).dump());
  trace_.add(timeline);
}

void RunFolderWriter::finish(int64_t iterations, double wall_seconds, bool resumed) {
  records_.close();
  timeline_.close();
  write_file_atomic(run_dir_ / "timeline.json", trace_.text());
  write_file_atomic(run_dir_ / "status.json",
                    json{{"state", "complete"},
                         {"iterations", iterations},
                         {"wall_seconds", wall_seconds},
                         {"resumed", resumed},
                         {"finished_at_utc", utc_timestamp("%Y-%m-%dT%H:%M:%SZ")}}
                            .dump(2) + "\n");
}

}  // namespace sb
