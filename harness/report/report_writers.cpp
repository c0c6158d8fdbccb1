#include "harness/report/report_writers.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <sstream>

namespace sb {
namespace {

// {"median", "min", "max", "p25", "p75"}: a run's spread over its measured iterations;
// null when absent.
nlohmann::json spread_to_json(const std::optional<SampleStats>& s) {
  if (!s) return nullptr;
  return {{"median", s->median}, {"min", s->min}, {"max", s->max}, {"p25", s->p25}, {"p75", s->p75}};
}

// {"median", "min", "max", "count"}: an aggregate over runs; null when absent.
nlohmann::json range_to_json(const std::optional<SampleStats>& s) {
  if (!s) return nullptr;
  return {{"median", s->median}, {"min", s->min}, {"max", s->max}, {"count", s->count}};
}


using nlohmann::json;

template <typename T>
json or_null(const std::optional<T>& v) {
  return v ? json(*v) : json(nullptr);
}

std::string format(const char* pattern, double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), pattern, value);
  return buffer;
}

// CSV: enough digits to reproduce the value, empty when absent.
std::string csv_number(const std::optional<double>& v) { return v ? format("%.10g", *v) : ""; }

std::string csv_text(const std::string& text) {
  if (text.find_first_of(",\"\n") == std::string::npos) return text;
  std::string quoted = "\"";
  for (char c : text) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}

// Markdown: rounded for reading, "-" when absent.
std::string md(const std::optional<double>& v, const char* pattern) { return v ? format(pattern, *v) : "-"; }

std::optional<double> median_field(const std::optional<SampleStats>& s) {
  return s ? std::optional<double>(s->median) : std::nullopt;
}

std::string md_range(const std::optional<SampleStats>& s, const char* pattern) {
  if (!s) return "-";
  if (s->count == 1) return format(pattern, s->median);
  return format(pattern, s->median) + " [" + format(pattern, s->min) + ", " + format(pattern, s->max) + "]";
}

// "[1.19, 1.24]": a speedup's 95 % interval.
std::string interval_text(const SpeedupInterval& interval) {
  return "[" + format("%.2f", interval.low) + ", " + format("%.2f", interval.high) + "]";
}

// "1.21 [1.19, 1.24]": a speedup and its 95 % interval.
std::string speedup_text(const std::optional<double>& speedup, const std::optional<SpeedupInterval>& interval) {
  if (!speedup) return "-";
  return format("%.2f", *speedup) + (interval ? " " + interval_text(*interval) : std::string());
}

json interval_to_json(const std::optional<SpeedupInterval>& interval) {
  if (!interval) return nullptr;
  return json::array({interval->low, interval->high});
}

std::string config_of(const RunSummary& r) { return r.run + (r.simulated ? " †" : ""); }

// "312 / 0.914", or "312 (rule 350) / 0.914" when a budget moved the layers off the
// pattern's own rule (DST), or "-" parts where absent.
std::string kept_keys_text(const RunSummary& r) {
  std::string text = md(r.effective_budget_mean, "%.0f");
  if (r.effective_budget_mean && r.reference_budget_mean &&
      std::llround(*r.effective_budget_mean) != std::llround(*r.reference_budget_mean)) {
    text += " (rule " + md(r.reference_budget_mean, "%.0f") + ")";
  }
  return text + " / " + md(r.coverage_mean, "%.3f");
}

