#pragma once
// `sparsebalance report --plots`: runs scripts/plot_results.py on a results folder with
// the interpreter in $SB_PLOT_PYTHON (scripts/sparsebalance and scripts/lib.sh set it to
// the project's virtual environment; default python3). The script is found next to the
// executable's repository: the first scripts/plot_results.py in the folders above the
// executable (build/sparsebalance -> <repo>), else in the source tree it was built from.

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

namespace sb {

struct PlotRequest {
  std::filesystem::path results_dir;
  std::optional<int64_t> iteration;  // timeline: the iteration to draw
  std::optional<std::string> run;    // timeline: the run to draw
};

// Throws ConfigError naming the places it looked when there is no script.
std::filesystem::path find_plot_script();

// The script's exit status (its output goes to this process's stdout and stderr).
int run_plot_script(const PlotRequest& request);

}  // namespace sb
