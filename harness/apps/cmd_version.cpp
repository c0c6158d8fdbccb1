#include <CLI/CLI.hpp>

#include <iostream>

#include "harness/apps/commands.h"
#include "harness/common/system_info.h"

namespace sb::cli {

Command register_version(CLI::App& app) {
  auto as_json = std::make_shared<bool>(false);
  CLI::App* sub = app.add_subcommand(
      "version", "Print versions (LibTorch, CUDA, NCCL, Gloo), git SHA, build type, machine");
  sub->add_flag("--json", *as_json, "Print the same facts as one JSON object");
  return [as_json]() {
    const nlohmann::json info = collect_system_info();
    if (*as_json) {
      std::cout << info.dump(2) << "\n";
    } else {
      std::cout << "sparsebalance " << info["sparsebalance_version"].get<std::string>() << "\n"
                << "  git SHA      " << info["git_sha"].get<std::string>()
                << (info["git_dirty"].get<bool>() ? " (uncommitted changes)" : "") << "\n"
                << "  build type   " << info["build_type"].get<std::string>() << "\n"
                << "  LibTorch     " << info["libtorch"].get<std::string>() << "\n"
                << "  CUDA runtime " << info["cuda_runtime"].get<std::string>() << " ("
                << info["gpu_count"].get<int>() << " GPUs visible)\n"
                << "  NCCL         " << info["nccl"].get<std::string>() << "\n"
                << "  Gloo         " << info["gloo"].get<std::string>() << "\n"
                << "  compiler     " << info["compiler"].get<std::string>() << "\n"
                << "  host         " << info["host"].get<std::string>() << ", "
                << info["cpu_model"].get<std::string>() << ", " << info["cpu_cores"].get<unsigned>()
                << " cores\n";
    }
    if (std::string warning = debug_build_warning(); !warning.empty()) {
      std::cerr << warning << "\n";
    }
    return 0;
  };
}

}  // namespace sb::cli
