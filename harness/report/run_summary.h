#pragma once
// One run of a results folder, summarized from its files:
//   records.jsonl            measured iterations = records with warmup == false
//   context.json             experiment {method, baseline, is_baseline, sweep_point,
//                            simulated}, profile {kind}, git SHA, hardware
//   manifest.resolved.json   attention, batching, budget (+ dst anchor and p), dp x pp
//   status.json              present and "complete": the run finished
//   eval/eval_columns.json   optional flat object; every numeric key is an accuracy column
//
// Definitions (one each; docs/reports.md repeats them):
//   iter_ms           median, min, max, p25, p75 of iter_ms over measured iterations
//   imbalance         the same over the records' imbalance (max / mean micro-batch ms);
//                     dp_imbalance and slot_imbalance likewise (between DP ranks)
//   bubble_fraction   mean of bubble_fraction and max of bubble_fraction_max, measured
//   overhead_ms       median of balance_overhead_ms; overhead_pct = 100 x overhead_ms /
//                     median iter_ms
//   allreduce_ms      median of allreduce_ms
//   tokens_per_s      sum(tokens) / sum(iter_ms) x 1000, measured
//   loss_first/final  loss of the first and the last recorded iteration (warm-up included)
//   coverage_mean     mean of coverage[k] over measured iterations and micro-batches
//   budget_mean       mean of budgets[k] (0, the backend's default, counted as the
//                     method's top_k) over measured iterations and micro-batches: the
//                     budget the plan asked for
//                     (a pattern whose budgets are kept keys per query: those DST asked
//                     for, counting only its requests; none for the pattern's own rule,
//                     which plans none)
//   effective_budget_mean  mean of layer_budgets[k][l] over measured iterations,
//                     micro-batches and layers: the budget the layers ran after DST's
//                     coverage floor (absent when the records carry no layer budgets)
//   reference_budget_mean  the same of layer_reference_budgets[k][l]: the budget the
//                     pattern's own rule chose (kept keys per query; absent for patterns
//                     whose fixed budget is a number)
//   microbatch_ms_sum sum of microbatch_ms over measured iterations and micro-batches (the
//                     compute the run did; the simulator's validation compares it)
//   prediction_mape   mean over measured iterations and micro-batches (measured ms > 0)
//                     of 100 |microbatch_pred_ms[k] - microbatch_ms[k]| / microbatch_ms[k]
//   speedup           see report_speedup.h (filled in over all runs of the folder), with
//                     its 95 % interval (speedup_interval.h)
// A value whose inputs are absent stays nullopt (null in JSON, empty in CSV, "-" in
// Markdown), never 0.

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/statistics.h"
#include "harness/records/iteration_record.h"
#include "harness/report/speedup_interval.h"

