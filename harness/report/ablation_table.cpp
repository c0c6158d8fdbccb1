#include "harness/report/ablation_table.h"

#include <algorithm>
#include <set>

#include "common/statistics.h"
#include "harness/report/report_aggregate.h"

namespace sb {
namespace {

bool sweeps_dst(const RunSummary& r) {
  return r.sweep_point.contains("methods.dst.anchor") || r.sweep_point.contains("methods.dst.p");
}

int anchor_rank(const std::string& anchor) {
  if (anchor == "min") return 0;
  if (anchor == "mean") return 1;
  if (anchor == "max") return 2;
  return 3;
}

std::optional<double> metric_of(const RunSummary& r, const std::string& metric) {
  if (metric == "speedup") return r.speedup;
  if (metric == "imbalance") return r.imbalance ? std::optional<double>(r.imbalance->median) : std::nullopt;
  if (metric == "effective_budget_mean") return r.effective_budget_mean;
  if (metric == "loss_final") return r.loss_final;
  const auto it = r.accuracy.find(metric);
  return it == r.accuracy.end() ? std::nullopt : std::optional<double>(it->second);
}

AblationTable build_table(const std::string& method, const std::vector<const RunSummary*>& runs,
                          const std::vector<RunSummary>& all) {
  AblationTable t;
  t.method = method;
  std::set<std::string> columns;
  for (const RunSummary* r : runs) {
    if (std::find(t.anchors.begin(), t.anchors.end(), *r->dst_anchor) == t.anchors.end()) {
      t.anchors.push_back(*r->dst_anchor);
    }
    if (std::find(t.ps.begin(), t.ps.end(), *r->dst_p) == t.ps.end()) t.ps.push_back(*r->dst_p);
    for (const auto& [column, value] : r->accuracy) columns.insert(column);
  }
  std::sort(t.anchors.begin(), t.anchors.end(), [](const std::string& a, const std::string& b) {
    return anchor_rank(a) != anchor_rank(b) ? anchor_rank(a) < anchor_rank(b) : a < b;
  });
  std::sort(t.ps.begin(), t.ps.end());
  t.metrics = {"speedup", "imbalance", "effective_budget_mean", "loss_final"};
  t.metrics.insert(t.metrics.end(), columns.begin(), columns.end());
  t.runs.assign(t.anchors.size(), std::vector<int64_t>(t.ps.size(), 0));
  t.speedup_intervals.assign(t.anchors.size(), std::vector<std::optional<SpeedupInterval>>(t.ps.size()));
  for (size_t a = 0; a < t.anchors.size(); ++a) {
    for (size_t p = 0; p < t.ps.size(); ++p) {
      std::vector<const RunSummary*> cell;
      for (const RunSummary* r : runs) {
        if (*r->dst_anchor == t.anchors[a] && *r->dst_p == t.ps[p]) cell.push_back(r);
      }
      t.speedup_intervals[a][p] = speedup_interval_over(cell, all);
    }
  }
  for (const std::string& metric : t.metrics) {
    std::vector<std::vector<std::optional<double>>> grid(t.anchors.size(),
                                                         std::vector<std::optional<double>>(t.ps.size()));
    for (size_t a = 0; a < t.anchors.size(); ++a) {
      for (size_t p = 0; p < t.ps.size(); ++p) {
        std::vector<double> values;
        int64_t count = 0;
        for (const RunSummary* r : runs) {
          if (*r->dst_anchor != t.anchors[a] || *r->dst_p != t.ps[p]) continue;
          ++count;
          if (const std::optional<double> v = metric_of(*r, metric)) values.push_back(*v);
        }
        t.runs[a][p] = count;
        if (!values.empty()) grid[a][p] = median_of(values);
      }
    }
    t.values.push_back(std::move(grid));
  }
  return t;
}

}  // namespace

std::vector<AblationTable> build_ablation_tables(const std::vector<RunSummary>& runs) {
  std::vector<std::string> methods;
  for (const RunSummary& r : runs) {
    if (r.complete() && sweeps_dst(r) && r.dst_anchor && r.dst_p &&
        std::find(methods.begin(), methods.end(), r.method) == methods.end()) {
      methods.push_back(r.method);
    }
  }
  std::vector<AblationTable> tables;
  for (const std::string& method : methods) {
    std::vector<const RunSummary*> members;
    for (const RunSummary& r : runs) {
      if (r.complete() && r.method == method && r.dst_anchor && r.dst_p) members.push_back(&r);
    }
    tables.push_back(build_table(method, members, runs));
  }
  return tables;
}

nlohmann::json ablation_table_to_json(const AblationTable& t) {
  nlohmann::json values = nlohmann::json::object();
  for (size_t m = 0; m < t.metrics.size(); ++m) {
    nlohmann::json grid = nlohmann::json::array();
    for (const auto& row : t.values[m]) {
      nlohmann::json cells = nlohmann::json::array();
      for (const auto& v : row) cells.push_back(v ? nlohmann::json(*v) : nlohmann::json(nullptr));
      grid.push_back(cells);
    }
    values[t.metrics[m]] = grid;
  }
  nlohmann::json intervals = nlohmann::json::array();
  for (const auto& row : t.speedup_intervals) {
    nlohmann::json cells = nlohmann::json::array();
    for (const auto& i : row) cells.push_back(i ? nlohmann::json::array({i->low, i->high}) : nlohmann::json(nullptr));
    intervals.push_back(cells);
  }
  return {{"method", t.method}, {"anchors", t.anchors}, {"ps", t.ps}, {"metrics", t.metrics},
          {"values", values}, {"runs", t.runs}, {"speedup_intervals", intervals}};
}

}  // namespace sb
