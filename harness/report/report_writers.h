#pragma once
// The report's three writers: JSON (everything, nulls for absent values), CSV (one flat
// row per run, empty cells for absent values) and Markdown (a Table I style table, the
// per-method aggregates, the ablation grids, notes and context; "-" for absent values).
// Numbers in CSV keep 10 significant digits; Markdown rounds for reading.

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "harness/report/report.h"

namespace sb {

nlohmann::json report_to_json(const Report& report);
nlohmann::json run_summary_to_json(const RunSummary& run);
std::string report_to_csv(const Report& report);
std::string report_to_markdown(const Report& report);

// The report's sentences on its methods' speedup intervals (speedup_interval.h): a
// method whose interval includes 1.0, and for each method the later ones whose intervals
// overlap its own (one sentence per method).
std::vector<std::string> interval_notes(const std::vector<MethodAggregate>& methods);

// Sentences on what a report's layouts let the imbalance columns show: slot imbalance
// (Table I's column) cannot move with one DP rank; micro-batch imbalance cannot move
// with batching at one sample per micro-batch. Each names its complete runs.
std::vector<std::string> imbalance_layout_notes(const std::vector<RunSummary>& runs);

// The runs whose run-queue wait passed kContendedRunqueueWaitPct (run_summary.h): one
// WARNING naming the run and its rerun command, or one naming them all.
std::vector<std::string> contention_notes(const std::vector<RunSummary>& runs);

// One sentence per group of runs that trained interleaved (RunSummary::interleave): the
// block length and order, and the run-queue wait per block over the group's measured
// iterations (median and range, % of the ranks' time), so that a reader sees whether the
// machine was busier in some blocks than in others.
std::vector<std::string> interleave_notes(const std::vector<RunSummary>& runs);

}  // namespace sb