void write_runs_table(const Report& report, std::ostringstream& out) {
  // Context-parallel runs add their CP degree and layout and the worker imbalance.
  const bool any_cp = std::any_of(report.runs.begin(), report.runs.end(), [](const RunSummary& r) { return r.cp > 1; });
  // Tensor-parallel runs add their TP degree to the layout.
  const bool any_tp = std::any_of(report.runs.begin(), report.runs.end(), [](const RunSummary& r) { return r.tp > 1; });
  // Runs on several DP ranks add the imbalance between them (docs/metrics.md).
  const bool any_dp = std::any_of(report.runs.begin(), report.runs.end(), [](const RunSummary& r) { return r.dp > 1; });
  // Runs budgeted in kept keys per query add the keys their layers kept per query
  // (effective_budget_mean), the pattern's own rule's where a budget moved it
  // (reference_budget_mean, under DST), and the pattern's coverage.
  const bool any_kept_keys = std::any_of(report.runs.begin(), report.runs.end(),
                                  [](const RunSummary& r) { return r.kept_keys_budget; });
  // Runs that measured their peak memory add it: the GPU's (allocated / reserved) on
  // CUDA, else the host's resident set, the largest over ranks and iterations.
  const bool any_peak = std::any_of(report.runs.begin(), report.runs.end(),
                                    [](const RunSummary& r) { return r.peak_rss_mb || r.peak_gpu_allocated_mb; });
  // Runs whose device's peak is known (a known GPU, or --peak-tflops) add their model
  // TFLOP/s per GPU and MFU (docs/metrics.md, "Throughput").
  const bool any_mfu = std::any_of(report.runs.begin(), report.runs.end(), [](const RunSummary& r) { return r.mfu; });
  out << "## Runs\n\n"
      << "| config | budget | " << (any_cp ? "dp x pp x cp" : "dp x pp") << (any_tp ? " x tp" : "")
      << " | state | imbalance | "
      << (any_dp ? "DP / slot imbalance | " : "")
      << (any_cp ? "worker imbalance (time / work) | " : "")
      << (any_kept_keys ? "kept keys per query / coverage | " : "")
      << "iteration ms | speedup | overhead ms (%) | bubble (mean / max) | tokens/s | loss final |"
      << (any_peak ? " peak memory MiB |" : "") << (any_mfu ? " TFLOP/s per GPU (MFU) |" : "");
  std::string align = "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|";
  if (any_dp) align += "---:|";
  if (any_cp) align += "---:|";
  if (any_kept_keys) align += "---:|";
  if (any_peak) align += "---:|";
  if (any_mfu) align += "---:|";
  for (const std::string& column : report.accuracy_columns) {
    out << ' ' << column << " |";
    align += "---:|";
  }
  out << '\n' << align << '\n';
  for (const RunSummary& r : report.runs) {
    std::string overhead = md(r.overhead_ms, "%.2f");
    if (r.overhead_pct) overhead += " (" + format("%.2f", *r.overhead_pct) + "%)";
    std::string bubble = "-";
    if (r.bubble_fraction_mean) bubble = format("%.3f", *r.bubble_fraction_mean) + " / " + md(r.bubble_fraction_max, "%.3f");
    const std::string layout = std::to_string(r.dp) + " x " + std::to_string(r.pp) +
                               (any_cp ? " x " + std::to_string(r.cp) + (r.cp > 1 ? " " + r.cp_layout : "") : "") +
                               (any_tp ? " x " + std::to_string(r.tp) : "");
    out << "| " << config_of(r) << " | " << r.budget_text() << " | " << layout << " | " << r.state << " | "
        << md(median_field(r.imbalance), "%.3f") << " | "
        << (any_dp ? md(median_field(r.dp_imbalance), "%.3f") + " / " + md(median_field(r.slot_imbalance), "%.3f") + " | "
                   : "")
        << (any_cp ? md(median_field(r.cp_worker_imbalance), "%.3f") + " / " + md(median_field(r.cp_work_imbalance), "%.3f") + " | " : "")
        << (any_kept_keys ? kept_keys_text(r) + " | " : "")
        << md(median_field(r.iter_ms), "%.2f") << " | "
        << speedup_text(r.speedup, r.speedup_interval) << " | " << overhead << " | " << bubble << " | " << md(r.tokens_per_s, "%.0f")
        << " | " << md(r.loss_final, "%.4f") << " |";
    if (any_peak) {
      out << ' '
          << (r.peak_gpu_allocated_mb ? "GPU " + md(r.peak_gpu_allocated_mb, "%.0f") + " / " + md(r.peak_gpu_reserved_mb, "%.0f")
                                      : "RSS " + md(r.peak_rss_mb, "%.0f"))
          << " |";
    }
    if (any_mfu) {
      out << ' ' << md(r.model_tflops_per_gpu, "%.1f")
          << (r.mfu ? " (" + format("%.1f", 100.0 * *r.mfu) + " %)" : std::string()) << " |";
    }
    for (const std::string& column : report.accuracy_columns) {
      const auto it = r.accuracy.find(column);
      out << ' ' << (it == r.accuracy.end() ? "-" : format("%.4f", it->second)) << " |";
    }
    out << '\n';
  }
  out << "\nimbalance and iteration ms: medians over measured (non-warm-up) iterations; speedup: median "
         "baseline iteration ms / median iteration ms, baseline at the same non-method sweep point, with its 95 % "
         "bootstrap interval over the measured iterations [low, high] (docs/metrics.md).\n";
  if (any_dp) {
    out << "DP / slot imbalance: between DP ranks, max / mean of their summed micro-batch ms, and per pipeline "
           "slot (the j-th micro-batch of every DP rank), averaged over the slots (docs/metrics.md).\n";
  }
}

