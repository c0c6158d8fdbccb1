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
  for (const RunSummary& sim : summarize_manifest_results(simulated_dir)) {
    const fs::path measured_run = measured_dir / sim.run;
    if (!fs::exists(measured_run / "records.jsonl")) {
      missing += (missing.empty() ? "" : ", ") + sim.run;
      continue;
    }
    const RunSummary real = summarize_run(measured_run);
    const auto rel = [](double s, double r) { return r != 0 ? (s - r) / r : std::nan(""); };
    runs.push_back({{"run", sim.run},
                    {"measured_state", real.state},
                    {"measured_iterations", real.iterations_measured},
                    {"simulated_iterations", sim.iterations_measured},
                    {"median_iter_ms", {{"simulated", sim.median_iter_ms}, {"measured", real.median_iter_ms},
                                        {"relative_error", rel(sim.median_iter_ms, real.median_iter_ms)}}},
                    {"mean_bubble_fraction",
                     {{"simulated", sim.mean_bubble_fraction}, {"measured", real.mean_bubble_fraction},
                      {"relative_error", rel(sim.mean_bubble_fraction, real.mean_bubble_fraction)},
                      {"absolute_error", sim.mean_bubble_fraction - real.mean_bubble_fraction}}},
                    {"median_imbalance", {{"simulated", sim.median_imbalance}, {"measured", real.median_imbalance}}}});
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
