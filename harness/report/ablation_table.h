#pragma once
// The DST ablation: for each method whose runs sweep methods.dst.anchor and/or
// methods.dst.p, a grid values[metric][anchor][p] of medians over the complete runs
// at that (anchor, p) (over seeds and other axes), for the metrics "speedup",
// "imbalance" (the runs' median imbalance) and every accuracy column; null where no run
// has the value. Anchors are ordered min, mean, max (then any other by name), p
// ascending; both come from the runs' resolved manifests, so an axis that is not swept
// still has its one value.

#include <optional>
#include <string>
#include <vector>

#include "harness/report/run_summary.h"

namespace sb {

struct AblationTable {
  std::string method;
  std::vector<std::string> anchors;
  std::vector<double> ps;
  std::vector<std::string> metrics;
  // values[metric][anchor][p], indices as in metrics, anchors, ps.
  std::vector<std::vector<std::vector<std::optional<double>>>> values;
  std::vector<std::vector<int64_t>> runs;  // complete runs per [anchor][p]
  // [anchor][p]: the speedup's 95 % interval over the cell's runs (report_aggregate.h).
  std::vector<std::vector<std::optional<SpeedupInterval>>> speedup_intervals;
};

std::vector<AblationTable> build_ablation_tables(const std::vector<RunSummary>& runs);

nlohmann::json ablation_table_to_json(const AblationTable& table);

}  // namespace sb