void write_methods_table(const Report& report, std::ostringstream& out) {
  if (report.methods.empty()) return;
  out << "\n## Methods\n\nComplete runs per method and method sweep values, over the other axes (seeds): "
         "median [min, max]. slot imbalance: Table I's imbalance column, the per-slot imbalance between DP "
         "ranks; micro-batch imbalance: max / mean over the global batch's micro-batches (docs/metrics.md).\n\n"
      << "| method | runs | speedup | speedup 95 % interval | iteration ms | slot imbalance | micro-batch imbalance | "
         "bubble (mean) | overhead ms |";
  std::string align = "|---|---:|---:|---:|---:|---:|---:|---:|---:|";
  for (const std::string& column : report.accuracy_columns) {
    out << ' ' << column << " |";
    align += "---:|";
  }
  out << '\n' << align << '\n';
  for (const MethodAggregate& g : report.methods) {
    const std::string interval = g.speedup_interval ? interval_text(*g.speedup_interval) : "-";
    out << "| " << g.label << " | " << g.runs.size() << " | " << md_range(g.speedup, "%.2f") << " | " << interval << " | "
        << md_range(g.iter_ms, "%.2f") << " | " << md_range(g.slot_imbalance, "%.3f") << " | "
        << md_range(g.imbalance, "%.3f") << " | " << md_range(g.bubble_fraction, "%.3f") << " | " << md_range(g.overhead_ms, "%.2f") << " |";
    for (const std::string& column : report.accuracy_columns) {
      const auto it = g.accuracy.find(column);
      out << ' ' << (it == g.accuracy.end() ? "-" : md_range(it->second, "%.4f")) << " |";
    }
    out << '\n';
  }
}

void write_ablation_tables(const Report& report, std::ostringstream& out) {
  for (const AblationTable& t : report.ablation) {
    out << "\n## DST ablation: " << t.method
        << "\n\nMedians over the complete runs at each anchor and p; speedups with their 95 % interval.\n";
    for (size_t m = 0; m < t.metrics.size(); ++m) {
      out << "\n" << t.metrics[m] << ":\n\n| anchor \\ p |";
      std::string align = "|---|";
      for (double p : t.ps) {
        out << ' ' << format("%g", p) << " |";
        align += "---:|";
      }
      out << '\n' << align << '\n';
      const char* pattern = t.metrics[m] == "imbalance" ? "%.3f" : t.metrics[m] == "speedup" ? "%.2f" : "%.4f";
      for (size_t a = 0; a < t.anchors.size(); ++a) {
        out << "| " << t.anchors[a] << " |";
        for (size_t p = 0; p < t.ps.size(); ++p) {
          out << ' '
              << (t.metrics[m] == "speedup" ? speedup_text(t.values[m][a][p], t.speedup_intervals[a][p])
                                            : md(t.values[m][a][p], pattern))
              << " |";
        }
        out << '\n';
      }
    }
  }
}

}  // namespace

std::vector<std::string> interval_notes(const std::vector<MethodAggregate>& methods) {
  std::vector<std::string> notes;
  std::vector<const MethodAggregate*> measured;
  for (const MethodAggregate& g : methods) {
    if (g.is_baseline || !g.speedup_interval) continue;
    measured.push_back(&g);
    if (g.speedup_interval->includes(1.0)) {
      notes.push_back(g.label + ": its speedup's 95 % interval " + interval_text(*g.speedup_interval) +
                      " includes 1.0: not distinguishable from the baseline in these runs.");
    }
  }
  // One sentence per method, naming the methods after it whose intervals overlap its own.
  for (size_t a = 0; a < measured.size(); ++a) {
    std::string others;
    for (size_t b = a + 1; b < measured.size(); ++b) {
      if (!measured[a]->speedup_interval->overlaps(*measured[b]->speedup_interval)) continue;
      others += (others.empty() ? "" : ", ") + measured[b]->label + " " + interval_text(*measured[b]->speedup_interval);
    }
    if (others.empty()) continue;
    notes.push_back(measured[a]->label + " " + interval_text(*measured[a]->speedup_interval) + " overlaps " + others +
                    ": the speedup differences between them are within the noise.");
  }
  return notes;
}

