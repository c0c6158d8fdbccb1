#include "harness/report/report_plots.h"

#include <spawn.h>
#include <sys/wait.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "common/errors.h"
#include "harness/common/system_info.h"

extern char** environ;

namespace sb {

namespace fs = std::filesystem;

fs::path find_plot_script() {
  const fs::path relative = fs::path("scripts") / "plot_results.py";
  std::string looked;
  for (fs::path dir = fs::path(current_executable()).parent_path(); !dir.empty(); dir = dir.parent_path()) {
    if (fs::exists(dir / relative)) return dir / relative;
    looked += (looked.empty() ? "" : ", ") + dir.string();
    if (dir == dir.root_path()) break;
  }
#ifdef SB_SOURCE_DIR
  if (fs::exists(fs::path(SB_SOURCE_DIR) / relative)) return fs::path(SB_SOURCE_DIR) / relative;
  looked += std::string(", ") + SB_SOURCE_DIR;
#endif
  throw ConfigError(relative.string(), "", "not found above the executable or in the source tree (" + looked + ")",
                    "run the plots from a clone: python3 <repo>/scripts/plot_results.py results/<manifest>");
}

int run_plot_script(const PlotRequest& request) {
  const char* python = std::getenv("SB_PLOT_PYTHON");
  std::vector<std::string> args = {python != nullptr && *python != '\0' ? python : "python3",
                                   find_plot_script().string(), request.results_dir.string()};
  if (request.iteration) {
    args.push_back("--iteration");
    args.push_back(std::to_string(*request.iteration));
  }
  if (request.run) {
    args.push_back("--run");
    args.push_back(*request.run);
  }
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, argv[0], nullptr, nullptr, argv.data(), environ);
  if (rc != 0) {
    throw ConfigError("$SB_PLOT_PYTHON", "", "cannot start " + args[0] + ": " + std::strerror(rc),
                      "set SB_PLOT_PYTHON to a Python with matplotlib (scripts/sparsebalance sets the "
                      "project's virtual environment)");
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) throw std::runtime_error(std::string("waitpid: ") + std::strerror(errno));
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

}  // namespace sb
