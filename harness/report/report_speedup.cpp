#include "harness/report/report_speedup.h"

#include "harness/report/report_aggregate.h"

#include <string>

namespace sb {
namespace {

bool is_method_axis(const std::string& path) { return path.rfind("methods.", 0) == 0; }

bool covers(const nlohmann::json& a, const nlohmann::json& b) {
  for (const auto& [path, value] : a.items()) {
    if (is_method_axis(path)) continue;
    if (!b.contains(path) || b.at(path) != value) return false;
  }
  return true;
}

}  // namespace

bool same_non_method_point(const nlohmann::json& a, const nlohmann::json& b) {
  return covers(a, b) && covers(b, a);
}

void attach_speedups(std::vector<RunSummary>& runs) {
  for (RunSummary& run : runs) {
    run.speedup.reset();
    run.speedup_interval.reset();
    run.speedup_baseline_run.clear();
    run.speedup_note.clear();
    if (!run.baseline_method) {
      run.speedup_note = "context.json names no baseline method (experiment.baseline)";
      continue;
    }
    const RunSummary* baseline = nullptr;
    for (const RunSummary& candidate : runs) {
      if (candidate.method == *run.baseline_method &&
          same_non_method_point(candidate.sweep_point, run.sweep_point)) {
        baseline = &candidate;
        break;
      }
    }
    if (baseline == nullptr) {
      run.speedup_note = "no run of the baseline method " + *run.baseline_method + " at sweep point " +
                         run.sweep_point.dump();
      continue;
    }
    run.speedup_baseline_run = baseline->run;
    if (!baseline->complete()) {
      run.speedup_note = "baseline run " + baseline->run + " is incomplete";
    } else if (!baseline->iter_ms || baseline->iter_ms->median <= 0) {
      run.speedup_note = "baseline run " + baseline->run + " has no measured iteration";
    } else if (!run.iter_ms || run.iter_ms->median <= 0) {
      run.speedup_note = "no measured iteration";
    } else {
      run.speedup = baseline->iter_ms->median / run.iter_ms->median;
      // The run alone, by the same rule as a method's runs (pairing, seed, its own baseline).
      run.speedup_interval = speedup_interval_over({&run}, runs);
    }
  }
}

}  // namespace sb
