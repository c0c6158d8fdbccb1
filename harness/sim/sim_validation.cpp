#include "harness/sim/sim_validation.h"

#include <cmath>
#include <cstdio>

#include "harness/common/atomic_file.h"
#include "harness/common/errors.h"
#include "harness/report/run_summary.h"

namespace sb {

namespace fs = std::filesystem;
using nlohmann::json;

json validate_simulation(const fs::path& simulated_dir, const fs::path& measured_dir) {
  if (!fs::is_directory(measured_dir)) {
    throw ConfigError("--validate-against", "", measured_dir.string() + " is not a folder",
                      "pass results/<manifest> of a measured run of the same manifest");
  }
  json runs = json::array();
  std::string missing;
  for (const fs::path& simulated_run : list_run_folders(simulated_dir)) {
    const RunSummary sim = summarize_run(simulated_run);
    const fs::path measured_run = measured_dir / sim.run;
    if (!fs::exists(measured_run / "records.jsonl")) {
      missing += (missing.empty() ? "" : ", ") + sim.run;
      continue;
    }
    const RunSummary real = summarize_run(measured_run);
    const auto rel = [](double s, double r) { return r != 0 ? (s - r) / r : std::nan(""); };
    // Absent statistics (no measured iteration) compare as NaN, never as 0.
    const auto iter_median = [](const RunSummary& r) { return r.iter_ms ? r.iter_ms->median : std::nan(""); };
    const auto bubble = [](const RunSummary& r) { return r.bubble_fraction_mean.value_or(std::nan("")); };
    const auto imbalance = [](const RunSummary& r) { return r.imbalance ? r.imbalance->median : std::nan(""); };
    runs.push_back({{"run", sim.run},
                    {"measured_state", real.state},
                    {"measured_iterations", real.iterations_measured},
                    {"simulated_iterations", sim.iterations_measured},
                    {"median_iter_ms", {{"simulated", iter_median(sim)}, {"measured", iter_median(real)},
                                        {"relative_error", rel(iter_median(sim), iter_median(real))}}},
                    {"mean_bubble_fraction",
                     {{"simulated", bubble(sim)}, {"measured", bubble(real)},
                      {"relative_error", rel(bubble(sim), bubble(real))},
                      {"absolute_error", bubble(sim) - bubble(real)}}},
                    {"median_imbalance", {{"simulated", imbalance(sim)}, {"measured", imbalance(real)}}}});
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
            "warmup == false (harness/report/run_summary.h)"},
           {"runs", runs}};
  if (!missing.empty()) out["runs_without_measurement"] = missing;
  write_file_atomic(simulated_dir / "validation.json", out.dump(2) + "\n");
  return out;
}

std::string validation_to_text(const json& v) {
  std::string text = "| run | iter ms sim | iter ms measured | rel. error | bubble sim | bubble measured | rel. error |\n"
                     "|---|---|---|---|---|---|---|\n";
  char line[512];
  for (const json& r : v.at("runs")) {
    const json& it = r.at("median_iter_ms");
    const json& b = r.at("mean_bubble_fraction");
    const auto num = [](const json& j) { return j.is_number() ? j.get<double>() : std::nan(""); };
    std::snprintf(line, sizeof(line), "| %s | %.2f | %.2f | %+.1f%% | %.3f | %.3f | %+.1f%% |\n",
                  r.at("run").get<std::string>().c_str(), num(it.at("simulated")), num(it.at("measured")),
                  100 * num(it.at("relative_error")), num(b.at("simulated")), num(b.at("measured")),
                  100 * num(b.at("relative_error")));
    text += line;
  }
  return text;
}

}  // namespace sb
