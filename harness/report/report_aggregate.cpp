#include "harness/report/report_aggregate.h"

#include <algorithm>

#include "harness/config/sweep.h"

namespace sb {
namespace {

std::string label_of(const std::string& method, const nlohmann::json& point) {
  if (point.empty()) return method;
  std::string label = method + " (";
  bool first = true;
  for (const auto& [path, value] : point.items()) {
    const std::string name = path.substr(path.rfind('.') + 1);
    label += (first ? "" : ", ") + name + "=" + sweep_value_text(value);
    first = false;
  }
  return label + ")";
}

template <typename Get>
std::optional<SampleStats> stats_over(const std::vector<const RunSummary*>& runs, Get get) {
  std::vector<double> values;
  for (const RunSummary* r : runs) {
    if (const std::optional<double> v = get(*r)) values.push_back(*v);
  }
  return sample_stats(values);
}

}  // namespace

std::optional<SpeedupInterval> speedup_interval_over(const std::vector<const RunSummary*>& members,
                                                     const std::vector<RunSummary>& all) {
  if (members.empty()) return std::nullopt;
  std::vector<SpeedupPair> pairs;
  std::string names;
  bool all_own_baseline = true;
  for (const RunSummary* r : members) {
    if (!r->speedup) return std::nullopt;
    const auto baseline = std::find_if(all.begin(), all.end(), [&](const RunSummary& b) {
      return b.run == r->speedup_baseline_run;
    });
    if (baseline == all.end() || baseline->measured_iter_ms.empty() || r->measured_iter_ms.empty()) return std::nullopt;
    all_own_baseline = all_own_baseline && &*baseline == r;
    pairs.push_back({&baseline->measured_iter_ms, &r->measured_iter_ms,
                     baseline->measured_iterations == r->measured_iterations});
    names += (names.empty() ? "" : "\n") + r->run;  // one run: its own seed, its own interval
  }
  if (all_own_baseline) return SpeedupInterval{1.0, 1.0};
  return method_speedup_interval(pairs, bootstrap_seed(names));
}

nlohmann::json method_axes_of(const nlohmann::json& sweep_point) {
  nlohmann::json point = nlohmann::json::object();
  for (const auto& [path, value] : sweep_point.items()) {
    if (path.rfind("methods.", 0) == 0) point[path] = value;
  }
  return point;
}

std::vector<MethodAggregate> aggregate_methods(const std::vector<RunSummary>& runs) {
  std::vector<MethodAggregate> groups;
  std::vector<std::vector<const RunSummary*>> members;
  for (const RunSummary& run : runs) {
    if (!run.complete()) continue;
    const nlohmann::json point = method_axes_of(run.sweep_point);
    auto it = std::find_if(groups.begin(), groups.end(), [&](const MethodAggregate& g) {
      return g.method == run.method && g.method_point == point;
    });
    if (it == groups.end()) {
      MethodAggregate g;
      g.method = run.method;
      g.method_point = point;
      g.label = label_of(run.method, point);
      g.is_baseline = run.is_baseline;
      groups.push_back(g);
      members.emplace_back();
      it = groups.end() - 1;
    }
    it->runs.push_back(run.run);
    members[static_cast<size_t>(it - groups.begin())].push_back(&run);
  }
  for (size_t i = 0; i < groups.size(); ++i) {
    MethodAggregate& g = groups[i];
    const std::vector<const RunSummary*>& m = members[i];
    g.speedup = stats_over(m, [](const RunSummary& r) { return r.speedup; });
    g.speedup_interval = speedup_interval_over(m, runs);
    g.iter_ms = stats_over(m, [](const RunSummary& r) {
      return r.iter_ms ? std::optional<double>(r.iter_ms->median) : std::nullopt;
    });
    g.imbalance = stats_over(m, [](const RunSummary& r) {
      return r.imbalance ? std::optional<double>(r.imbalance->median) : std::nullopt;
    });
    g.slot_imbalance = stats_over(m, [](const RunSummary& r) {
      return r.slot_imbalance ? std::optional<double>(r.slot_imbalance->median) : std::nullopt;
    });
    g.bubble_fraction = stats_over(m, [](const RunSummary& r) { return r.bubble_fraction_mean; });
    g.overhead_ms = stats_over(m, [](const RunSummary& r) { return r.overhead_ms; });
    std::map<std::string, std::vector<double>> columns;
    for (const RunSummary* r : m) {
      for (const auto& [column, value] : r->accuracy) columns[column].push_back(value);
    }
    for (auto& [column, values] : columns) g.accuracy[column] = *sample_stats(values);
  }
  std::stable_partition(groups.begin(), groups.end(), [](const MethodAggregate& g) { return g.is_baseline; });
  return groups;
}

}  // namespace sb
