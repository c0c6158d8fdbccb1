#include "harness/patterns/sliding_window/sliding_window_simulation.h"

#include <algorithm>
#include <cmath>

namespace sb {

SlidingWindowSimulation::SlidingWindowSimulation(const SlidingWindowOptions& options, const SimulationCoverage& coverage)
    : options_(options), settings_(coverage), model_(coverage.exponent) {}

SimulatedAttention SlidingWindowSimulation::micro_batch(const PlannedMicroBatch& mb, const std::vector<int64_t>& lengths,
                                                        int64_t total_layers, IterationRecord& record,
                                                        std::vector<double>& /*sample_budgets*/,
                                                        std::vector<double>& /*sample_references*/) const {
  const int64_t planned = mb.budget > 0 ? mb.budget : options_.window;
  const int64_t reference = mb.coverage_reference_k > 0 ? mb.coverage_reference_k : options_.window;
  SimulatedAttention out;
  double window_sum = 0, coverage_sum = 0;
  int64_t floor = 0;
  for (int64_t length : lengths) {
    int64_t window = planned;
    if (mb.coverage_floor_ratio > 0) {
      const int64_t f = model_.floor_window(length, reference, mb.coverage_floor_ratio);
      floor = std::max(floor, f);
      window = std::max(window, f);
    }
    coverage_sum += model_.coverage(length, window);
    window_sum += static_cast<double>(window);
    out.sequence_budgets.push_back(window);
  }
  const auto n = static_cast<double>(lengths.size());
  out.realized = window_sum / n;
  out.floor = static_cast<double>(floor);
  record.budgets.push_back(planned);
  record.coverage.push_back(coverage_sum / n);
  const auto layers = static_cast<size_t>(total_layers);
  record.layer_budgets.emplace_back(layers, out.realized);
  record.layer_coverage.emplace_back(layers, coverage_sum / n);
  record.layer_floors.emplace_back(layers, floor);
  return out;
}

RingWork SlidingWindowSimulation::ring_work(const std::vector<int64_t>& lengths, const std::vector<int64_t>& budgets,
                                            int64_t cp, const CpLayout& layout, int64_t query_heads) const {
  return sliding_window_ring_work(lengths, budgets, options_.sink_tokens, cp, layout, query_heads);
}

nlohmann::json SlidingWindowSimulation::context(const FittedCoverage* /*fitted*/) const {
  return {{"model", "sliding_window " + settings_.model},
          {"exponent", settings_.exponent},
          {"used_for", "DST's floor: each sequence runs max(W_m, smallest W with C(L, W) >= (1 - p) C(L, W0))"},
          {"definition", "C(L, W) = mean over the last queries p of H(min(W, p + 1))(s) / H(p + 1)(s), attention "
                         "falling as a Zipf law of the distance (kernels/attention/patterns/sliding_window/"
                         "sliding_window_work_model.h)"},
          {"exponent_from", {{"kind", "assumed (simulation.coverage.exponent)"}}}};
}

std::vector<int64_t> SlidingWindowSimulation::recorded_budgets(const IterationRecord& record, size_t k,
                                                               size_t sequences) const {
  return std::vector<int64_t>(sequences, recorded_layer_mean_budget(record, k, options_.window));
}

}  // namespace sb