namespace {

json interleave_to_json(const std::optional<RunSummary::Interleaving>& interleave) {
  if (!interleave) return nullptr;
  json blocks = json::array();
  for (const auto& [block, wait] : interleave->block_wait_ms) {
    blocks.push_back({{"block", block}, {"runqueue_wait_pct", wait.second > 0 ? json(100.0 * wait.first / wait.second) : json()}});
  }
  return {{"block_iterations", interleave->block_iterations}, {"runs", interleave->runs}, {"blocks", blocks}};
}

}  // namespace

std::vector<std::string> imbalance_layout_notes(const std::vector<RunSummary>& runs) {
  std::vector<std::string> one_dp, one_sample;
  size_t complete = 0;
  for (const RunSummary& r : runs) {
    if (!r.complete()) continue;
    ++complete;
    if (r.dp == 1) one_dp.push_back(r.run);
    if (r.max_samples_per_microbatch == 1) one_sample.push_back(r.run);
  }
  const auto which = [complete](const std::vector<std::string>& names) {
    if (names.size() == complete) return std::string("every run here");
    std::string text;
    for (const std::string& name : names) text += (text.empty() ? "" : ", ") + name;
    return text;
  };
  std::vector<std::string> notes;
  if (!one_dp.empty()) {
    notes.push_back("Slot imbalance (Table I's imbalance column) is 1 by construction with one DP rank: this layout "
                    "cannot show what balancing between DP ranks does (Table I's has dp 2). dp 1: " +
                    which(one_dp) + ".");
  }
  if (!one_sample.empty()) {
    notes.push_back("With one sample per micro-batch (train.max_samples_per_microbatch 1) no batching changes the "
                    "micro-batches: their micro-batch imbalance moves only with the attention budgets (DST). "
                    "One sample per micro-batch: " + which(one_sample) + ".");
  }
  return notes;
}

std::vector<std::string> contention_notes(const std::vector<RunSummary>& runs) {
  std::vector<const RunSummary*> contended;
  for (const RunSummary& r : runs) {
    if (r.runqueue_wait_pct && *r.runqueue_wait_pct > kContendedRunqueueWaitPct) contended.push_back(&r);
  }
  const auto pct = [](double value) {
    char text[32];
    std::snprintf(text, sizeof(text), "%.1f%%", value);
    return std::string(text);
  };
  if (contended.empty()) return {};
  if (contended.size() == 1) {
    const RunSummary& r = *contended.front();
    return {"WARNING: " + r.run + ": its ranks waited " + pct(*r.runqueue_wait_pct) +
            " of their time for a free CPU core (runqueue_wait_pct): other processes shared the machine, so its "
            "timings, and speedups measured against it, are stretched. Rerun it on an otherwise idle machine "
            "(`run --only " + r.run + " --force`)."};
  }
  std::string which;
  for (const RunSummary* r : contended) which += (which.empty() ? "" : ", ") + r->run + " " + pct(*r->runqueue_wait_pct);
  return {"WARNING: " + std::to_string(contended.size()) + " runs' ranks waited more than " +
          pct(kContendedRunqueueWaitPct) + " of their time for a free CPU core (runqueue_wait_pct): " + which +
          ". Other processes shared the machine, so their timings, and speedups measured against them, are "
          "stretched. Rerun them on an otherwise idle machine (`run --force`)."};
}

