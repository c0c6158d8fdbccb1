#include "harness/sim/sim_validation.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "common/errors.h"
#include "common/statistics.h"
#include "harness/common/atomic_file.h"
#include "harness/report/run_summary.h"

namespace sb {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// A JSON number, or NaN for null (a statistic nothing measured).
double num(const json& j) { return j.is_number() ? j.get<double>() : std::nan(""); }

double relative(double simulated, double measured) {
  return measured != 0 ? (simulated - measured) / measured : std::nan("");
}

// One method's runs: each run's simulated and measured statistic, in run order.
struct MethodValues {
  std::string method;
  std::vector<double> sim_iter, real_iter, sim_bubble, real_bubble, sim_iter_at_speed;
};

json per_method_json(const std::vector<MethodValues>& methods) {
  json out = json::array();
  for (const MethodValues& m : methods) {
    const double sim_iter = median_of(m.sim_iter), real_iter = median_of(m.real_iter);
    const double sim_bubble = median_of(m.sim_bubble), real_bubble = median_of(m.real_bubble);
    const double at_speed = median_of(m.sim_iter_at_speed);
    out.push_back({{"method", m.method},
                   {"runs", m.sim_iter.size()},
                   {"median_iter_ms", {{"simulated", sim_iter}, {"measured", real_iter},
                                       {"relative_error", relative(sim_iter, real_iter)},
                                       {"at_measured_speed", at_speed},
                                       {"relative_error_at_measured_speed", relative(at_speed, real_iter)}}},
                   {"mean_bubble_fraction", {{"simulated", sim_bubble}, {"measured", real_bubble},
                                             {"relative_error", relative(sim_bubble, real_bubble)},
                                             {"absolute_error", sim_bubble - real_bubble}}}});
  }
  return out;
}

}  // namespace

json validate_simulation(const fs::path& simulated_dir, const fs::path& measured_dir) {
  if (!fs::is_directory(measured_dir)) {
    throw ConfigError("--validate-against", "", measured_dir.string() + " is not a folder",
                      "pass results/<manifest> of a measured run of the same manifest");
  }
  json runs = json::array();
  std::string missing;
  std::vector<MethodValues> methods;  // in the order first seen
  for (const fs::path& simulated_run : list_run_folders(simulated_dir)) {
    const RunSummary sim = summarize_run(simulated_run);
    const fs::path measured_run = measured_dir / sim.run;
    if (!fs::exists(measured_run / "records.jsonl")) {
      missing += (missing.empty() ? "" : ", ") + sim.run;
      continue;
    }
    const RunSummary real = summarize_run(measured_run);
    const auto rel = relative;
    // Absent statistics (no measured iteration) compare as NaN, never as 0.
    const auto iter_median = [](const RunSummary& r) { return r.iter_ms ? r.iter_ms->median : std::nan(""); };
    const auto bubble = [](const RunSummary& r) { return r.bubble_fraction_mean.value_or(std::nan("")); };
    const auto imbalance = [](const RunSummary& r) { return r.imbalance ? r.imbalance->median : std::nan(""); };
    // Per measured iteration, so that an incomplete measured run still compares.
    const auto compute_per_iteration = [](const RunSummary& r) {
      return r.microbatch_ms_sum && r.iterations_measured > 0
                 ? *r.microbatch_ms_sum / static_cast<double>(r.iterations_measured)
                 : std::nan("");
    };
    const double compute_ratio = compute_per_iteration(real) / compute_per_iteration(sim);
    const double at_speed = iter_median(sim) * compute_ratio;
    runs.push_back({{"run", sim.run},
                    {"measured_state", real.state},
                    {"measured_iterations", real.iterations_measured},
                    {"simulated_iterations", sim.iterations_measured},
                    {"median_iter_ms", {{"simulated", iter_median(sim)}, {"measured", iter_median(real)},
                                        {"relative_error", rel(iter_median(sim), iter_median(real))},
                                        {"compute_ratio", compute_ratio},
                                        {"at_measured_speed", at_speed},
                                        {"relative_error_at_measured_speed", rel(at_speed, iter_median(real))}}},
                    {"mean_bubble_fraction",
                     {{"simulated", bubble(sim)}, {"measured", bubble(real)},
                      {"relative_error", rel(bubble(sim), bubble(real))},
                      {"absolute_error", bubble(sim) - bubble(real)}}},
                    {"median_imbalance", {{"simulated", imbalance(sim)}, {"measured", imbalance(real)}}}});
    // Context parallelism: the worker imbalance over the CP ranks, by time and by work.
    const auto median_of_stats = [](const std::optional<SampleStats>& s) { return s ? s->median : std::nan(""); };
    if (sim.cp_worker_imbalance || real.cp_worker_imbalance) {
      const double sim_time = median_of_stats(sim.cp_worker_imbalance), real_time = median_of_stats(real.cp_worker_imbalance);
      const double sim_work = median_of_stats(sim.cp_work_imbalance), real_work = median_of_stats(real.cp_work_imbalance);
      runs.back()["median_cp_worker_imbalance"] = {
          {"simulated", sim_time}, {"measured", real_time}, {"relative_error", rel(sim_time, real_time)}};
      runs.back()["median_cp_work_imbalance"] = {
          {"simulated", sim_work}, {"measured", real_work}, {"relative_error", rel(sim_work, real_work)}};
    }
    auto it = std::find_if(methods.begin(), methods.end(), [&](const MethodValues& m) { return m.method == sim.method; });
    if (it == methods.end()) it = methods.insert(methods.end(), MethodValues{sim.method, {}, {}, {}, {}, {}});
    it->sim_iter.push_back(iter_median(sim));
    it->real_iter.push_back(iter_median(real));
    it->sim_bubble.push_back(bubble(sim));
    it->real_bubble.push_back(bubble(real));
    it->sim_iter_at_speed.push_back(at_speed);
  }
  if (runs.empty()) {
    throw ConfigError("--validate-against", "", "no run of " + simulated_dir.string() + " has measured records in " +
                                                    measured_dir.string(),
                      "run the same manifest with `sparsebalance run` first");
  }
  json out{{"simulated", simulated_dir.string()},
           {"measured", measured_dir.string()},
           {"definitions",
            "relative_error = (simulated - measured) / measured; medians and means over iterations with "
            "warmup == false (harness/report/run_summary.h); methods: the median over a method's runs "
            "(e.g. its seeds) of each run's value, simulated and measured, then their relative error; "
            "compute_ratio = measured / simulated sum of microbatch_ms per measured iteration, "
            "at_measured_speed = simulated median iter_ms x compute_ratio (the simulator's error with the "
            "machine's speed during the run taken out)"},
           {"runs", runs},
           {"methods", per_method_json(methods)}};
  if (!missing.empty()) out["runs_without_measurement"] = missing;
  write_file_atomic(simulated_dir / "validation.json", out.dump(2) + "\n");
  return out;
}

