#include "harness/sim/allreduce_fit.h"

#include <algorithm>
#include <map>
#include <stdexcept>

#include "harness/common/errors.h"
#include "harness/config/manifest.h"
#include "harness/sim/measured_runs.h"
#include "harness/sim/run_simulator.h"
#include "harness/trace/timeline.h"
#include "harness/train/iteration_record.h"

namespace sb {
namespace {

// The stage's DP ring: the latest entry into and the latest exit from its all-reduce
// event over the DP ranks, and how many ranks took part.
struct StageRing {
  double last_entry_ms = 0;
  double last_exit_ms = 0;
  int64_t ranks = 0;
};

}  // namespace

std::vector<AllreduceObservation> allreduce_observations(const std::filesystem::path& run_dir) {
  std::map<int64_t, bool> warmup;
  for (const IterationRecord& r : read_iteration_records(run_dir / "records.jsonl")) warmup[r.iteration] = r.warmup;
  const std::filesystem::path manifest_file = run_dir / "manifest.resolved.json";
  std::vector<double> stage_bytes;
  try {
    for (double params : stage_trained_parameters(load_manifest(manifest_file))) stage_bytes.push_back(4.0 * params);
  } catch (const ConfigError&) {
    throw;
  } catch (const std::exception& e) {
    throw ConfigError(manifest_file.string(), "", std::string("cannot be read as a manifest: ") + e.what(),
                      "point fit_from at the results of `sparsebalance run`");
  }
  std::vector<AllreduceObservation> out;
  for (const TimelineIteration& iteration : read_timeline_events(run_dir / "timeline_events.jsonl")) {
    const auto flag = warmup.find(iteration.iteration);
    if (flag == warmup.end() || flag->second) continue;  // warm-up, or no record (interrupted)
    std::map<int64_t, StageRing> rings;
    for (const RankTimeline& rank : iteration.ranks) {
      for (const TimelineEvent& e : rank.events) {
        if (e.kind != EventKind::kAllReduce) continue;
        StageRing& ring = rings[rank.stage];
        ring.last_entry_ms = ring.ranks == 0 ? e.start_ms : std::max(ring.last_entry_ms, e.start_ms);
        ring.last_exit_ms = ring.ranks == 0 ? e.end_ms : std::max(ring.last_exit_ms, e.end_ms);
        ++ring.ranks;
      }
    }
    for (const auto& [stage, ring] : rings) {
      if (ring.ranks < 2 || stage < 0 || stage >= static_cast<int64_t>(stage_bytes.size())) continue;
      out.push_back({ring.last_exit_ms - ring.last_entry_ms, ring.ranks, stage_bytes[static_cast<size_t>(stage)]});
    }
  }
  return out;
}

AllreduceFit fit_allreduce_bandwidth(const std::vector<AllreduceObservation>& observations, double alpha_us) {
  if (observations.empty()) throw std::invalid_argument("no all-reduce observations to fit");
  double payload_bits = 0, transfer_ms = 0, total_ms = 0;
  for (const AllreduceObservation& o : observations) {
    const auto n = static_cast<double>(o.ranks);
    payload_bits += 2.0 * (n - 1.0) / n * o.bytes * 8.0;
    transfer_ms += o.ms - 2.0 * (n - 1.0) * alpha_us / 1000.0;
    total_ms += o.ms;
  }
  if (transfer_ms <= 0) {
    throw std::invalid_argument("the latency terms 2 (n - 1) alpha alone take as long as the measured all-reduces");
  }
  AllreduceFit fit;
  fit.bandwidth_gbps = payload_bits / (transfer_ms / 1000.0) / 1e9;
  fit.samples = static_cast<int64_t>(observations.size());
  fit.mean_ms = total_ms / static_cast<double>(observations.size());
  return fit;
}

AllreduceFit fit_allreduce_from_results(const std::filesystem::path& results_dir, double alpha_us,
                                        const std::string& manifest_file, const std::string& json_path) {
  std::vector<AllreduceObservation> all;
  std::vector<std::string> runs;
  for (const auto& dir : measured_run_dirs(results_dir, manifest_file, json_path)) {
    const std::vector<AllreduceObservation> observations = allreduce_observations(dir);
    if (observations.empty()) continue;
    all.insert(all.end(), observations.begin(), observations.end());
    runs.push_back(dir.string());
  }
  if (all.empty()) {
    throw ConfigError(manifest_file, json_path,
                      "found no measured run under " + results_dir.string() +
                          " with a data-parallel all-reduce (2 or more DP ranks) in a measured iteration",
                      "point it at the results of a `sparsebalance run` with parallelism.dp >= 2, or give "
                      "bandwidth_gbps instead");
  }
  try {
    AllreduceFit fit = fit_allreduce_bandwidth(all, alpha_us);
    fit.runs = std::move(runs);
    return fit;
  } catch (const std::invalid_argument& e) {
    throw ConfigError(manifest_file, json_path,
                      std::string(e.what()) + " under " + results_dir.string() + " (alpha_us " +
                          std::to_string(alpha_us) + ")",
                      "lower intra_node.alpha_us");
  }
}

}  // namespace sb