std::vector<std::string> interleave_notes(const std::vector<RunSummary>& runs) {
  std::vector<std::string> notes;
  std::set<std::vector<std::string>> written;
  for (const RunSummary& first : runs) {
    if (!first.interleave || !written.insert(first.interleave->runs).second) continue;
    const RunSummary::Interleaving& group = *first.interleave;
    std::map<int64_t, std::pair<double, double>> blocks;  // over every run of the group found here
    for (const RunSummary& r : runs) {
      if (!r.interleave || r.interleave->runs != group.runs) continue;
      for (const auto& [block, wait] : r.interleave->block_wait_ms) {
        blocks[block].first += wait.first;
        blocks[block].second += wait.second;
      }
    }
    std::string names;
    for (const std::string& run : group.runs) names += (names.empty() ? "" : ", ") + run;
    std::string note = names + " trained interleaved, taking turns in blocks of " +
                       std::to_string(group.block_iterations) +
                       (group.block_iterations == 1 ? " iteration" : " iterations") + " in alternating order (ABBA)";
    std::vector<double> pct;
    for (const auto& [block, wait] : blocks) {
      if (wait.second > 0) pct.push_back(100.0 * wait.first / wait.second);
    }
    if (!pct.empty()) {
      const double median = median_of(pct);
      const auto [low, high] = std::minmax_element(pct.begin(), pct.end());
      char text[160];
      std::snprintf(text, sizeof(text), "; their ranks' run-queue wait per block: median %.1f %%, %.1f-%.1f %% over %zu blocks",
                    median, *low, *high, pct.size());
      note += text;
    }
    notes.push_back(note + ".");
  }
  return notes;
}

namespace {

void write_notes(const Report& report, std::ostringstream& out) {
  std::vector<std::string> notes;
  bool any_simulated = false;
  for (const RunSummary& r : report.runs) any_simulated = any_simulated || r.simulated;
  if (any_simulated) {
    notes.push_back("† simulated run: its timings come from the simulator's latency model, not from a "
                    "measurement.");
  }
  for (const RunSummary& r : report.runs) {
    if (!r.records_problem.empty()) {
      notes.push_back("ERROR: " + r.run + ": its records fail the check (" + r.records_problem +
                      "): none of its numbers are shown. Rerun it: `sparsebalance " +
                      std::string(r.simulated ? "simulate" : "run") + " <manifest> --only " + r.run + " --force`.");
    } else if (!r.complete()) {
      notes.push_back(r.run + " is incomplete (no status.json): left out of the aggregates.");
    }
  }
  for (const RunSummary& r : report.runs) {
    if (!r.speedup && !r.speedup_note.empty()) notes.push_back(r.run + ": no speedup: " + r.speedup_note + ".");
  }
  for (const std::string& note : interval_notes(report.methods)) notes.push_back(note);
  for (const std::string& note : imbalance_layout_notes(report.runs)) notes.push_back(note);
  for (const std::string& note : interleave_notes(report.runs)) notes.push_back(note);
  for (const std::string& note : contention_notes(report.runs)) notes.push_back(note);
  for (const std::string& s : report.skipped) notes.push_back("skipped " + s + ".");
  if (notes.empty()) return;
  out << "\n## Notes\n\n";
  for (const std::string& note : notes) out << "- " << note << '\n';
}

std::string joined(const json& values) {
  std::string text;
  for (const auto& v : values) text += (text.empty() ? "" : ", ") + (v.is_string() ? v.get<std::string>() : v.dump());
  return text;
}

void write_context(const Report& report, std::ostringstream& out) {
  const ReportProvenance& p = report.provenance;
  out << "\n## Context\n\n"
      << "- report: generated " << p.generated_at_utc << " by sparsebalance " << p.version << " (" << p.git_sha
      << (p.git_dirty ? ", uncommitted changes" : "") << ", " << p.build_type << ")\n";
  const std::vector<std::string> shas = report.git_shas();
  if (shas.size() > 1) {
    out << "- WARNING: the runs were built from " << shas.size() << " different commits:";
    for (const std::string& sha : shas) {
      std::string names;
      for (const RunSummary& r : report.runs) {
        if (r.git_sha == sha) names += (names.empty() ? "" : ", ") + r.run;
      }
      out << ' ' << sha << " (" << names << ");";
    }
    out << '\n';
  }
  for (const auto& [key, values] : report.distinct_context.items()) {
    out << "- " << key << ": " << joined(values) << '\n';
  }
}

}  // namespace

