#include "harness/patterns/vertical_slash/vertical_slash_pattern_fit.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>
#include <stdexcept>

#include "common/errors.h"
#include "common/scalar_minimise.h"
#include "harness/common/atomic_file.h"
#include "harness/patterns/vertical_slash/vertical_slash_plugin.h"
#include "harness/records/iteration_record.h"
#include "harness/records/measured_runs.h"
#include "kernels/attention/patterns/vertical_slash/vertical_slash_ring_work.h"

namespace sb {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// The run's first method's vertical-slash options, from its resolved manifest; none when
// unreadable or another pattern (such a folder is not a run of the pattern).
std::optional<VerticalSlashOptions> run_pattern(const json& resolved, const fs::path& file) {
  try {
    return vertical_slash_options_from_json(resolved.at("methods").at(0).at("attention"), "$.methods[0].attention",
                                            file.string());
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

double mean(const std::vector<double>& v) {
  return v.empty() ? 0.0 : std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

}  // namespace

VerticalSlashObservations vertical_slash_observations(const fs::path& run_dir) {
  const fs::path resolved_file = run_dir / "manifest.resolved.json";
  return vertical_slash_observations(
      run_dir, fs::exists(resolved_file) ? json::parse(read_file(resolved_file)) : json::object());
}

VerticalSlashObservations vertical_slash_observations(const fs::path& run_dir, const json& resolved) {
  VerticalSlashObservations out;
  // The CP layout and pattern of a context-parallel run (its work observations need them);
  // ConfigError naming the file when they do not read.
  const std::string file = (run_dir / "manifest.resolved.json").string();
  const MeasuredRunLayout layout = measured_run_layout(resolved, file);
  const bool context_parallel = layout.cp > 1;
  const VerticalSlashOptions pattern =
      context_parallel ? vertical_slash_options_from_json(resolved.at("methods").at(0).at("attention"),
                                                          "$.methods[0].attention", file)
                       : VerticalSlashOptions{};
  for (const IterationRecord& r : read_iteration_records(run_dir / "records.jsonl")) {
    if (r.warmup) continue;
    for (size_t k = 0; k < r.microbatch_lengths.size(); ++k) {
      const std::vector<int64_t>& lengths = r.microbatch_lengths[k];
      const bool per_sequence = k < r.sequence_budgets.size() && r.sequence_budgets[k].size() == lengths.size();
      const double sequence_mean = per_sequence ? mean(r.sequence_budgets[k]) : 0.0;
      for (size_t l = 0; k < r.layer_coverage.size() && k < r.layer_budgets.size() && l < r.layer_coverage[k].size() &&
                         l < r.layer_budgets[k].size();
           ++l) {
        VerticalSlashCoverageObservation o;
        o.lengths = lengths;
        o.coverage = r.layer_coverage[k][l];
        const double layer_mean = r.layer_budgets[k][l];
        for (size_t s = 0; s < lengths.size(); ++s) {
          o.kept_keys.push_back(per_sequence && sequence_mean > 0 ? r.sequence_budgets[k][s] * layer_mean / sequence_mean
                                                                  : layer_mean);
        }
        out.coverage.push_back(std::move(o));
      }
      if (context_parallel && per_sequence && k < r.cp_kept_pairs.size() &&
          static_cast<int64_t>(r.cp_kept_pairs[k].size()) == layout.cp) {
        VerticalSlashWorkObservation w;
        w.lengths = lengths;
        for (double kept : r.sequence_budgets[k]) w.kept_keys.push_back(kept_keys_as_budget(kept));
        w.cp = layout.cp;
        w.layout = layout.cp_layout;
        w.sink = pattern.params.sink_tokens;
        w.window = pattern.params.local_window;
        double total = 0;
        for (int64_t p : r.cp_kept_pairs[k]) total += static_cast<double>(p);
        if (total > 0) {
          for (int64_t p : r.cp_kept_pairs[k]) w.measured_share.push_back(static_cast<double>(p) / total);
          out.work.push_back(std::move(w));
        }
      }
      if (k < r.sequence_reference_budgets.size() && r.sequence_reference_budgets[k].size() == lengths.size()) {
        for (size_t s = 0; s < lengths.size(); ++s) {
          if (lengths[s] > 0 && r.sequence_reference_budgets[k][s] > 0) {
            out.rule.push_back({lengths[s], r.sequence_reference_budgets[k][s]});
          }
        }
      }
    }
  }
  return out;
}

double modelled_vertical_slash_coverage(const VerticalSlashPatternModel& model,
                                        const VerticalSlashCoverageObservation& o) {
  double sum = 0;
  int64_t counted = 0;
  for (size_t s = 0; s < o.lengths.size(); ++s) {
    if (o.lengths[s] < 1) continue;
    sum += model.coverage(o.lengths[s], model.shape().level_for_kept_keys(o.lengths[s], o.kept_keys.at(s)));
    ++counted;
  }
  return counted > 0 ? sum / static_cast<double>(counted) : 1.0;
}

std::vector<double> modelled_vertical_slash_work_share(const VerticalSlashWorkObservation& o, double spread) {
  const RingWork work = vertical_slash_ring_work(o.lengths, o.kept_keys, o.cp, o.layout, o.sink, o.window, spread, 1);
  const double total = work.total();
  std::vector<double> share;
  for (int64_t r = 0; r < o.cp; ++r) share.push_back(total > 0 ? work.row(r) / total : 0.0);
  return share;
}

VerticalSlashPatternFit fit_vertical_slash_pattern(const VerticalSlashObservations& observations,
                                                   VerticalSlashPatternRule rule) {
  if (observations.coverage.empty()) throw std::invalid_argument("vertical-slash pattern fit: no coverage observations");
  if (observations.rule.empty()) throw std::invalid_argument("vertical-slash pattern fit: no rule observations");
  VerticalSlashPatternFit fit;

  // 1. The spread, from the ring's per-rank work.
  fit.spread = rule.spread;
  if (!observations.work.empty()) {
    const auto share_sse = [&](double spread) {
      double sum = 0;
      for (const VerticalSlashWorkObservation& o : observations.work) {
        const std::vector<double> model = modelled_vertical_slash_work_share(o, spread);
        for (size_t r = 0; r < model.size(); ++r) sum += std::pow(model[r] - o.measured_share.at(r), 2);
      }
      return sum;
    };
    const ScalarMinimum best = minimise_on_interval(share_sse, 0.0, 1.0, 0.05, 1e-3);
    fit.spread = best.x;
    fit.spread_fitted = true;
    fit.spread_points = static_cast<int64_t>(observations.work.size());
    size_t shares = 0;
    for (const VerticalSlashWorkObservation& o : observations.work) shares += o.measured_share.size();
    fit.spread_rmse = std::sqrt(best.value / static_cast<double>(shares));
  }
  rule.spread = fit.spread;
  const VerticalSlashShape shape{rule.forced_keys, rule.spread};

  // 2. top_k: the keys a late query keeps under the rule.
  fit.rule_points = static_cast<int64_t>(observations.rule.size());
  if (!rule.top_p) {
    int64_t longest = 1;
    for (const VerticalSlashRuleObservation& o : observations.rule) longest = std::max(longest, o.length);
    const int64_t lo = std::min(rule.forced_keys, longest), hi = std::max(lo, std::min(rule.most_keys, longest));
    double best_rule = std::numeric_limits<double>::infinity();
    for (int64_t keys = lo; keys <= hi; ++keys) {
      double sum = 0;
      for (const VerticalSlashRuleObservation& o : observations.rule) {
        const double level = std::max(0.0, static_cast<double>(keys - rule.forced_keys));
        sum += std::pow(shape.kept_keys(o.length, level) - o.kept_keys, 2);
      }
      if (sum < best_rule) {
        best_rule = sum;
        fit.rule_keys = keys;
      }
    }
    fit.rule_rmse = std::sqrt(best_rule / static_cast<double>(fit.rule_points));
    rule.rule_keys = fit.rule_keys;
  }

  // 3. The exponent. Each sequence's level does not depend on it: found once.
  std::vector<std::vector<double>> levels;
  for (const VerticalSlashCoverageObservation& o : observations.coverage) {
    levels.emplace_back();
    for (size_t i = 0; i < o.lengths.size(); ++i) {
      levels.back().push_back(o.lengths[i] > 0 ? shape.level_for_kept_keys(o.lengths[i], o.kept_keys.at(i)) : 0.0);
    }
  }
  const auto coverage_mse = [&](const VerticalSlashPatternModel& model) {
    double sum = 0;
    for (size_t k = 0; k < observations.coverage.size(); ++k) {
      const VerticalSlashCoverageObservation& o = observations.coverage[k];
      double modelled = 0;
      int64_t counted = 0;
      for (size_t i = 0; i < o.lengths.size(); ++i) {
        if (o.lengths[i] < 1) continue;
        modelled += model.coverage(o.lengths[i], levels[k][i]);
        ++counted;
      }
      sum += std::pow((counted > 0 ? modelled / static_cast<double>(counted) : 1.0) - o.coverage, 2);
    }
    return sum / static_cast<double>(observations.coverage.size());
  };
  const auto rule_relative_mse = [&](const VerticalSlashPatternModel& model) {
    double sum = 0;
    for (const VerticalSlashRuleObservation& o : observations.rule) {
      const double kept = model.shape().kept_keys(o.length, model.reference_level(o.length));
      sum += std::pow((kept - o.kept_keys) / o.kept_keys, 2);
    }
    return sum / static_cast<double>(observations.rule.size());
  };
  const auto objective = [&](double exponent) {
    const VerticalSlashPatternModel model(exponent, rule);
    return coverage_mse(model) + (rule.top_p ? rule_relative_mse(model) : 0.0);
  };
  const ScalarMinimum best = minimise_on_interval(objective, 0.0, 4.0, 0.05, 1e-4);
  fit.exponent = best.x;
  const VerticalSlashPatternModel fitted(fit.exponent, rule);
  fit.coverage_points = static_cast<int64_t>(observations.coverage.size());
  fit.coverage_rmse = std::sqrt(coverage_mse(fitted));
  if (rule.top_p) fit.rule_rmse = std::sqrt(rule_relative_mse(fitted));
  return fit;
}

VerticalSlashPatternFit fit_vertical_slash_pattern_from_results(const fs::path& results_dir,
                                                                const VerticalSlashParams& pattern,
                                                                const VerticalSlashPatternRule& rule,
                                                                const std::string& manifest_file,
                                                                const std::string& json_path) {
  int64_t same_pattern_runs = 0;
  MeasuredObservations<VerticalSlashObservations> observed = observe_measured_runs<VerticalSlashObservations>(
      results_dir, manifest_file, json_path, [&](const fs::path& dir) {
        std::vector<VerticalSlashObservations> some;
        const fs::path resolved_file = dir / "manifest.resolved.json";
        if (!fs::exists(resolved_file)) return some;
        const json resolved = json::parse(read_file(resolved_file));
        const std::optional<VerticalSlashOptions> options = run_pattern(resolved, resolved_file);
        if (!options || options->params != pattern) return some;
        ++same_pattern_runs;
        some.push_back(vertical_slash_observations(dir, resolved));
        return some;
      });
  VerticalSlashObservations all;
  for (VerticalSlashObservations& o : observed.all) {
    all.coverage.insert(all.coverage.end(), o.coverage.begin(), o.coverage.end());
    all.rule.insert(all.rule.end(), o.rule.begin(), o.rule.end());
    all.work.insert(all.work.end(), o.work.begin(), o.work.end());
  }
  if (same_pattern_runs == 0) {
    throw ConfigError(manifest_file, json_path,
                      "found no measured vertical_slash run with this method's pattern (every attention key but "
                      "expected_keys) under " + results_dir.string(),
                      "point it at the results of a `sparsebalance run` of the same attention block");
  }
  const auto missing = [&](const std::string& what) {
    throw ConfigError(manifest_file, json_path,
                      "found " + std::to_string(same_pattern_runs) + " measured run(s) of this pattern under " +
                          results_dir.string() + " but no measured iteration with " + what,
                      "rerun them with this build: its records carry them");
  };
  if (all.coverage.empty()) missing("layer_coverage and layer_budgets");
  if (all.rule.empty()) missing("sequence_reference_budgets (the rule's kept keys per sequence)");
  VerticalSlashPatternFit fit = fit_vertical_slash_pattern(all, rule);
  fit.runs = std::move(observed.runs);
  return fit;
}

}  // namespace sb
