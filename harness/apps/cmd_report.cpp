#include <CLI/CLI.hpp>

#include <filesystem>
#include <iostream>

#include "common/errors.h"
#include "harness/apps/commands.h"
#include "harness/report/report.h"
#include "harness/report/report_plots.h"
#include "harness/report/report_writers.h"
#include "harness/report/run_summary.h"

namespace sb::cli {

Command register_report(CLI::App& app) {
  auto dir = std::make_shared<std::string>();
  auto plots = std::make_shared<bool>(false);
  auto iteration = std::make_shared<int64_t>(-1);
  auto run = std::make_shared<std::string>();
  auto peak_tflops = std::make_shared<double>(0);
  CLI::App* sub = app.add_subcommand("report", "Rebuild the report tables (and figures) of a results folder");
  sub->footer(
      "Rebuilds report.{json,csv,md} of results/<manifest>/ from the files of its runs and prints "
      "the Markdown report. With --plots, also draws <dir>/plots/*.{png,pdf} with "
      "scripts/plot_results.py ($SB_PLOT_PYTHON, default python3, needs matplotlib). "
      "Definitions: docs/reports.md.");
  sub->add_option("dir", *dir, "Results folder of one manifest, e.g. results/quickstart")->required();
  sub->add_flag("--plots", *plots, "Also draw the figures into <dir>/plots/");
  sub->add_option("--iteration", *iteration,
                  "Timeline figure: the iteration to draw (default: the measured iteration with the "
                  "median iter_ms of the first non-baseline run)");
  sub->add_option("--run", *run, "Timeline figure: the run to draw (default: the first non-baseline run)");
  sub->add_option("--peak-tflops", *peak_tflops,
                  "The device's peak TFLOP/s for every run's MFU (default: the known GPU's dense bf16 peak; "
                  "docs/metrics.md, \"Throughput\")");
  return [dir, plots, iteration, run, peak_tflops]() {
    if (!std::filesystem::is_directory(*dir)) {
      throw ConfigError(*dir, "", "is not a folder", "pass results/<manifest name>");
    }
    if (*peak_tflops < 0) throw ConfigError("--peak-tflops", "", "must be positive", "pass the device's TFLOP/s, e.g. 989");
    if (!run->empty()) {
      if (!*plots) throw ConfigError("--run", *run, "chooses the run of the timeline figure, which only --plots draws", "add --plots");
      if (!std::filesystem::is_directory(std::filesystem::path(*dir) / *run)) {
        std::string names;
        for (const std::filesystem::path& folder : list_run_folders(*dir)) {
          names += (names.empty() ? "" : ", ") + folder.filename().string();
        }
        throw ConfigError("--run", *run, "names no run folder of " + *dir, "use one of: " + names);
      }
    }
    const Report report = write_report(*dir, *peak_tflops > 0 ? std::optional<double>(*peak_tflops) : std::nullopt);
    std::cout << report_to_markdown(report);
    const std::vector<std::string> failing = report.runs_failing_checks();
    if (!failing.empty()) {
      std::string names;
      for (const std::string& name : failing) names += (names.empty() ? "" : ", ") + name;
      std::cerr << "error: " << failing.size() << " run(s) of " << *dir << " fail the record check (see the "
                << "report's notes): " << names << "\n";
    }
    const int checked = failing.empty() ? 0 : 1;
    if (!*plots) return checked;
    PlotRequest request;
    request.results_dir = *dir;
    if (*iteration >= 0) request.iteration = *iteration;
    if (!run->empty()) request.run = *run;
    std::cout << std::flush;
    const int rc = run_plot_script(request);
    if (rc != 0) std::cerr << "sparsebalance report: the plot script exited with status " << rc << "\n";
    return rc == 0 ? checked : 1;
  };
}

}  // namespace sb::cli
