#include "harness/sim/fit/allreduce_fit.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <set>
#include <stdexcept>

#include "common/errors.h"
#include "harness/config/manifest.h"
#include "harness/records/iteration_record.h"
#include "harness/records/measured_runs.h"
#include "harness/sim/run_simulator.h"
#include "harness/trace/timeline.h"
#include "harness/config/stored_manifest.h"
#include "models/qwen2/qwen2_config.h"

namespace sb {
namespace {

// The stage's gradient ring: the latest entry into and the latest exit from its
// all-reduce event over its ranks, and which ranks took part (its DP ranks, and with
// context parallelism every CP rank of each).
struct StageRing {
  double last_entry_ms = 0;
  double last_exit_ms = 0;
  std::set<int64_t> ranks;
};

// The stage -> ring of one measured iteration.
std::map<int64_t, StageRing> rings_of(const TimelineIteration& iteration) {
  std::map<int64_t, StageRing> rings;
  for (const RankTimeline& rank : iteration.ranks) {
    for (const TimelineEvent& e : rank.events) {
      if (e.kind != EventKind::kAllReduce) continue;
      StageRing& ring = rings[rank.stage];
      const bool first = ring.ranks.empty();
      ring.last_entry_ms = first ? e.start_ms : std::max(ring.last_entry_ms, e.start_ms);
      ring.last_exit_ms = first ? e.end_ms : std::max(ring.last_exit_ms, e.end_ms);
      ring.ranks.insert(rank.rank);
    }
  }
  return rings;
}

Manifest run_manifest(const std::filesystem::path& run_dir) {
  const std::filesystem::path manifest_file = run_dir / "manifest.resolved.json";
  try {
    return load_stored_manifest(manifest_file);
  } catch (const ConfigError&) {
    throw;
  } catch (const std::exception& e) {
    throw ConfigError(manifest_file.string(), "", std::string("cannot be read as a manifest: ") + e.what(),
                      "point fit_from at the results of `sparsebalance run`");
  }
}

// The DP rings of the run's measured iterations.
std::vector<AllreduceObservation> data_parallel_observations(const std::vector<TimelineIteration>& measured,
                                                             const Manifest& manifest) {
  const std::vector<double> stage_bytes = stage_dp_allreduce_bytes(manifest);
  const bool ties_stages = manifest.parallelism.pp > 1 && manifest.model.config.tie_word_embeddings;
  const auto last_stage = static_cast<int64_t>(stage_bytes.size()) - 1;
  std::vector<AllreduceObservation> out;
  for (const TimelineIteration& iteration : measured) {
    for (const auto& [stage, ring] : rings_of(iteration)) {
      if (ring.ranks.size() < 2 || stage < 0 || stage > last_stage) continue;
      // With tied embeddings over a pipeline, the first and last stages' all-reduce event
      // also holds the embedding's all-reduce between them, and with it a wait for the
      // other stage: not the ring's own time.
      if (ties_stages && (stage == 0 || stage == last_stage)) continue;
      out.push_back(ring_allreduce_observation(ring.last_exit_ms - ring.last_entry_ms,
                                               static_cast<int64_t>(ring.ranks.size()),
                                               stage_bytes[static_cast<size_t>(stage)]));
    }
  }
  return out;
}

// The TP collectives of the run's measured micro-batches (tp > 1). None under CP as well:
// each TP group then moves its CP rank's share of a micro-batch, and the records average
// tp_comm_ms over the CP ranks, whose shares differ.
std::vector<AllreduceObservation> tensor_parallel_observations(const std::filesystem::path& run_dir,
                                                               const Manifest& manifest) {
  std::vector<AllreduceObservation> out;
  if (manifest.parallelism.cp > 1) return out;
  const int64_t pp = manifest.parallelism.pp;
  // DST asks every micro-batch for budgets and a coverage floor; the other methods for none.
  const bool dst = manifest.methods.at(0).budget == BudgetKind::kDst;
  for (const IterationRecord& r : read_iteration_records(run_dir / "records.jsonl")) {
    if (r.warmup || r.tp_comm_ms.size() != r.microbatch_tokens.size()) continue;
    for (size_t k = 0; k < r.tp_comm_ms.size(); ++k) {
      const std::vector<double>& per_rank = r.tp_comm_ms[k];
      if (per_rank.empty()) continue;
      AllreduceObservation o;
      o.tensor_parallel = true;
      o.ms = std::accumulate(per_rank.begin(), per_rank.end(), 0.0) / static_cast<double>(per_rank.size());
      for (int64_t s = 0; s < pp; ++s) {
        const TensorParallelStage stage = tensor_parallel_stage(manifest, s, dst, dst);
        o.traffic += tensor_parallel_traffic(stage, r.microbatch_tokens[k], true);
        o.traffic += tensor_parallel_traffic(stage, r.microbatch_tokens[k], false);
      }
      out.push_back(o);
    }
  }
  return out;
}

}  // namespace

AllreduceObservation ring_allreduce_observation(double ms, int64_t ranks, double bytes) {
  if (ranks < 2 || !(bytes > 0)) {
    throw std::invalid_argument("an all-reduce observation needs 2 or more ranks and a positive payload");
  }
  const auto n = static_cast<double>(ranks);
  AllreduceObservation o;
  o.ms = ms;
  o.traffic.payload_bytes = 2.0 * (n - 1.0) / n * bytes;
  o.traffic.latency_hops = 2.0 * (n - 1.0);
  return o;
}

std::vector<AllreduceObservation> allreduce_observations(const std::filesystem::path& run_dir) {
  const std::vector<TimelineIteration> measured = measured_timeline_iterations(run_dir);
  const auto has_ring = [](const TimelineIteration& it) {
    for (const auto& [stage, ring] : rings_of(it)) {
      if (ring.ranks.size() >= 2) return true;
    }
    return false;
  };
  // A run without a DP ring may be one rank without a manifest: nothing to fit there. With
  // one, a TP run still has its collectives.
  if (std::none_of(measured.begin(), measured.end(), has_ring) &&
      !std::filesystem::exists(run_dir / "manifest.resolved.json")) {
    return {};
  }
  const Manifest manifest = run_manifest(run_dir);
  // Under TP a rank's all-reduce event also holds the sums of the tensors every TP rank
  // holds whole over its TP group: not the DP ring alone, so only the TP collectives count.
  if (manifest.parallelism.tp > 1) return tensor_parallel_observations(run_dir, manifest);
  return data_parallel_observations(measured, manifest);
}

AllreduceFit fit_allreduce_bandwidth(const std::vector<AllreduceObservation>& observations, double alpha_us) {
  if (observations.empty()) throw std::invalid_argument("no all-reduce observations to fit");
  AllreduceFit fit;
  double payload_bits = 0, transfer_ms = 0, total_ms = 0;
  for (const AllreduceObservation& o : observations) {
    if (!(o.traffic.payload_bytes > 0)) throw std::invalid_argument("an observation without payload");
    payload_bits += o.traffic.payload_bytes * 8.0;
    transfer_ms += o.ms - o.traffic.latency_hops * alpha_us / 1000.0;
    total_ms += o.ms;
    if (o.tensor_parallel) ++fit.tensor_parallel_samples;
  }
  if (transfer_ms <= 0) {
    throw std::invalid_argument("the latency terms (hops x alpha) alone take as long as the measured collectives");
  }
  fit.bandwidth_gbps = payload_bits / (transfer_ms / 1000.0) / 1e9;
  fit.samples = static_cast<int64_t>(observations.size());
  fit.mean_ms = total_ms / static_cast<double>(observations.size());
  return fit;
}

AllreduceFit fit_allreduce_from_results(const std::filesystem::path& results_dir, double alpha_us,
                                        const std::string& manifest_file, const std::string& json_path) {
  MeasuredObservations<AllreduceObservation> observed = observe_measured_runs<AllreduceObservation>(
      results_dir, manifest_file, json_path, [](const std::filesystem::path& dir) { return allreduce_observations(dir); });
  if (observed.all.empty()) {
    throw ConfigError(manifest_file, json_path,
                      "found no measured run under " + results_dir.string() +
                          " with a data-parallel all-reduce (2 or more DP x CP ranks) or tensor-parallel "
                          "collectives in a measured iteration",
                      "point it at the results of a `sparsebalance run` with parallelism.dp x cp >= 2 or tp >= 2, "
                      "or give bandwidth_gbps instead");
  }
  try {
    AllreduceFit fit = fit_allreduce_bandwidth(observed.all, alpha_us);
    fit.runs = std::move(observed.runs);
    return fit;
  } catch (const std::invalid_argument& e) {
    throw ConfigError(manifest_file, json_path,
                      std::string(e.what()) + " under " + results_dir.string() + " (alpha_us " +
                          std::to_string(alpha_us) + ")",
                      "lower intra_node.alpha_us");
  }
}

}  // namespace sb
