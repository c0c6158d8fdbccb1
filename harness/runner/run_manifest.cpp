#include "harness/runner/run_manifest.h"

#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <ostream>

#include "harness/common/atomic_file.h"
#include "harness/common/errors.h"
#include "harness/report/run_summary.h"
#include "harness/runner/system_info.h"
#include "harness/train/trainer.h"

namespace sb {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string utc_timestamp(const char* format) {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buffer[64];
  std::strftime(buffer, sizeof(buffer), format, &tm);
  return buffer;
}

// What decides whether stored results answer the same question: the resolved run
// manifest without its free-text description.
json comparable_manifest(json manifest) {
  manifest.erase("description");
  return manifest;
}

// First JSON pointer at which two documents differ, for the error message.
std::string first_difference(const json& stored, const json& current) {
  const json patch = json::diff(stored, current);
  if (patch.empty()) return "";
  return patch.at(0).value("path", "");
}

enum class Disposition { kFresh, kSkip, kReplaceComplete, kRestartIncomplete };

// Decides what to do with an existing run folder without touching it, so that a
// conflict in any run stops the command before any run starts.
Disposition decide_disposition(const fs::path& run_dir, const json& resolved,
                               const RunManifestOptions& options) {
  if (!fs::exists(run_dir)) return Disposition::kFresh;
  if (!fs::exists(run_dir / "status.json")) return Disposition::kRestartIncomplete;
  if (options.force) return Disposition::kReplaceComplete;
  json stored = json::parse(read_file(run_dir / "manifest.resolved.json"));
  if (comparable_manifest(stored) == comparable_manifest(resolved)) return Disposition::kSkip;
  throw ConfigError(options.manifest_file.string(), first_difference(stored, resolved),
                    "differs from the manifest that produced the complete results in " +
                        run_dir.string(),
                    "pass --force to replace those results, or rename the manifest "
                    "(\"name\") to keep both");
}

void clear_run_dir(const fs::path& run_dir, Disposition disposition, std::ostream& log) {
  switch (disposition) {
    case Disposition::kFresh:
    case Disposition::kSkip:
      return;
    case Disposition::kReplaceComplete:
      log << "replacing complete results in " << run_dir.string() << " (--force)\n";
      fs::remove_all(run_dir);
      return;
    case Disposition::kRestartIncomplete: {
      fs::path aside = run_dir;
      aside += ".interrupted-" + utc_timestamp("%Y%m%dT%H%M%SZ");
      fs::rename(run_dir, aside);
      log << "found an incomplete run in " << run_dir.string() << "; moved it to "
          << aside.string() << " and starting again from iteration 0\n";
      return;
    }
  }
  throw std::logic_error("clear_run_dir: unhandled disposition");
}

json run_context(const RunSpec& run, const RunManifestOptions& options) {
  json context = collect_system_info();
  context["seed"] = run.manifest.seed;
  context["run"] = run.name;
  context["manifest_name"] = run.manifest.name;
  context["manifest_file"] = options.manifest_file.string();
  context["command_line"] = options.command_line;
  context["started_at_utc"] = utc_timestamp("%Y-%m-%dT%H:%M:%SZ");
  context["world"] = {{"world_size", run.manifest.parallelism.dp * run.manifest.parallelism.pp},
                      {"dp", run.manifest.parallelism.dp},
                      {"pp", run.manifest.parallelism.pp},
                      {"device", run.manifest.train.device}};
  return context;
}

void execute_run(const RunSpec& run, const fs::path& run_dir, const json& resolved,
                 const RunManifestOptions& options, std::ostream& log) {
  fs::create_directories(run_dir);
  write_file_atomic(run_dir / "manifest.resolved.json", resolved.dump(2) + "\n");
  write_file_atomic(run_dir / "context.json", run_context(run, options).dump(2) + "\n");

  Trainer trainer(run);
  // Appended and flushed line by line: an interrupted run keeps what it measured.
  std::ofstream records(run_dir / "records.jsonl", std::ios::out | std::ios::trunc);
  if (!records) throw std::runtime_error("cannot write " + (run_dir / "records.jsonl").string());
  const int64_t iterations = run.manifest.train.iterations;
  const auto start = std::chrono::steady_clock::now();
  for (int64_t it = 0; it < iterations; ++it) {
    IterationRecord record = trainer.train_iteration(it);
    records << iteration_record_to_json(record).dump() << '\n';
    records.flush();
    if (!records) throw std::runtime_error("write failed: " + (run_dir / "records.jsonl").string());
    if (it == 0 || (it + 1) % options.progress_every == 0 || it + 1 == iterations) {
      char line[256];
      std::snprintf(line, sizeof(line), "[%s/%s] iteration %lld/%lld  loss %.4f  %.1f ms  %lld tokens\n",
                    run.manifest.name.c_str(), run.name.c_str(), static_cast<long long>(it + 1),
                    static_cast<long long>(iterations), record.loss, record.iter_ms,
                    static_cast<long long>(record.tokens));
      log << line << std::flush;
    }
  }
  records.close();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  write_file_atomic(run_dir / "status.json",
                    json{{"state", "complete"},
                         {"iterations", iterations},
                         {"wall_seconds", seconds},
                         {"finished_at_utc", utc_timestamp("%Y-%m-%dT%H:%M:%SZ")}}
                            .dump(2) + "\n");
}

}  // namespace

RunManifestResult run_manifest(const Manifest& manifest, const RunManifestOptions& options,
                               std::ostream& log) {
  std::vector<RunSpec> runs = expand_runs(manifest);
  if (options.only) {
    std::vector<RunSpec> selected;
    std::string names;
    for (auto& run : runs) {
      names += (names.empty() ? "" : ", ") + run.name;
      if (run.name == *options.only) selected.push_back(run);
    }
    if (selected.empty()) {
      throw ConfigError("--only", "", "no run named \"" + *options.only + "\" in " +
                                          options.manifest_file.string(),
                        "use one of: " + names);
    }
    runs = std::move(selected);
  }
  RunManifestResult result;
  result.manifest_dir = options.results_root / manifest.name;
  if (std::string warning = debug_build_warning(); !warning.empty()) log << warning << "\n";
  std::vector<Disposition> dispositions;
  for (const RunSpec& run : runs) {
    dispositions.push_back(decide_disposition(result.manifest_dir / run.name,
                                              manifest_to_json(run.manifest), options));
  }
  for (size_t i = 0; i < runs.size(); ++i) {
    const RunSpec& run = runs[i];
    const fs::path run_dir = result.manifest_dir / run.name;
    if (dispositions[i] == Disposition::kSkip) {
      log << "skipping " << run_dir.string() << ": already complete (pass --force to rerun)\n";
      result.skipped.push_back(run.name);
      continue;
    }
    clear_run_dir(run_dir, dispositions[i], log);
    execute_run(run, run_dir, manifest_to_json(run.manifest), options, log);
    result.ran.push_back(run.name);
  }
  write_report(result.manifest_dir);
  return result;
}

}  // namespace sb