json run_summary_to_json(const RunSummary& r) {
  json dst = nullptr;
  if (r.dst_anchor && r.dst_p) dst = {{"anchor", *r.dst_anchor}, {"p", *r.dst_p}, {"raise", r.dst_raise.value_or("anchor")}};
  json accuracy = json::object();
  for (const auto& [column, value] : r.accuracy) accuracy[column] = value;
  return {{"run", r.run},
          {"method", r.method},
          {"baseline_method", or_null(r.baseline_method)},
          {"is_baseline", r.is_baseline},
          {"sweep_point", r.sweep_point},
          {"seed", or_null(r.seed)},
          {"attention", r.attention},
          {"batching", r.batching},
          {"budget", r.budget},
          {"dst", dst},
          {"dp", r.dp},
          {"pp", r.pp},
          {"cp", r.cp},
          {"tp", r.tp},
          {"cp_layout", r.cp_layout.empty() ? json(nullptr) : json(r.cp_layout)},
          {"state", r.state},
          {"records_problem", r.records_problem.empty() ? json(nullptr) : json(r.records_problem)},
          {"simulated", r.simulated},
          {"profile_kind", or_null(r.profile_kind)},
          {"git_sha", r.git_sha},
          {"iterations_recorded", r.iterations_recorded},
          {"iterations_measured", r.iterations_measured},
          {"iter_ms", spread_to_json(r.iter_ms)},
          // The Table I column under its flat name (the same number as iter_ms.median).
          {"iter_ms_median", r.iter_ms ? json(r.iter_ms->median) : json(nullptr)},
          {"speedup", or_null(r.speedup)},
          {"speedup_interval", interval_to_json(r.speedup_interval)},
          {"speedup_baseline_run", r.speedup_baseline_run.empty() ? json(nullptr) : json(r.speedup_baseline_run)},
          {"speedup_note", r.speedup_note.empty() ? json(nullptr) : json(r.speedup_note)},
          {"imbalance", spread_to_json(r.imbalance)},
          {"dp_imbalance", spread_to_json(r.dp_imbalance)},
          {"slot_imbalance", spread_to_json(r.slot_imbalance)},
          {"cp_worker_imbalance", spread_to_json(r.cp_worker_imbalance)},
          {"cp_work_imbalance", spread_to_json(r.cp_work_imbalance)},
          {"bubble_fraction", r.bubble_fraction_mean ? json{{"mean", *r.bubble_fraction_mean},
                                                             {"max", or_null(r.bubble_fraction_max)}}
                                                     : json(nullptr)},
          {"overhead_ms", or_null(r.overhead_ms)},
          {"overhead_pct", or_null(r.overhead_pct)},
          {"allreduce_ms", or_null(r.allreduce_ms)},
          {"tokens_per_s", or_null(r.tokens_per_s)},
          {"loss_first", or_null(r.loss_first)},
          {"loss_final", or_null(r.loss_final)},
          {"coverage_mean", or_null(r.coverage_mean)},
          {"budget_mean", or_null(r.budget_mean)},
          {"effective_budget_mean", or_null(r.effective_budget_mean)},
          {"reference_budget_mean", or_null(r.reference_budget_mean)},
          {"prediction_mape", or_null(r.prediction_mape)},
          {"runqueue_wait_pct", or_null(r.runqueue_wait_pct)},
          {"interleave", interleave_to_json(r.interleave)},
          {"model_tflops_per_gpu", or_null(r.model_tflops_per_gpu)},
          {"peak_tflops", or_null(r.peak_tflops)},
          {"mfu", or_null(r.mfu)},
          {"peak_rss_mb", or_null(r.peak_rss_mb)},
          {"peak_gpu_allocated_mb", or_null(r.peak_gpu_allocated_mb)},
          {"peak_gpu_reserved_mb", or_null(r.peak_gpu_reserved_mb)},
          {"accuracy", accuracy}};
}

