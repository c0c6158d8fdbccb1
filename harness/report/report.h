#pragma once
// The report of one results folder (results/<manifest>/): every run's summary, the
// per-method aggregates, the DST ablation tables and the context the runs ran in.
// One record, written by three writers (report_writers.h) into report.json,
// report.csv and report.md. Definitions: run_summary.h, report_speedup.h,
// report_aggregate.h, ablation_table.h (docs/reports.md gathers them).

#include <nlohmann/json.hpp>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "harness/report/ablation_table.h"
#include "harness/report/report_aggregate.h"
#include "harness/report/run_summary.h"

namespace sb {

// Who wrote the report and when (the binary's own build facts).
struct ReportProvenance {
  std::string generated_at_utc;
  std::string version;
  std::string git_sha;
  bool git_dirty = false;
  std::string build_type;
};

struct Report {
  std::string manifest;  // the folder's name
  std::vector<RunSummary> runs;  // by folder name
  std::vector<MethodAggregate> methods;
  std::vector<AblationTable> ablation;
  std::vector<std::string> accuracy_columns;  // union over runs, by name
  std::vector<std::string> skipped;           // folders left out, with why
  ReportProvenance provenance;
  // Distinct values over the runs' context.json of the keys that should agree
  // (git_sha, host, cpu_model, libtorch, ...), {key: [values]}.
  nlohmann::json distinct_context = nlohmann::json::object();

  std::vector<std::string> git_shas() const;
  // The runs whose records fail the check (RunSummary::records_problem).
  std::vector<std::string> runs_failing_checks() const;
};

// Reads every run folder of manifest_dir (list_run_folders) and computes everything.
// A folder without runs is a ConfigError naming it.
// peak_tflops (`report --peak-tflops`) replaces every run's device peak for its MFU.
Report build_report(const std::filesystem::path& manifest_dir, std::optional<double> peak_tflops = std::nullopt);

// The report of already summarized runs (tests build these by hand).
Report report_of_runs(const std::string& manifest, std::vector<RunSummary> runs);

// build_report, then report.json, report.csv and report.md written atomically.
Report write_report(const std::filesystem::path& manifest_dir, std::optional<double> peak_tflops = std::nullopt);

}  // namespace sb
