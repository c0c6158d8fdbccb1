#include "harness/sim/fit/ring_compute_fit.h"

#include <cmath>
#include <map>
#include <tuple>
#include <stdexcept>

#include "common/errors.h"
#include "harness/config/manifest.h"
#include "harness/patterns/attention_patterns.h"
#include "harness/records/iteration_record.h"
#include "harness/sim/cp_stage_compute.h"
#include "harness/records/measured_runs.h"
#include "harness/trace/timeline.h"
#include "harness/config/stored_manifest.h"

namespace sb {
namespace {

// (DP rank, index in its list, CP rank) -> the compute of the micro-batch's forward and
// backward events on every stage of that CP rank, less their ring waits.
using ComputeKey = std::tuple<int64_t, int64_t, int64_t>;
std::map<ComputeKey, double> measured_compute(const TimelineIteration& iteration, int64_t cp) {
  std::map<ComputeKey, double> out;
  for (const RankTimeline& rank : iteration.ranks) {
    for (const TimelineEvent& e : rank.events) {
      if (e.microbatch < 0) continue;
      const auto key = std::make_tuple(rank.dp_rank, e.microbatch, rank.rank % cp);  // parallel_layout.h
      if (e.kind == EventKind::kForward || e.kind == EventKind::kBackward) out[key] += e.duration_ms();
      if (e.kind == EventKind::kRingWait) out[key] -= e.duration_ms();
    }
  }
  return out;
}

Manifest run_manifest(const std::filesystem::path& run_dir) {
  const std::filesystem::path file = run_dir / "manifest.resolved.json";
  try {
    return load_stored_manifest(file);
  } catch (const ConfigError&) {
    throw;
  } catch (const std::exception& e) {
    throw ConfigError(file.string(), "", std::string("cannot be read as a manifest: ") + e.what(),
                      "point fit_from at the results of `sparsebalance run`");
  }
}

}  // namespace

std::vector<RingComputeObservation> ring_compute_observations(const std::filesystem::path& run_dir,
                                                              const LatencyPredictor& predictor,
                                                              const AttentionOptions& attention,
                                                              const AttentionSimulation& simulation) {
  const std::vector<TimelineIteration> timelines = measured_timeline_iterations(run_dir);
  if (timelines.empty()) return {};
  const Manifest m = run_manifest(run_dir);
  if (m.parallelism.cp <= 1 || !m.methods.at(0).attention.pattern().same_selection(attention.pattern())) return {};
  CpComputeSpec spec = cp_compute_spec(m, predictor.profile().training.tensor_parallel);
  spec.ring_compute_factor = 1.0;
  std::map<int64_t, IterationRecord> records;
  for (IterationRecord& r : read_iteration_records(run_dir / "records.jsonl")) records[r.iteration] = std::move(r);
  const int64_t stages = m.parallelism.pp;

  std::vector<RingComputeObservation> out;
  for (const TimelineIteration& timeline : timelines) {
    const auto found = records.find(timeline.iteration);
    if (found == records.end()) continue;
    const IterationRecord& record = found->second;
    const int64_t cp = m.parallelism.cp;
    const std::map<ComputeKey, double> measured = measured_compute(timeline, cp);
    std::map<int64_t, int64_t> next_index;  // DP rank -> its micro-batches so far
    for (size_t k = 0; k < record.microbatch_lengths.size(); ++k) {
      const int64_t d = k < record.microbatch_dp_rank.size() ? record.microbatch_dp_rank[k] : 0;
      const int64_t j = next_index[d]++;
      const std::vector<int64_t>& lengths = record.microbatch_lengths[k];
      std::vector<RingComputeObservation> ranks(static_cast<size_t>(cp));
      // The simulated run's model (its settings count the work), on the measured budgets.
      const CpMicrobatch microbatch = cp_microbatch(predictor, spec, simulation, lengths,
                                                    simulation.recorded_budgets(record, k, lengths.size()));
      for (int64_t s = 0; s < stages; ++s) {
        const CpStageCompute c =
            cp_stage_compute(predictor, spec, microbatch, m.parallelism.stage_layers[static_cast<size_t>(s)], s, stages,
                             1.0);
        for (size_t r = 0; r < ranks.size(); ++r) {
          ranks[r].attention_unit_ms += c.attention_unit_ms[r];
          ranks[r].step_tokens += c.step_tokens[r];
          ranks[r].other_ms += c.other_ms[r];
        }
      }
      for (int64_t r = 0; r < cp; ++r) {
        const auto at = measured.find({d, j, r});
        if (at == measured.end()) continue;
        ranks[static_cast<size_t>(r)].measured_ms = at->second;
        out.push_back(ranks[static_cast<size_t>(r)]);
      }
    }
  }
  return out;
}

RingComputeFit fit_ring_compute(const std::vector<RingComputeObservation>& observations) {
  if (observations.empty()) throw std::invalid_argument("no context-parallel micro-batches to fit");
  // Normal equations of y = a x1 + b x2: y = measured - other, x1 = attention, x2 = step tokens.
  double measured = 0, other = 0, s11 = 0, s12 = 0, s22 = 0, s1y = 0, s2y = 0;
  for (const RingComputeObservation& o : observations) {
    const double y = o.measured_ms - o.other_ms;
    measured += o.measured_ms;
    other += o.other_ms;
    s11 += o.attention_unit_ms * o.attention_unit_ms;
    s12 += o.attention_unit_ms * o.step_tokens;
    s22 += o.step_tokens * o.step_tokens;
    s1y += o.attention_unit_ms * y;
    s2y += o.step_tokens * y;
  }
  if (!(s11 > 0) || !(measured - other > 0)) {
    throw std::invalid_argument("the model's terms outside attention (" + std::to_string(other) +
                                " ms) take as long as the measured compute (" + std::to_string(measured) +
                                " ms): the profile does not describe these runs");
  }
  RingComputeFit fit;
  const double det = s11 * s22 - s12 * s12;
  double a = det > 0 ? (s1y * s22 - s2y * s12) / det : -1.0;
  double b = det > 0 ? (s2y * s11 - s1y * s12) / det : -1.0;
  if (!(a > 0) || b < 0) {  // the pair term alone (the model's default form)
    a = s1y / s11;
    b = 0;
    if (!(a > 0)) throw std::invalid_argument("the measured ring compute does not grow with the ring's pairs");
  }
  fit.factor = a;
  fit.step_ms_per_token = b;
  double squared = 0;
  for (const RingComputeObservation& o : observations) {
    const double model = o.other_ms + a * o.attention_unit_ms + b * o.step_tokens;
    squared += (model / o.measured_ms - 1) * (model / o.measured_ms - 1);
  }
  fit.samples = static_cast<int64_t>(observations.size());
  fit.rmse_pct = 100.0 * std::sqrt(squared / static_cast<double>(observations.size()));
  return fit;
}

RingComputeFit fit_ring_compute_from_results(const std::filesystem::path& results_dir,
                                             const LatencyPredictor& predictor, const AttentionOptions& attention,
                                             const AttentionSimulation& simulation, const std::string& manifest_file,
                                             const std::string& json_path) {
  MeasuredObservations<RingComputeObservation> observed = observe_measured_runs<RingComputeObservation>(
      results_dir, manifest_file, json_path,
      [&](const std::filesystem::path& dir) { return ring_compute_observations(dir, predictor, attention, simulation); });
  if (observed.all.empty()) {
    throw ConfigError(manifest_file, json_path,
                      "found no measured run under " + results_dir.string() + " with parallelism.cp > 1 and " +
                          attention.name() + " attention (" + attention_to_json(attention).dump() +
                          ") in a measured iteration",
                      "point it at the results of a `sparsebalance run` with context parallelism and this "
                      "attention, or give factor instead");
  }
  try {
    RingComputeFit fit = fit_ring_compute(observed.all);
    fit.runs = std::move(observed.runs);
    return fit;
  } catch (const std::invalid_argument& e) {
    throw ConfigError(manifest_file, json_path, std::string(e.what()) + " under " + results_dir.string(),
                      "measure the profile on the machine that ran them, or give factor instead");
  }
}

}  // namespace sb
