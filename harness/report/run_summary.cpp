#include "harness/report/run_summary.h"

#include "harness/patterns/attention_patterns.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <stdexcept>

#include "common/errors.h"
#include "harness/common/atomic_file.h"
#include "harness/records/iteration_record.h"
#include "harness/records/record_checks.h"
#include "harness/report/training_flops.h"
#include "harness/config/stored_manifest.h"
#include "models/qwen2/qwen2_hf_config.h"

namespace sb {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

json read_json_file(const fs::path& file) {
  try {
    return json::parse(read_file(file));
  } catch (const json::exception& e) {
    throw ConfigError(file.string(), "", std::string("is not valid JSON: ") + e.what(),
                      "rewrite it, or move the run folder aside and rerun it");
  }
}

std::optional<double> mean_of(const std::vector<double>& values) {
  if (values.empty()) return std::nullopt;
  double sum = 0;
  for (double v : values) sum += v;
  return sum / static_cast<double>(values.size());
}

void read_context(const fs::path& file, RunSummary& s) {
  if (!fs::exists(file)) return;
  s.context = read_json_file(file);
  const json& c = s.context;
  s.git_sha = c.value("git_sha", "unknown");
  if (c.contains("seed") && c["seed"].is_number_integer()) s.seed = c["seed"].get<int64_t>();
  if (c.contains("experiment") && c["experiment"].is_object()) {
    const json& e = c["experiment"];
    s.method = e.value("method", s.method);
    if (e.contains("baseline") && e["baseline"].is_string()) s.baseline_method = e["baseline"].get<std::string>();
    s.is_baseline = e.value("is_baseline", false);
    if (e.contains("sweep_point") && e["sweep_point"].is_object()) s.sweep_point = e["sweep_point"];
    s.simulated = e.value("simulated", false);
  }
  if (c.contains("interleave") && c["interleave"].is_object()) {
    const json& i = c["interleave"];
    RunSummary::Interleaving interleave;
    interleave.block_iterations = i.value("block_iterations", int64_t{0});
    if (i.contains("runs") && i["runs"].is_array()) {
      for (const json& run : i["runs"]) {
        if (run.is_string()) interleave.runs.push_back(run.get<std::string>());
      }
    }
    s.interleave = interleave;
  }
  if (c.contains("profile") && c["profile"].is_object() && c["profile"].contains("kind") &&
      c["profile"]["kind"].is_string()) {
    s.profile_kind = c["profile"]["kind"].get<std::string>();
  }
}

void read_manifest(const fs::path& file, RunSummary& s, int64_t& default_budget) {
  const json manifest = read_stored_manifest_json(file);
  try {
    const json& method = manifest.at("methods").at(0);
    s.method = method.at("name").get<std::string>();
    const json& attention = method.at("attention");
    s.attention = attention.is_string() ? attention.get<std::string>() : attention.at("name").get<std::string>();
    // The pattern's budget axis and fixed budget, as the run planned them.
    const AttentionOptions options = parse_attention(attention, "$.methods[0].attention", file.string());
    s.kept_keys_budget = options.budget_axis() == BudgetAxis::kKeptKeys;
    if (options.budget_axis() == BudgetAxis::kKeyBlocks) default_budget = options.pattern().default_budget();
    s.batching = method.value("batching", "sequential");
    s.budget = method.value("budget", "fixed");
    if (method.contains("dst")) {
      s.dst_anchor = method["dst"].at("anchor").get<std::string>();
      s.dst_p = method["dst"].at("p").get<double>();
      s.dst_raise = method["dst"].value("raise", "anchor");
    }
    // Without a profile the policies predict nothing; with one, only context.json
    // knows whether it was measured or analytic.
    if (!method.contains("profile")) s.profile_kind = "none";
    if (manifest.contains("train") && manifest["train"].contains("iterations")) {
      s.iterations_planned = manifest["train"]["iterations"].get<int64_t>();
      s.max_samples_per_microbatch = manifest["train"].value("max_samples_per_microbatch", int64_t{0});
    }
    if (manifest.contains("parallelism")) {
      s.dp = manifest["parallelism"].value("dp", int64_t{1});
      s.pp = manifest["parallelism"].value("pp", int64_t{1});
      s.cp = manifest["parallelism"].value("cp", int64_t{1});
      s.tp = manifest["parallelism"].value("tp", int64_t{1});
      if (s.cp > 1) s.cp_layout = manifest["parallelism"].value("cp_layout", std::string());
    }
  } catch (const json::exception& e) {
    throw ConfigError(file.string(), "$.methods[0]", std::string("is not a resolved manifest: ") + e.what(),
                      "the run folder was not written by `sparsebalance run`; move it out of the results folder");
  }
}

void read_accuracy(const fs::path& file, RunSummary& s) {
  if (!fs::exists(file)) return;
  const json columns = read_json_file(file);
  if (!columns.is_object()) {
    throw ConfigError(file.string(), "$", "is not a JSON object of accuracy columns",
                      "write {\"column\": number, ...}");
  }
  for (const auto& [key, value] : columns.items()) {
    if (value.is_number()) s.accuracy[key] = value.get<double>();
  }
}

void summarize_records(const std::vector<IterationRecord>& records, int64_t default_budget, RunSummary& s) {
  s.iterations_recorded = static_cast<int64_t>(records.size());
  if (records.empty()) return;
  s.loss_first = records.front().loss;
  s.loss_final = records.back().loss;
  const auto largest = [&](std::optional<double>& out, const std::vector<double> IterationRecord::*field) {
    for (const IterationRecord& r : records) {
      for (double mb : r.*field) out = std::max(out.value_or(mb), mb);
    }
  };
  largest(s.peak_rss_mb, &IterationRecord::peak_rss_mb);
  largest(s.peak_gpu_allocated_mb, &IterationRecord::peak_gpu_allocated_mb);
  largest(s.peak_gpu_reserved_mb, &IterationRecord::peak_gpu_reserved_mb);
  std::vector<double> cp_worker_imbalance, cp_work_imbalance, dp_imbalance, slot_imbalance;
  std::vector<double> iter_ms, imbalance, bubble, overhead, allreduce, coverage, budgets, layer_budgets,
      reference_budgets, ape;
  double tokens = 0, total_ms = 0, bubble_max = 0, microbatch_sum = 0;
  for (const IterationRecord& r : records) {
    if (r.warmup) continue;
    iter_ms.push_back(r.iter_ms);
    s.measured_iterations.push_back(r.iteration);
    imbalance.push_back(r.imbalance);
    if (std::isfinite(r.dp_imbalance)) dp_imbalance.push_back(r.dp_imbalance);
    if (std::isfinite(r.slot_imbalance)) slot_imbalance.push_back(r.slot_imbalance);
    cp_worker_imbalance.insert(cp_worker_imbalance.end(), r.cp_worker_imbalance.begin(), r.cp_worker_imbalance.end());
    cp_work_imbalance.insert(cp_work_imbalance.end(), r.cp_work_imbalance.begin(), r.cp_work_imbalance.end());
    bubble.push_back(r.bubble_fraction);
    bubble_max = std::max(bubble_max, r.bubble_fraction_max);
    overhead.push_back(r.balance_overhead_ms);
    allreduce.push_back(r.allreduce_ms);
    tokens += static_cast<double>(r.tokens);
    total_ms += r.iter_ms;
    coverage.insert(coverage.end(), r.coverage.begin(), r.coverage.end());
    for (double ms : r.microbatch_ms) microbatch_sum += ms;
    // A planned budget is a number of key blocks (0: the default); kept keys per query are
    // planned only under DST (0: the pattern's own rule, counted in effective_budget_mean).
    for (int64_t b : r.budgets) {
      if (!s.kept_keys_budget) {
        budgets.push_back(static_cast<double>(b == 0 ? default_budget : b));
      } else if (b > 0) {
        budgets.push_back(static_cast<double>(b));
      }
    }
    for (const auto& layers : r.layer_budgets) layer_budgets.insert(layer_budgets.end(), layers.begin(), layers.end());
    for (const auto& layers : r.layer_reference_budgets) {
      reference_budgets.insert(reference_budgets.end(), layers.begin(), layers.end());
    }
    const size_t n = std::min(r.microbatch_pred_ms.size(), r.microbatch_ms.size());
    for (size_t k = 0; k < n; ++k) {
      const double measured = r.microbatch_ms[k];
      if (measured > 0) ape.push_back(100.0 * std::abs(r.microbatch_pred_ms[k] - measured) / measured);
    }
  }
  s.iterations_measured = static_cast<int64_t>(iter_ms.size());
  if (iter_ms.empty()) return;
  s.iter_ms = sample_stats(iter_ms);
  s.measured_iter_ms = iter_ms;
  s.imbalance = sample_stats(imbalance);
  if (!dp_imbalance.empty()) s.dp_imbalance = sample_stats(dp_imbalance);
  if (!slot_imbalance.empty()) s.slot_imbalance = sample_stats(slot_imbalance);
  if (!cp_worker_imbalance.empty()) s.cp_worker_imbalance = sample_stats(cp_worker_imbalance);
  if (!cp_work_imbalance.empty()) s.cp_work_imbalance = sample_stats(cp_work_imbalance);
  s.bubble_fraction_mean = mean_of(bubble);
  s.bubble_fraction_max = bubble_max;
  s.overhead_ms = median_of(overhead);
  if (s.iter_ms->median > 0) s.overhead_pct = 100.0 * *s.overhead_ms / s.iter_ms->median;
  s.allreduce_ms = median_of(allreduce);
  if (total_ms > 0) s.tokens_per_s = tokens / total_ms * 1000.0;
  s.coverage_mean = mean_of(coverage);
  s.budget_mean = mean_of(budgets);
  s.effective_budget_mean = mean_of(layer_budgets);
  s.reference_budget_mean = mean_of(reference_budgets);
  s.prediction_mape = mean_of(ape);
  s.runqueue_wait_pct = runqueue_wait_pct(records);
  if (s.interleave) {
    for (const IterationRecord& r : records) {
      if (r.warmup || r.interleave_block < 0 || r.runqueue_wait_ms.empty()) continue;
      auto& [waited, rank_ms] = s.interleave->block_wait_ms[r.interleave_block];
      for (double ms : r.runqueue_wait_ms) waited += ms;
      rank_ms += r.iter_ms * static_cast<double>(r.runqueue_wait_ms.size());
    }
  }
  if (microbatch_sum > 0) s.microbatch_ms_sum = microbatch_sum;
}

// The trained architecture, from the resolved manifest's model: its preset, or the
// config.json of its folder; nullopt when neither can be read.
std::optional<Qwen2Config> trained_architecture(const fs::path& manifest_file) {
  try {
    const json model = read_json_file(manifest_file).at("model");
    const std::string from = model.value("from", "");
    if (!from.empty()) {
      const fs::path config = fs::path(from) / "config.json";
      if (!fs::exists(config)) return std::nullopt;
      return qwen2_config_from_hf_file(config);
    }
    return qwen2_preset(model.at("preset").get<std::string>());
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

void summarize_throughput(const fs::path& run_dir, const std::vector<IterationRecord>& records, RunSummary& s) {
  const std::optional<Qwen2Config> config = trained_architecture(run_dir / "manifest.resolved.json");
  if (!config) return;
  double flops = 0, ms = 0;
  for (const IterationRecord& r : records) {
    if (r.warmup) continue;
    if (r.microbatch_lengths.empty()) return;  // older records: the lengths are unknown
    std::vector<int64_t> lengths;
    for (const auto& mb : r.microbatch_lengths) lengths.insert(lengths.end(), mb.begin(), mb.end());
    flops += training_model_flops(*config, lengths);
    ms += r.iter_ms;
  }
  const double ranks = static_cast<double>(s.dp * s.pp * s.cp * s.tp);
  if (ms <= 0 || ranks <= 0) return;
  s.model_tflops_per_gpu = flops / (ms / 1000.0) / ranks / 1e12;
  const json& c = s.context;
  if (c.contains("world") && c["world"].value("device", "") == "cuda" && c.contains("gpus") && c["gpus"].is_array() &&
      !c["gpus"].empty()) {
    s.peak_tflops = known_gpu_peak_tflops(c["gpus"][0].value("name", ""));
  }
  if (s.peak_tflops) s.mfu = *s.model_tflops_per_gpu / *s.peak_tflops;
}

}  // namespace

std::optional<double> runqueue_wait_pct(const std::vector<IterationRecord>& records) {
  double waited_ms = 0, rank_ms = 0;
  for (const IterationRecord& r : records) {
    if (r.warmup) continue;
    for (double ms : r.runqueue_wait_ms) waited_ms += ms;
    rank_ms += r.iter_ms * static_cast<double>(r.runqueue_wait_ms.size());
  }
  if (rank_ms <= 0) return std::nullopt;
  return 100.0 * waited_ms / rank_ms;
}

std::string RunSummary::budget_text() const {
  if (!dst_anchor || !dst_p) return budget;
  char p[32];
  std::snprintf(p, sizeof(p), "%g", *dst_p);
  const std::string raise = dst_raise && *dst_raise != "anchor" ? ",raise=" + *dst_raise : "";
  return budget + "(anchor=" + *dst_anchor + ",p=" + p + raise + ")";
}

RunSummary summarize_run(const fs::path& run_dir) {
  RunSummary s;
  s.run = run_dir.filename().string();
  int64_t default_budget = 0;
  read_manifest(run_dir / "manifest.resolved.json", s, default_budget);
  read_context(run_dir / "context.json", s);
  if (fs::exists(run_dir / "status.json")) {
    s.state = read_json_file(run_dir / "status.json").value("state", "incomplete");
  }
  read_accuracy(run_dir / "eval" / "eval_columns.json", s);
  std::vector<IterationRecord> records;
  try {
    records = read_iteration_records(run_dir / "records.jsonl");
  } catch (const ConfigError& e) {
    s.records_problem = e.what();
  }
  if (s.records_problem.empty()) {
    s.records_problem =
        record_sequence_problem(records, s.state == "complete" ? s.iterations_planned : std::optional<int64_t>());
  }
  if (!s.records_problem.empty()) {
    s.state = "invalid records";
    records.clear();  // nothing of a failed run enters the tables
  }
  summarize_records(records, default_budget, s);
  summarize_throughput(run_dir, records, s);
  return s;
}

void override_peak_tflops(std::vector<RunSummary>& runs, double peak_tflops) {
  for (RunSummary& s : runs) {
    s.peak_tflops = peak_tflops;
    if (s.model_tflops_per_gpu) s.mfu = *s.model_tflops_per_gpu / peak_tflops;
  }
}

std::vector<fs::path> list_run_folders(const fs::path& manifest_dir, std::vector<std::string>* skipped) {
  std::vector<fs::path> run_dirs;
  for (const auto& entry : fs::directory_iterator(manifest_dir)) {
    if (!entry.is_directory()) continue;
    const std::string name = entry.path().filename().string();
    if (name.find(".interrupted-") != std::string::npos) {
      if (skipped) skipped->push_back(name + ": moved aside by a rerun (interrupted)");
      continue;
    }
    if (!fs::exists(entry.path() / "records.jsonl")) continue;  // plots/, eval/, ...
    if (!fs::exists(entry.path() / "manifest.resolved.json")) {
      if (skipped) skipped->push_back(name + ": records.jsonl without manifest.resolved.json");
      continue;
    }
    run_dirs.push_back(entry.path());
  }
  std::sort(run_dirs.begin(), run_dirs.end());
  if (skipped) std::sort(skipped->begin(), skipped->end());
  return run_dirs;
}

}  // namespace sb
