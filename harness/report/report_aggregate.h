#pragma once
// Per-method aggregates: complete runs grouped by (method, values of the "methods.*"
// sweep axes), aggregated over the other axes (seeds, data, ...). Each statistic is
// over the runs' own values: speedup, median iter_ms, median imbalance, mean bubble
// fraction, median overhead ms, and every accuracy column; median/min/max/count, and
// count says how many runs had the value. Incomplete runs are left out (partial
// timings); the report lists them.

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "harness/report/run_summary.h"

namespace sb {

struct MethodAggregate {
  std::string label;   // "sab_dst" or "sab_dst (anchor=mean, p=0.1)"
  std::string method;
  nlohmann::json method_point = nlohmann::json::object();  // the "methods.*" sweep values
  bool is_baseline = false;
  std::vector<std::string> runs;
  std::optional<SampleStats> speedup;
  // 95 % interval of the median speedup over the runs (speedup_interval.h: runs and their
  // iterations resampled); [1, 1] for the baseline; none unless every run has a speedup.
  std::optional<SpeedupInterval> speedup_interval;
  std::optional<SampleStats> iter_ms;
  std::optional<SampleStats> imbalance;
  // Table I's imbalance column (docs/metrics.md, "Imbalance between DP ranks"): over the
  // runs' median slot imbalance; none when no run has one.
  std::optional<SampleStats> slot_imbalance;
  std::optional<SampleStats> bubble_fraction;
  std::optional<SampleStats> overhead_ms;
  std::map<std::string, SampleStats> accuracy;
};

// Groups in order of their first run by name, the baseline method's first.
std::vector<MethodAggregate> aggregate_methods(const std::vector<RunSummary>& runs);

// The 95 % interval of the median speedup over `members` (speedup_interval.h), each
// against its baseline run in `all`: [1, 1] when every member is its own baseline, none
// unless every member has a speedup and measured iterations.
std::optional<SpeedupInterval> speedup_interval_over(const std::vector<const RunSummary*>& members,
                                                     const std::vector<RunSummary>& all);

// The "methods.*" axes of a sweep point.
nlohmann::json method_axes_of(const nlohmann::json& sweep_point);

}  // namespace sb
