#pragma once
// The report: one RunSummary per run folder, computed from records.jsonl, written by
// three writers (JSON, CSV, Markdown). Definitions:
//   iterations_measured  iterations with warmup == false
//   median_iter_ms       median of iter_ms over measured iterations
//   tokens_per_s         sum(tokens) / sum(iter_ms) over measured iterations, x 1000
//   first_loss, last_loss  loss of the first and the last recorded iteration
//   median_imbalance     median over measured iterations of the per-iteration imbalance
//   mean_bubble_fraction mean over measured iterations of bubble_fraction

#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>
#include <vector>

namespace sb {

struct RunSummary {
  std::string run;
  std::string state;  // "complete" or "incomplete"
  std::string attention;
  std::string batching;
  int64_t dp = 1;  // parallelism of the run (from its resolved manifest)
  int64_t pp = 1;
  std::string git_sha;  // from the run's context.json
  int64_t iterations_recorded = 0;
  int64_t iterations_measured = 0;
  double median_iter_ms = 0;
  double tokens_per_s = 0;
  double first_loss = 0;
  double last_loss = 0;
  double median_imbalance = 0;
  double mean_bubble_fraction = 0;
};

// Reads <run_dir>/records.jsonl, manifest.resolved.json and status.json.
RunSummary summarize_run(const std::filesystem::path& run_dir);

// Every run folder directly under manifest_dir (those holding records.jsonl), by name.
std::vector<RunSummary> summarize_manifest_results(const std::filesystem::path& manifest_dir);

nlohmann::json report_to_json(const std::string& manifest_name, const std::vector<RunSummary>& runs);
std::string report_to_csv(const std::vector<RunSummary>& runs);
std::string report_to_markdown(const std::string& manifest_name, const std::vector<RunSummary>& runs);

// Writes report.json, report.csv and report.md into manifest_dir (atomically) and
// returns the summaries. A folder without runs is a ConfigError.
std::vector<RunSummary> write_report(const std::filesystem::path& manifest_dir);

double median_of(std::vector<double> values);

}  // namespace sb
