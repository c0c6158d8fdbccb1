#include "harness/sim/fit/iteration_overhead_fit.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>
#include <stdexcept>

#include "common/errors.h"
#include "common/statistics.h"
#include "harness/records/measured_runs.h"
#include "harness/trace/timeline.h"

namespace sb {
namespace {

// Events the simulator models itself: compute, pipeline transfers and waits, the
// all-reduce (with its wait for the slowest rank), the planner call and its
// observation exchange.
bool modelled(EventKind kind) {
  switch (kind) {
    case EventKind::kForward:
    case EventKind::kBackward:
    case EventKind::kRecvWait:
    case EventKind::kSendWait:
    case EventKind::kAllReduce:
    case EventKind::kPlan:
    case EventKind::kPlanExchange:
      return true;
    case EventKind::kData:
    case EventKind::kOptimizer:
    case EventKind::kRingCompute:  // inside a forward or backward, already counted
    case EventKind::kRingWait:
    case EventKind::kTensorParallel:
      return false;
  }
  return false;
}

}  // namespace

std::vector<double> iteration_overhead_samples(const std::filesystem::path& run_dir) {
  std::vector<double> samples;
  for (const TimelineIteration& iteration : measured_timeline_iterations(run_dir)) {
    std::map<int64_t, double> least_of_dp_rank;
    for (const RankTimeline& rank : iteration.ranks) {
      double ms = rank.end_ms - rank.start_ms;
      for (const TimelineEvent& e : rank.events) {
        if (modelled(e.kind)) ms -= e.duration_ms();
      }
      const auto [it, fresh] = least_of_dp_rank.emplace(rank.dp_rank, ms);
      if (!fresh) it->second = std::min(it->second, ms);
    }
    for (const auto& [dp_rank, ms] : least_of_dp_rank) samples.push_back(ms);
  }
  return samples;
}

IterationOverheadFit fit_iteration_overhead_from_results(const std::filesystem::path& results_dir,
                                                         const std::string& manifest_file,
                                                         const std::string& json_path) {
  IterationOverheadFit fit;
  MeasuredObservations<double> observed = observe_measured_runs<double>(
      results_dir, manifest_file, json_path, [](const std::filesystem::path& dir) { return iteration_overhead_samples(dir); });
  if (observed.all.empty()) {
    throw ConfigError(manifest_file, json_path,
                      "found no measured run under " + results_dir.string() +
                          " with a measured iteration in timeline_events.jsonl",
                      "point it at the results of a `sparsebalance run` that completed past its warm-up, or give "
                      "ms instead");
  }
  fit.samples = static_cast<int64_t>(observed.all.size());
  fit.ms = sample_stats(std::move(observed.all))->mean;
  fit.runs = std::move(observed.runs);
  return fit;
}

}  // namespace sb
