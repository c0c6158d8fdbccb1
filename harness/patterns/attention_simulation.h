#pragma once
// What the simulator asks of an attention pattern (docs/simulator.md): a simulation has no
// attention scores, so each pattern brings a model of what its selection does with a
// micro-batch (the budgets each sequence runs at, coverage, DST's floor, the statistics a
// trainer's record holds) and its work under context parallelism. The collectives its
// selection adds under CP and TP are the kernel pattern's (attention_pattern.h). The
// harness/sim code runs every pattern alike through this interface; the models live with
// their patterns.

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "harness/balance/batch_plan.h"
#include "harness/records/iteration_record.h"
#include "kernels/attention/ring/cp_sharding.h"
#include "kernels/attention/ring/ring_work.h"

namespace sb {

// simulation.coverage: the pattern's coverage model settings (a pattern reads the ones
// its model has).
struct SimulationCoverage {
  std::string model = "zipf";
  double exponent = 1.0;  // the Zipf law of the ranked attention mass
  int64_t rule_keys = 0;  // a top-k rule's keys a late query keeps (0: from the counts)
  double spread = 0.0;    // how kept keys spread over a sequence's queries (0 .. 1)
  std::string fit_from;   // measured runs the settings were fitted to ("" when given)
};

// A fit's result: the settings, the measured runs it read and what the fit reports of
// itself (points, errors), for the simulated run's context.
struct FittedCoverage {
  SimulationCoverage coverage;
  std::vector<std::string> runs;
  nlohmann::json details = nlohmann::json::object();
};

// What one micro-batch's attention runs with in the simulation.
struct SimulatedAttention {
  // Per sequence, the budget the latency predictor prices it at (the profile's budget
  // axis; 0 for a pattern without budget).
  std::vector<int64_t> sequence_budgets;
  double realized = 0;  // what the planner observes as the micro-batch's realized budget
  double floor = 0;     // DST's floor as the backend reports it (0: none)
};

class AttentionSimulation {
 public:
  virtual ~AttentionSimulation() = default;

  // One micro-batch of `lengths` (packing order) planned as `mb`: what its attention runs
  // with, and its statistics appended to `record` as the trainer records them (total_layers:
  // the model's decoder layers). sample_budgets / sample_references: per sample of the
  // global batch (plan position), the budget it ran with and its rule's, for the planner's
  // estimators; patterns whose fixed budget is a number leave them alone.
  virtual SimulatedAttention micro_batch(const PlannedMicroBatch& mb, const std::vector<int64_t>& lengths,
                                         int64_t total_layers, IterationRecord& record,
                                         std::vector<double>& sample_budgets,
                                         std::vector<double>& sample_references) const = 0;

  // Under context parallelism: the micro-batch's attention work per pair of CP ranks, its
  // sequences at `budgets` (SimulatedAttention::sequence_budgets).
  virtual RingWork ring_work(const std::vector<int64_t>& lengths, const std::vector<int64_t>& budgets, int64_t cp,
                             const CpLayout& layout, int64_t query_heads) const = 0;
  // The run's context.json "coverage_model" entry: the model, its settings and where they
  // came from (fitted: the fit that set them; null where they were given or assumed).
  virtual nlohmann::json context(const FittedCoverage* fitted) const = 0;
  // A measured record's budgets of micro-batch k (`sequences` of them), on the profile's
  // axis, as this model's micro_batch gives them (the ring compute fit reads measured runs
  // with them).
  virtual std::vector<int64_t> recorded_budgets(const IterationRecord& record, size_t k, size_t sequences) const = 0;
};

// For patterns whose budget is a number of key blocks: what micro-batch k of a measured
// record ran at, the mean of its layers' budgets (rounded, at least 1), else its planned
// budget (0 there means the method's default), else `fallback`.
inline int64_t recorded_layer_mean_budget(const IterationRecord& record, size_t k, int64_t fallback) {
  if (k < record.layer_budgets.size() && !record.layer_budgets[k].empty()) {
    double sum = 0;
    for (double b : record.layer_budgets[k]) sum += b;
    return std::max<int64_t>(1, std::llround(sum / static_cast<double>(record.layer_budgets[k].size())));
  }
  if (k < record.budgets.size() && record.budgets[k] > 0) return record.budgets[k];
  return fallback;
}

}  // namespace sb