json report_to_json(const Report& report) {
  json runs = json::array();
  for (const RunSummary& r : report.runs) runs.push_back(run_summary_to_json(r));
  json methods = json::array();
  for (const MethodAggregate& g : report.methods) {
    json accuracy = json::object();
    for (const auto& [column, stats] : g.accuracy) accuracy[column] = range_to_json(stats);
    methods.push_back({{"label", g.label},
                       {"method", g.method},
                       {"method_point", g.method_point},
                       {"is_baseline", g.is_baseline},
                       {"count", g.runs.size()},
                       {"runs", g.runs},
                       {"speedup", range_to_json(g.speedup)},
                       {"speedup_interval", interval_to_json(g.speedup_interval)},
                       {"iter_ms", range_to_json(g.iter_ms)},
                       {"imbalance", range_to_json(g.imbalance)},
                       {"slot_imbalance", range_to_json(g.slot_imbalance)},
                       {"bubble_fraction", range_to_json(g.bubble_fraction)},
                       {"overhead_ms", range_to_json(g.overhead_ms)},
                       {"accuracy", accuracy}});
  }
  json ablation = json::array();
  for (const AblationTable& t : report.ablation) ablation.push_back(ablation_table_to_json(t));
  json contexts = json::object();
  for (const RunSummary& r : report.runs) contexts[r.run] = r.context;
  const ReportProvenance& p = report.provenance;
  const std::vector<std::string> shas = report.git_shas();
  return {{"manifest", report.manifest},
          {"accuracy_columns", report.accuracy_columns},
          {"runs", runs},
          {"methods", methods},
          {"ablation", ablation},
          {"skipped", report.skipped},
          {"context",
           {{"generated_at_utc", p.generated_at_utc},
            {"sparsebalance", {{"version", p.version}, {"git_sha", p.git_sha}, {"git_dirty", p.git_dirty},
                               {"build_type", p.build_type}}},
            {"git_shas", shas},
            {"git_shas_differ", shas.size() > 1},
            {"distinct", report.distinct_context},
            {"runs", contexts}}}};
}

