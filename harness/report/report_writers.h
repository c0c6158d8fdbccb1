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

}  // namespace sb
