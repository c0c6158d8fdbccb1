#include "harness/report/report.h"

#include <algorithm>
#include <set>

#include "common/errors.h"
#include "harness/common/atomic_file.h"
#include "harness/common/build_info.h"
#include "harness/common/utc_time.h"
#include "harness/report/report_speedup.h"
#include "harness/report/report_writers.h"

namespace sb {
namespace {

namespace fs = std::filesystem;

// context.json keys that should be the same for runs that are compared.
const char* const kContextKeys[] = {"git_sha",  "git_dirty",    "sparsebalance_version", "build_type",
                                    "host",     "cpu_model",    "gpu_count",             "libtorch",
                                    "cuda_runtime", "driver",   "nccl",                  "compiler"};

ReportProvenance this_binary() {
  return {utc_timestamp("%Y-%m-%dT%H:%M:%SZ"), build_version(), build_git_sha(), build_git_dirty(), build_type()};
}

}  // namespace

std::vector<std::string> Report::git_shas() const {
  std::vector<std::string> shas;
  if (distinct_context.contains("git_sha")) {
    for (const auto& v : distinct_context["git_sha"]) shas.push_back(v.get<std::string>());
  }
  return shas;
}

std::vector<std::string> Report::runs_failing_checks() const {
  std::vector<std::string> failing;
  for (const RunSummary& r : runs) {
    if (!r.records_problem.empty()) failing.push_back(r.run);
  }
  return failing;
}

Report report_of_runs(const std::string& manifest, std::vector<RunSummary> runs) {
  Report report;
  report.manifest = manifest;
  attach_speedups(runs);
  report.runs = std::move(runs);
  report.methods = aggregate_methods(report.runs);
  report.ablation = build_ablation_tables(report.runs);
  std::set<std::string> columns;
  for (const RunSummary& r : report.runs) {
    for (const auto& [column, value] : r.accuracy) columns.insert(column);
  }
  report.accuracy_columns.assign(columns.begin(), columns.end());
  for (const char* key : kContextKeys) {
    nlohmann::json values = nlohmann::json::array();
    for (const RunSummary& r : report.runs) {
      if (!r.context.is_object() || !r.context.contains(key)) continue;
      if (std::find(values.begin(), values.end(), r.context[key]) == values.end()) values.push_back(r.context[key]);
    }
    if (!values.empty()) report.distinct_context[key] = values;
  }
  report.provenance = this_binary();
  return report;
}

Report build_report(const fs::path& manifest_dir, std::optional<double> peak_tflops) {
  std::vector<std::string> skipped;
  const std::vector<fs::path> folders = list_run_folders(manifest_dir, &skipped);
  if (folders.empty()) {
    throw ConfigError(manifest_dir.string(), "",
                      "holds no run folders (<run>/records.jsonl with manifest.resolved.json)",
                      "pass the results folder of one manifest, e.g. results/quickstart, after "
                      "`sparsebalance run` wrote runs into it");
  }
  std::vector<RunSummary> runs;
  for (const fs::path& folder : folders) runs.push_back(summarize_run(folder));
  if (peak_tflops) override_peak_tflops(runs, *peak_tflops);
  fs::path name = fs::absolute(manifest_dir).lexically_normal();
  if (name.filename().empty()) name = name.parent_path();  // "results/x/"
  Report report = report_of_runs(name.filename().string(), std::move(runs));
  report.skipped = std::move(skipped);
  return report;
}

Report write_report(const fs::path& manifest_dir, std::optional<double> peak_tflops) {
  Report report = build_report(manifest_dir, peak_tflops);
  write_file_atomic(manifest_dir / "report.json", report_to_json(report).dump(2) + "\n");
  write_file_atomic(manifest_dir / "report.csv", report_to_csv(report));
  write_file_atomic(manifest_dir / "report.md", report_to_markdown(report));
  return report;
}

}  // namespace sb
