#include "harness/report/run_summary.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <numeric>
#include <sstream>
#include <stdexcept>

#include "harness/common/atomic_file.h"
#include "harness/common/errors.h"
#include "harness/train/iteration_record.h"

namespace sb {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::vector<IterationRecord> read_records(const fs::path& file) {
  std::ifstream in(file);
  if (!in) throw std::runtime_error("cannot open " + file.string());
  std::vector<IterationRecord> records;
  std::string line;
  int64_t line_number = 0;
  while (std::getline(in, line)) {
    ++line_number;
    if (line.empty()) continue;
    try {
      records.push_back(iteration_record_from_json(json::parse(line)));
    } catch (const std::exception& e) {
      throw std::runtime_error(file.string() + ":" + std::to_string(line_number) +
                               ": not a valid iteration record: " + e.what());
    }
  }
  return records;
}

// Fixed-precision text for the CSV and Markdown writers, so golden files are stable.
std::string fixed(double value, int digits) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "%.*f", digits, value);
  return buffer;
}

}  // namespace

double median_of(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

RunSummary summarize_run(const fs::path& run_dir) {
  RunSummary s;
  s.run = run_dir.filename().string();
  const json manifest = json::parse(read_file(run_dir / "manifest.resolved.json"));
  s.attention = manifest.at("methods").at(0).at("attention").at("name").get<std::string>();
  s.batching = manifest.at("methods").at(0).at("batching").get<std::string>();
  if (manifest.contains("parallelism")) {
    s.dp = manifest.at("parallelism").value("dp", int64_t{1});
    s.pp = manifest.at("parallelism").value("pp", int64_t{1});
  }
  s.git_sha = "unknown";
  if (fs::exists(run_dir / "context.json")) {
    s.git_sha = json::parse(read_file(run_dir / "context.json")).value("git_sha", "unknown");
  }
  s.state = "incomplete";
  if (fs::exists(run_dir / "status.json")) {
    s.state = json::parse(read_file(run_dir / "status.json")).at("state").get<std::string>();
  }
  const std::vector<IterationRecord> records = read_records(run_dir / "records.jsonl");
  s.iterations_recorded = static_cast<int64_t>(records.size());
  if (records.empty()) return s;
  s.first_loss = records.front().loss;
  s.last_loss = records.back().loss;
  std::vector<double> iter_ms, imbalance;
  double tokens = 0, total_ms = 0, bubble = 0;
  for (const auto& r : records) {
    if (r.warmup) continue;
    iter_ms.push_back(r.iter_ms);
    imbalance.push_back(r.imbalance);
    tokens += static_cast<double>(r.tokens);
    total_ms += r.iter_ms;
    bubble += r.bubble_fraction;
  }
  s.iterations_measured = static_cast<int64_t>(iter_ms.size());
  if (s.iterations_measured == 0) return s;
  s.median_iter_ms = median_of(iter_ms);
  s.tokens_per_s = total_ms > 0 ? tokens / total_ms * 1000.0 : 0;
  s.median_imbalance = median_of(imbalance);
  s.mean_bubble_fraction = bubble / static_cast<double>(s.iterations_measured);
  return s;
}

std::vector<RunSummary> summarize_manifest_results(const fs::path& manifest_dir) {
  std::vector<fs::path> run_dirs;
  for (const auto& entry : fs::directory_iterator(manifest_dir)) {
    if (entry.is_directory() && fs::exists(entry.path() / "records.jsonl") &&
        fs::exists(entry.path() / "manifest.resolved.json")) {
      run_dirs.push_back(entry.path());
    }
  }
  std::sort(run_dirs.begin(), run_dirs.end());
  std::vector<RunSummary> runs;
  for (const auto& dir : run_dirs) runs.push_back(summarize_run(dir));
  return runs;
}

json report_to_json(const std::string& manifest_name, const std::vector<RunSummary>& runs) {
  json rows = json::array();
  for (const auto& s : runs) {
    rows.push_back({{"run", s.run},
                    {"state", s.state},
                    {"attention", s.attention},
                    {"batching", s.batching},
                    {"dp", s.dp},
                    {"pp", s.pp},
                    {"git_sha", s.git_sha},
                    {"iterations_recorded", s.iterations_recorded},
                    {"iterations_measured", s.iterations_measured},
                    {"median_iter_ms", s.median_iter_ms},
                    {"tokens_per_s", s.tokens_per_s},
                    {"first_loss", s.first_loss},
                    {"last_loss", s.last_loss},
                    {"median_imbalance", s.median_imbalance},
                    {"mean_bubble_fraction", s.mean_bubble_fraction}});
  }
  return json{{"manifest", manifest_name}, {"runs", rows}};
}

std::string report_to_csv(const std::vector<RunSummary>& runs) {
  std::ostringstream out;
  out << "run,state,attention,batching,dp,pp,git_sha,iterations_recorded,iterations_measured,median_iter_ms,"
         "tokens_per_s,first_loss,last_loss,median_imbalance,mean_bubble_fraction\n";
  for (const auto& s : runs) {
    out << s.run << ',' << s.state << ',' << s.attention << ',' << s.batching << ',' << s.dp << ',' << s.pp << ','
        << s.git_sha << ','
        << s.iterations_recorded << ',' << s.iterations_measured << ','
        << fixed(s.median_iter_ms, 3) << ',' << fixed(s.tokens_per_s, 1) << ','
        << fixed(s.first_loss, 6) << ',' << fixed(s.last_loss, 6) << ','
        << fixed(s.median_imbalance, 4) << ',' << fixed(s.mean_bubble_fraction, 4) << '\n';
  }
  return out.str();
}

std::string report_to_markdown(const std::string& manifest_name,
                               const std::vector<RunSummary>& runs) {
  std::ostringstream out;
  out << "# " << manifest_name << "\n\n"
      << "| run | state | attention | batching | dp x pp | iterations measured | median iteration ms "
         "| tokens/s | first loss | last loss | imbalance (median) | bubble fraction (mean) |\n"
      << "|---|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const auto& s : runs) {
    out << "| " << s.run << " | " << s.state << " | " << s.attention << " | " << s.batching << " | " << s.dp
        << " x " << s.pp << " | " << s.iterations_measured << " | " << fixed(s.median_iter_ms, 2) << " | "
        << fixed(s.tokens_per_s, 0) << " | " << fixed(s.first_loss, 4) << " | "
        << fixed(s.last_loss, 4) << " | " << fixed(s.median_imbalance, 3) << " | "
        << fixed(s.mean_bubble_fraction, 3) << " |\n";
  }
  out << "\nMedians and rates exclude warm-up iterations. Definitions: README.md, \"Metrics\".\n";
  return out.str();
}

std::vector<RunSummary> write_report(const fs::path& manifest_dir) {
  std::vector<RunSummary> runs = summarize_manifest_results(manifest_dir);
  if (runs.empty()) {
    throw ConfigError(manifest_dir.string(), "", "holds no run folders (<run>/records.jsonl)",
                      "pass the results folder of one manifest, e.g. results/quickstart");
  }
  const std::string name = manifest_dir.filename().string();
  write_file_atomic(manifest_dir / "report.json", report_to_json(name, runs).dump(2) + "\n");
  write_file_atomic(manifest_dir / "report.csv", report_to_csv(runs));
  write_file_atomic(manifest_dir / "report.md", report_to_markdown(name, runs));
  return runs;
}

}  // namespace sb
