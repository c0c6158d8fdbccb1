#include "harness/patterns/vertical_slash/vertical_slash_simulation.h"

#include <cmath>

#include "kernels/attention/patterns/vertical_slash/vertical_slash_ring_work.h"

namespace sb {

VerticalSlashSimulation::VerticalSlashSimulation(const VerticalSlashParams& params, const SimulationCoverage& coverage)
    : params_(params),
      settings_(coverage),
      model_(coverage.exponent, vertical_slash_pattern_rule(params, coverage.rule_keys, coverage.spread)) {}

SimulatedAttention VerticalSlashSimulation::micro_batch(const PlannedMicroBatch& mb, const std::vector<int64_t>& lengths,
                                                        int64_t total_layers, IterationRecord& record,
                                                        std::vector<double>& sample_budgets,
                                                        std::vector<double>& sample_references) const {
  SimulatedAttention out;
  double kept_sum = 0, reference_sum = 0, floor_sum = 0, coverage_sum = 0;
  std::vector<double> kept, references;
  for (size_t i = 0; i < lengths.size(); ++i) {
    // The plan's budget in kept keys per query (one per sequence, or the micro-batch's for
    // all); 0: the pattern's own rule.
    const int64_t budget = !mb.sequence_budgets.empty() ? mb.sequence_budgets.at(i) : mb.budget;
    const VerticalSlashSequenceModel seq = model_.sequence(lengths[i], budget, mb.coverage_floor_ratio);
    // As the backend reports them (vertical_slash_backend.cpp): whole kept keys per query
    // for each sequence, the floor's as a fraction.
    const int64_t sequence_kept = kept_keys_as_budget(seq.kept_keys);
    const int64_t sequence_reference = kept_keys_as_budget(seq.reference_kept_keys);
    out.sequence_budgets.push_back(sequence_kept);
    kept.push_back(static_cast<double>(sequence_kept));
    references.push_back(static_cast<double>(sequence_reference));
    kept_sum += static_cast<double>(sequence_kept);
    reference_sum += static_cast<double>(sequence_reference);
    floor_sum += seq.floor_kept_keys;
    coverage_sum += seq.coverage;
    sample_budgets.at(static_cast<size_t>(mb.samples.at(i))) = static_cast<double>(sequence_kept);
    sample_references.at(static_cast<size_t>(mb.samples.at(i))) = static_cast<double>(sequence_reference);
  }
  const auto n = static_cast<double>(lengths.size());
  const auto layers = static_cast<size_t>(total_layers);
  // A layer's kept keys, rule, coverage and floor are means over the sequences (the floor
  // rounded); the model has no layers, so every layer reports the same.
  out.realized = kept_sum / n;
  out.floor = static_cast<double>(std::llround(floor_sum / n));
  record.budgets.push_back(mb.budget);
  record.coverage.push_back(coverage_sum / n);
  record.layer_budgets.emplace_back(layers, out.realized);
  record.layer_coverage.emplace_back(layers, coverage_sum / n);
  record.layer_reference_budgets.emplace_back(layers, reference_sum / n);
  record.layer_floors.emplace_back(layers, std::llround(floor_sum / n));
  record.sequence_budgets.push_back(std::move(kept));
  record.sequence_reference_budgets.push_back(std::move(references));
  return out;
}

RingWork VerticalSlashSimulation::ring_work(const std::vector<int64_t>& lengths, const std::vector<int64_t>& budgets,
                                            int64_t cp, const CpLayout& layout, int64_t query_heads) const {
  return vertical_slash_ring_work(lengths, budgets, cp, layout, params_.sink_tokens, params_.local_window,
                                  model_.rule().spread, query_heads);
}

nlohmann::json VerticalSlashSimulation::context(const FittedCoverage* fitted) const {
  using nlohmann::json;
  const VerticalSlashPatternRule& rule = model_.rule();
  json context{
      {"model", "vertical_slash " + settings_.model},
      {"exponent", settings_.exponent},
      {"forced_keys", rule.forced_keys},
      {"most_keys", rule.most_keys},
      {"spread", rule.spread},
      {"used_for", "each sequence's kept keys per query under the pattern's rule, a budget and DST's floor"},
      {"definition", "at level e query i keeps its F + min(i + 1 - F, e ((1 - u) + u (i + 1) / L)) highest-ranked "
                     "keys (all i + 1 when i + 1 <= F; F forced, u the spread); K(L, e) = their mean; C(L, e) = mean "
                     "over the last queries of H(kept_i)(s) / H(i + 1)(s) "
                     "(kernels/attention/patterns/vertical_slash/vertical_slash_pattern_model.h)"}};
  if (rule.top_p) {
    context["rule"] = {{"budget", "top_p"}, {"p", rule.p}};
  } else {
    context["rule"] = {{"budget", "top_k"}, {"rule_keys", rule.rule_keys}};
  }
  if (fitted != nullptr) {
    const json& d = fitted->details;
    context["exponent_from"] = {{"kind", "fitted to measured runs' layer coverage and kept keys "
                                         "(harness/patterns/vertical_slash/vertical_slash_pattern_fit.h)"},
                                {"results", settings_.fit_from},
                                {"runs", fitted->runs},
                                {"points", d.at("coverage_points")},
                                {"rmse", d.at("coverage_rmse")}};
    if (!rule.top_p) {
      context["rule"]["rule_keys_from"] = {{"kind", "fitted to the kept keys per query measured runs' rule chose"},
                                           {"points", d.at("rule_points")},
                                           {"rmse_keys", d.at("rule_rmse")}};
    } else {
      context["exponent_from"]["rule_points"] = d.at("rule_points");
      context["exponent_from"]["rule_relative_rmse"] = d.at("rule_rmse");
    }
    context["spread_from"] =
        d.at("spread_fitted").get<bool>()
            ? json{{"kind", "fitted to measured context-parallel runs' per-rank kept pairs"},
                   {"micro_batches", d.at("spread_points")},
                   {"rmse_share", d.at("spread_rmse")}}
            : json{{"kind", "given (simulation.coverage.spread; no context-parallel run to fit it to)"}};
  } else {
    context["exponent_from"] = {{"kind", "assumed (simulation.coverage.exponent)"}};
    context["spread_from"] = {{"kind", "given (simulation.coverage.spread)"}};
    if (!rule.top_p) {
      context["rule"]["rule_keys_from"] = {
          {"kind", settings_.rule_keys > 0 ? "given (simulation.coverage.rule_keys)"
                                           : "assumed: sink_tokens + local_window + vertical_count + slash_count x "
                                             "block_size"}};
    }
  }
  return context;
}

std::vector<int64_t> VerticalSlashSimulation::recorded_budgets(const IterationRecord& record, size_t k,
                                                               size_t sequences) const {
  std::vector<int64_t> out;
  if (k < record.sequence_budgets.size() && record.sequence_budgets[k].size() == sequences) {
    for (double kept : record.sequence_budgets[k]) out.push_back(kept_keys_as_budget(kept));
    return out;
  }
  double mean = -1;
  if (k < record.layer_budgets.size() && !record.layer_budgets[k].empty()) {
    double sum = 0;
    for (double b : record.layer_budgets[k]) sum += b;
    mean = sum / static_cast<double>(record.layer_budgets[k].size());
  }
  return std::vector<int64_t>(sequences, kept_keys_as_budget(mean));
}

}  // namespace sb