std::string validation_to_text(const json& v) {
  std::string text =
      "| run | iter ms sim | iter ms measured | rel. error | compute ratio | rel. error at measured speed | "
      "bubble sim | bubble measured | rel. error |\n"
      "|---|---|---|---|---|---|---|---|---|\n";
  char line[512];
  for (const json& r : v.at("runs")) {
    const json& it = r.at("median_iter_ms");
    const json& b = r.at("mean_bubble_fraction");
    std::snprintf(line, sizeof(line), "| %s | %.2f | %.2f | %+.1f%% | %.3f | %+.1f%% | %.3f | %.3f | %+.1f%% |\n",
                  r.at("run").get<std::string>().c_str(), num(it.at("simulated")), num(it.at("measured")),
                  100 * num(it.at("relative_error")), num(it.at("compute_ratio")),
                  100 * num(it.at("relative_error_at_measured_speed")), num(b.at("simulated")),
                  num(b.at("measured")), 100 * num(b.at("relative_error")));
    text += line;
  }
  bool context_parallel = false;
  for (const json& r : v.at("runs")) context_parallel = context_parallel || r.contains("median_cp_worker_imbalance");
  if (context_parallel) {
    text += "\nworker imbalance over the CP ranks (median over iterations):\n"
            "| run | by time sim | by time measured | rel. error | by work sim | by work measured | rel. error |\n"
            "|---|---|---|---|---|---|---|\n";
    for (const json& r : v.at("runs")) {
      if (!r.contains("median_cp_worker_imbalance")) continue;
      const json& t = r.at("median_cp_worker_imbalance");
      const json& w = r.at("median_cp_work_imbalance");
      std::snprintf(line, sizeof(line), "| %s | %.3f | %.3f | %+.1f%% | %.3f | %.3f | %+.1f%% |\n",
                    r.at("run").get<std::string>().c_str(), num(t.at("simulated")), num(t.at("measured")),
                    100 * num(t.at("relative_error")), num(w.at("simulated")), num(w.at("measured")),
                    100 * num(w.at("relative_error")));
      text += line;
    }
  }
  if (!v.contains("methods")) return text;
  text += "\nper method (median over its runs):\n"
          "| method | runs | iter ms sim | iter ms measured | rel. error | rel. error at measured speed | bubble sim | "
          "bubble measured | rel. error |\n"
          "|---|---|---|---|---|---|---|---|---|\n";
  for (const json& m : v.at("methods")) {
    const json& it = m.at("median_iter_ms");
    const json& b = m.at("mean_bubble_fraction");
    std::snprintf(line, sizeof(line), "| %s | %d | %.2f | %.2f | %+.1f%% | %+.1f%% | %.3f | %.3f | %+.1f%% |\n",
                  m.at("method").get<std::string>().c_str(), m.at("runs").get<int>(), num(it.at("simulated")),
                  num(it.at("measured")), 100 * num(it.at("relative_error")),
                  100 * num(it.at("relative_error_at_measured_speed")), num(b.at("simulated")),
                  num(b.at("measured")), 100 * num(b.at("relative_error")));
    text += line;
  }
  return text;
}

}  // namespace sb