std::string report_to_csv(const Report& report) {
  using Column = std::pair<const char*, std::function<std::string(const RunSummary&)>>;
  auto number = [](std::function<std::optional<double>(const RunSummary&)> get) {
    return [get](const RunSummary& r) { return csv_number(get(r)); };
  };
  auto spread = [](std::optional<SampleStats> RunSummary::*field, double SampleStats::*part) {
    return [field, part](const RunSummary& r) {
      const auto& s = r.*field;
      return s ? csv_number((*s).*part) : std::string();
    };
  };
  const std::vector<Column> columns = {
      {"run", [](const RunSummary& r) { return r.run; }},
      {"method", [](const RunSummary& r) { return r.method; }},
      {"attention", [](const RunSummary& r) { return r.attention; }},
      {"batching", [](const RunSummary& r) { return r.batching; }},
      {"budget", [](const RunSummary& r) { return r.budget; }},
      {"dst_anchor", [](const RunSummary& r) { return r.dst_anchor.value_or(""); }},
      {"dst_p", number([](const RunSummary& r) { return r.dst_p; })},
      {"dst_raise", [](const RunSummary& r) { return r.dst_raise.value_or(""); }},
      {"dp", [](const RunSummary& r) { return std::to_string(r.dp); }},
      {"pp", [](const RunSummary& r) { return std::to_string(r.pp); }},
      {"cp", [](const RunSummary& r) { return std::to_string(r.cp); }},
      {"tp", [](const RunSummary& r) { return std::to_string(r.tp); }},
      {"cp_layout", [](const RunSummary& r) { return r.cp_layout; }},
      {"seed", [](const RunSummary& r) { return r.seed ? std::to_string(*r.seed) : std::string(); }},
      {"state", [](const RunSummary& r) { return r.state; }},
      {"simulated", [](const RunSummary& r) { return std::string(r.simulated ? "true" : "false"); }},
      {"profile_kind", [](const RunSummary& r) { return r.profile_kind.value_or(""); }},
      {"iterations_recorded", [](const RunSummary& r) { return std::to_string(r.iterations_recorded); }},
      {"iterations_measured", [](const RunSummary& r) { return std::to_string(r.iterations_measured); }},
      {"iter_ms_median", spread(&RunSummary::iter_ms, &SampleStats::median)},
      {"iter_ms_min", spread(&RunSummary::iter_ms, &SampleStats::min)},
      {"iter_ms_max", spread(&RunSummary::iter_ms, &SampleStats::max)},
      {"iter_ms_p25", spread(&RunSummary::iter_ms, &SampleStats::p25)},
      {"iter_ms_p75", spread(&RunSummary::iter_ms, &SampleStats::p75)},
      {"speedup", number([](const RunSummary& r) { return r.speedup; })},
      {"speedup_low", number([](const RunSummary& r) {
         return r.speedup_interval ? std::optional<double>(r.speedup_interval->low) : std::nullopt;
       })},
      {"speedup_high", number([](const RunSummary& r) {
         return r.speedup_interval ? std::optional<double>(r.speedup_interval->high) : std::nullopt;
       })},
      {"speedup_baseline_run", [](const RunSummary& r) { return r.speedup_baseline_run; }},
      {"imbalance_median", spread(&RunSummary::imbalance, &SampleStats::median)},
      {"imbalance_min", spread(&RunSummary::imbalance, &SampleStats::min)},
      {"imbalance_max", spread(&RunSummary::imbalance, &SampleStats::max)},
      {"imbalance_p25", spread(&RunSummary::imbalance, &SampleStats::p25)},
      {"imbalance_p75", spread(&RunSummary::imbalance, &SampleStats::p75)},
      {"dp_imbalance_median", spread(&RunSummary::dp_imbalance, &SampleStats::median)},
      {"slot_imbalance_median", spread(&RunSummary::slot_imbalance, &SampleStats::median)},
      {"cp_worker_imbalance_median", spread(&RunSummary::cp_worker_imbalance, &SampleStats::median)},
      {"cp_work_imbalance_median", spread(&RunSummary::cp_work_imbalance, &SampleStats::median)},
      {"bubble_fraction_mean", number([](const RunSummary& r) { return r.bubble_fraction_mean; })},
      {"bubble_fraction_max", number([](const RunSummary& r) { return r.bubble_fraction_max; })},
      {"overhead_ms", number([](const RunSummary& r) { return r.overhead_ms; })},
      {"overhead_pct", number([](const RunSummary& r) { return r.overhead_pct; })},
      {"allreduce_ms", number([](const RunSummary& r) { return r.allreduce_ms; })},
      {"tokens_per_s", number([](const RunSummary& r) { return r.tokens_per_s; })},
      {"loss_first", number([](const RunSummary& r) { return r.loss_first; })},
      {"loss_final", number([](const RunSummary& r) { return r.loss_final; })},
      {"coverage_mean", number([](const RunSummary& r) { return r.coverage_mean; })},
      {"budget_mean", number([](const RunSummary& r) { return r.budget_mean; })},
      {"effective_budget_mean", number([](const RunSummary& r) { return r.effective_budget_mean; })},
      {"reference_budget_mean", number([](const RunSummary& r) { return r.reference_budget_mean; })},
      {"prediction_mape", number([](const RunSummary& r) { return r.prediction_mape; })},
      {"runqueue_wait_pct", number([](const RunSummary& r) { return r.runqueue_wait_pct; })},
      {"git_sha", [](const RunSummary& r) { return r.git_sha; }},
  };
  std::ostringstream out;
  bool first = true;
  for (const Column& c : columns) {
    out << (first ? "" : ",") << c.first;
    first = false;
  }
  for (const std::string& column : report.accuracy_columns) out << ',' << csv_text(column);
  out << '\n';
  for (const RunSummary& r : report.runs) {
    first = true;
    for (const Column& c : columns) {
      out << (first ? "" : ",") << csv_text(c.second(r));
      first = false;
    }
    for (const std::string& column : report.accuracy_columns) {
      const auto it = r.accuracy.find(column);
      out << ',' << (it == r.accuracy.end() ? "" : csv_number(it->second));
    }
    out << '\n';
  }
  return out.str();
}

std::string report_to_markdown(const Report& report) {
  std::ostringstream out;
  int complete = 0;
  for (const RunSummary& r : report.runs) complete += r.complete() ? 1 : 0;
  out << "# " << report.manifest << "\n\n"
      << report.runs.size() << " runs, " << complete
      << " complete. Medians and rates exclude warm-up iterations; definitions: docs/reports.md.\n\n";
  write_runs_table(report, out);
  write_methods_table(report, out);
  write_ablation_tables(report, out);
  write_notes(report, out);
  write_context(report, out);
  return out.str();
}

}  // namespace sb
