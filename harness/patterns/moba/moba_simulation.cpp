#include "harness/patterns/moba/moba_simulation.h"

#include <algorithm>
#include <cmath>

#include "kernels/attention/patterns/moba/moba_ring_work.h"

namespace sb {

MobaSimulation::MobaSimulation(const MobaOptions& options, const SimulationCoverage& coverage)
    : options_(options), settings_(coverage), coverage_model_(coverage.exponent, options.block_size) {}

SimulatedAttention MobaSimulation::micro_batch(const PlannedMicroBatch& mb, const std::vector<int64_t>& lengths,
                                               int64_t total_layers, IterationRecord& record,
                                               std::vector<double>& /*sample_budgets*/,
                                               std::vector<double>& /*sample_references*/) const {
  const int64_t planned_k = mb.budget > 0 ? mb.budget : options_.top_k;
  SimulatedAttention out;
  double budget_sum = 0, coverage_sum = 0;
  for (int64_t length : lengths) {
    const int64_t k =
        coverage_model_.effective_budget(length, planned_k, mb.coverage_reference_k, mb.coverage_floor_ratio);
    coverage_sum += coverage_model_.coverage(length, k);
    budget_sum += static_cast<double>(k);
    out.sequence_budgets.push_back(k);
  }
  const auto n = static_cast<double>(lengths.size());
  out.realized = budget_sum / n;
  const int64_t longest = *std::max_element(lengths.begin(), lengths.end());
  if (mb.coverage_floor_ratio > 0) {
    out.floor = static_cast<double>(
        coverage_model_.floor_budget(longest, mb.coverage_reference_k, mb.coverage_floor_ratio));
  }
  record.budgets.push_back(planned_k);
  record.coverage.push_back(coverage_sum / n);
  // The coverage model has no layers: every layer runs the sequences' modelled budgets, at
  // their coverage, with the micro-batch's floor (as the trainer records them; floors are
  // dropped from an iteration where none applies).
  const auto layers = static_cast<size_t>(total_layers);
  record.layer_budgets.emplace_back(layers, out.realized);
  record.layer_coverage.emplace_back(layers, coverage_sum / n);
  record.layer_floors.emplace_back(layers, static_cast<int64_t>(out.floor));
  return out;
}

RingWork MobaSimulation::ring_work(const std::vector<int64_t>& lengths, const std::vector<int64_t>& budgets, int64_t cp,
                                   const CpLayout& layout, int64_t query_heads) const {
  return moba_ring_work(lengths, budgets, cp, layout, options_.block_size, query_heads);
}

nlohmann::json MobaSimulation::context(const FittedCoverage* fitted) const {
  nlohmann::json context{
      {"model", settings_.model},
      {"exponent", settings_.exponent},
      {"used_for", "DST's per-layer floor: each sequence runs max(k_m, smallest k with C(L, k) >= (1 - p) C(L, k0))"},
      {"definition", "C(L, k) = mean over query blocks i of H_min(k, i+1)(s) / H_(i+1)(s), Zipf routing scores "
                     "(kernels/attention/patterns/moba/moba_coverage_model.h)"}};
  if (fitted != nullptr) {
    context["exponent_from"] = {{"kind", "fitted to measured runs' layer coverage (harness/patterns/moba/moba_coverage_fit.h)"},
                                {"results", settings_.fit_from},
                                {"runs", fitted->runs},
                                {"points", fitted->details.at("points")},
                                {"rmse", fitted->details.at("rmse")}};
  } else {
    context["exponent_from"] = {{"kind", "assumed (simulation.coverage.exponent)"}};
  }
  return context;
}

std::vector<int64_t> MobaSimulation::recorded_budgets(const IterationRecord& record, size_t k,
                                                      size_t sequences) const {
  return std::vector<int64_t>(sequences, recorded_layer_mean_budget(record, k, options_.top_k));
}

}  // namespace sb