namespace sb {

// A run whose ranks spent more than this share of their time waiting for a core is
// flagged in report.md, and `simulate` warns when it fits a model to it. Measured on
// this project's 2-core machines (1 thread per rank): on an otherwise idle machine 1.8-3.2 % for table1-cpu's two DP ranks and 4.6-6.0 %
// for table1-cpu-pp2's two pipeline stages (the collectives' and the launcher's threads
// waking up beside the compute); table1-cpu's baseline beside two busy processes: 42 %,
// its iterations 1.9x longer.
inline constexpr double kContendedRunqueueWaitPct = 10.0;

struct RunSummary {
  std::string run;  // folder name
  // From context.json "experiment" (method falls back to the resolved method's name).
  std::string method;
  std::optional<std::string> baseline_method;
  bool is_baseline = false;
  nlohmann::json sweep_point = nlohmann::json::object();  // {"dotted.path": value}
  bool simulated = false;
  std::optional<std::string> profile_kind;  // "measured" | "analytic" | "none"
  std::optional<int64_t> seed;
  std::string git_sha = "unknown";
  nlohmann::json context;  // context.json as written (null when absent)
  // From manifest.resolved.json.
  std::string attention;
  // The pattern's budgets are kept keys per query (BudgetAxis::kKeptKeys): the report shows
  // the keys its layers kept and the coverage.
  bool kept_keys_budget = false;
  std::string batching;
  std::string budget;  // "fixed" | "dst"
  std::optional<std::string> dst_anchor;
  std::optional<double> dst_p;
  std::optional<std::string> dst_raise;  // "anchor" (also when the resolved manifest predates the key)
  int64_t dp = 1;
  int64_t pp = 1;
  int64_t cp = 1;
  int64_t tp = 1;
  int64_t max_samples_per_microbatch = 0;  // train.max_samples_per_microbatch (0: no limit)
  std::string cp_layout;  // context parallelism's layout; empty without CP
  std::string state = "incomplete";  // "complete" | "incomplete"
  std::optional<int64_t> iterations_planned;  // the resolved manifest's train.iterations
  // Why records.jsonl fails the report's check (harness/records/record_checks.h), or
  // empty; a run that fails is reported without numbers.
  std::string records_problem;
  // From records.jsonl.
  int64_t iterations_recorded = 0;
  int64_t iterations_measured = 0;
  std::optional<SampleStats> iter_ms;
  std::vector<double> measured_iter_ms;  // in record order (the speedup interval's sample)
  std::vector<int64_t> measured_iterations;  // their iteration numbers
  std::optional<SampleStats> imbalance;
  // Between DP ranks (harness/trace/iteration_metrics.h), over the measured iterations
  // whose records have them.
  std::optional<SampleStats> dp_imbalance;
  std::optional<SampleStats> slot_imbalance;
  // Under CP: worker imbalance over every measured micro-batch (docs/context_parallel.md).
  std::optional<SampleStats> cp_worker_imbalance;  // by compute time
  std::optional<SampleStats> cp_work_imbalance;    // by kept (query, key) pairs
  std::optional<double> bubble_fraction_mean;
  std::optional<double> bubble_fraction_max;
  std::optional<double> overhead_ms;
  std::optional<double> overhead_pct;
  std::optional<double> allreduce_ms;
  std::optional<double> tokens_per_s;
  std::optional<double> loss_first;
  std::optional<double> loss_final;
  std::optional<double> coverage_mean;
  std::optional<double> budget_mean;
  std::optional<double> effective_budget_mean;
  std::optional<double> reference_budget_mean;
  std::optional<double> prediction_mape;
  // 100 x (sum of the ranks' run-queue waits) / (sum of iter_ms x ranks) over the
  // measured iterations that carry runqueue_wait_ms: with one busy thread per rank, the
  // share of its ranks' time a run spent ready to compute with no free core (summed over
  // a rank's threads, so several busy threads can take it past 100). Null for simulated
  // and older runs.
  std::optional<double> runqueue_wait_pct;
  // Trained interleaved with other runs (context.json "interleave", records'
  // interleave_block): the block length, the runs that took turns (this one included,
  // in plan order), and per block, over the measured iterations this run trained there,
  // its ranks' run-queue wait and time (ms summed over ranks; as runqueue_wait_pct).
  struct Interleaving {
    int64_t block_iterations = 0;
    std::vector<std::string> runs;
    std::map<int64_t, std::pair<double, double>> block_wait_ms;  // block -> (waited, iter_ms x ranks)
  };
  std::optional<Interleaving> interleave;
  std::optional<double> microbatch_ms_sum;
  // The largest per-iteration peak over every iteration (warm-up included) and rank,
  // MiB: host RSS, CUDA allocated, CUDA reserved (records' peak_* fields). Null when no
  // record carries it.
  std::optional<double> peak_rss_mb, peak_gpu_allocated_mb, peak_gpu_reserved_mb;
  // Throughput in model FLOPs (harness/report/training_flops.h): the measured iterations'
  // model FLOPs / their summed iter_ms / the run's ranks, TFLOP/s; null when the records
  // carry no microbatch_lengths or the architecture cannot be read (a folder since moved).
  std::optional<double> model_tflops_per_gpu;
  // The GPU's dense bf16 peak (known_gpu_peak_tflops of context.json's first GPU on CUDA
  // runs, or `report --peak-tflops`) and model_tflops_per_gpu / it.
  std::optional<double> peak_tflops, mfu;
  // From eval/eval_columns.json.
  std::map<std::string, double> accuracy;
  // Filled by attach_speedups (report_speedup.h).
  std::optional<double> speedup;
  std::optional<SpeedupInterval> speedup_interval;  // 95 %, speedup_interval.h; [1, 1] for the baseline
  std::string speedup_baseline_run;  // the run it was measured against
  std::string speedup_note;          // why speedup is null, when it is

  // Complete and its records pass the check: it enters the aggregates.
  bool complete() const { return state == "complete" && records_problem.empty(); }
  // "budget" column text: "fixed" or "dst(anchor=mean,p=0.1)".
  std::string budget_text() const;
};

// RunSummary::runqueue_wait_pct of these records (measured ones only); null when none
// carries runqueue_wait_ms.
std::optional<double> runqueue_wait_pct(const std::vector<IterationRecord>& records);

// Sets every run's peak_tflops to `peak_tflops` (`report --peak-tflops`) and its MFU.
void override_peak_tflops(std::vector<RunSummary>& runs, double peak_tflops);

// Reads one run folder (it must hold records.jsonl and manifest.resolved.json).
// Errors name the file (and line for records.jsonl).
RunSummary summarize_run(const std::filesystem::path& run_dir);

// Run folders directly under manifest_dir, by name: folders named *.interrupted-*
// (moved aside by a rerun) and folders without records.jsonl or
// manifest.resolved.json are skipped, each with a line in `skipped` (when given).
std::vector<std::filesystem::path> list_run_folders(const std::filesystem::path& manifest_dir,
                                                    std::vector<std::string>* skipped = nullptr);

}  // namespace sb
