#include "harness/common/system_info.h"

#include <ATen/Parallel.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <torch/version.h>
#ifdef SB_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <torch/csrc/cuda/nccl.h>
#endif
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <stdexcept>
#include <optional>
#include <string>
#include <thread>

#include "harness/common/build_info.h"

namespace sb {

namespace {

std::string first_line_with(const std::string& path, const std::string& prefix) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(prefix, 0) == 0) return line;
  }
  return "";
}

std::string cpu_model() {
  std::string line = first_line_with("/proc/cpuinfo", "model name");
  auto colon = line.find(':');
  return colon == std::string::npos ? "unknown" : line.substr(colon + 2);
}

double memory_gib() {
  std::string line = first_line_with("/proc/meminfo", "MemTotal:");
  if (line.empty()) return 0;
  return std::stod(line.substr(9)) / (1024.0 * 1024.0);  // kB -> GiB
}

std::string host_name() {
  char name[256] = {0};
  if (::gethostname(name, sizeof(name) - 1) != 0) return "unknown";
  return name;
}

std::string nvidia_driver() {
  std::string line = first_line_with("/proc/driver/nvidia/version", "NVRM version");
  return line.empty() ? "none" : line;
}

}  // namespace

std::string nccl_version_string() {
#ifdef SB_WITH_CUDA
  // LibTorch packs the version as major << 32 | minor << 16 | patch.
  const std::uint64_t v = torch::cuda::nccl::version();
  return std::to_string(v >> 32) + "." + std::to_string((v >> 16) & 0xffff) + "." +
         std::to_string(v & 0xffff);
#else
  return "none";
#endif
}

std::string current_executable() {
  char path[4096];
  const ssize_t n = ::readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (n <= 0) throw std::runtime_error("cannot read /proc/self/exe");
  return std::string(path, static_cast<size_t>(n));
}

double host_memory_gib() { return memory_gib(); }

std::string this_host_name() { return host_name(); }

std::optional<int64_t> intra_op_threads_to_set(int64_t configured, int64_t ranks_on_host) {
  if (configured > 0 || ranks_on_host > 1) return rank_thread_count(configured, ranks_on_host);
  return std::nullopt;
}

int64_t cpu_core_count() {
  const long online = ::sysconf(_SC_NPROCESSORS_ONLN);
  if (online > 0) return static_cast<int64_t>(online);
  return std::max<int64_t>(1, std::thread::hardware_concurrency());
}

int64_t rank_thread_count(int64_t configured, int64_t ranks_on_host) {
  if (configured > 0) return configured;
  return std::max<int64_t>(1, cpu_core_count() / std::max<int64_t>(1, ranks_on_host));
}

nlohmann::json collect_system_info() {
  const auto& cuda = at::detail::getCUDAHooks();
  nlohmann::json info;
  info["host"] = host_name();
  info["cpu_model"] = cpu_model();
  info["cpu_cores"] = cpu_core_count();
  info["memory_gib"] = memory_gib();
  info["libtorch"] = TORCH_VERSION;
  info["gpu_count"] = cuda.hasCUDA() ? cuda.getNumGPUs() : 0;
#ifdef SB_WITH_CUDA
  // Names and memory of the visible GPUs: a timing means little without them.
  nlohmann::json gpus = nlohmann::json::array();
  for (int64_t i = 0; cuda.hasCUDA() && i < cuda.getNumGPUs(); ++i) {
    const cudaDeviceProp* p = at::cuda::getDeviceProperties(static_cast<c10::DeviceIndex>(i));
    gpus.push_back({{"name", p->name},
                    {"memory_gib", static_cast<double>(p->totalGlobalMem) / (1024.0 * 1024.0 * 1024.0)},
                    {"compute_capability", std::to_string(p->major) + "." + std::to_string(p->minor)}});
  }
  info["gpus"] = gpus;
#endif
  if (cuda.hasCUDART()) {
    const long v = cuda.versionCUDART();  // major * 1000 + minor * 10
    info["cuda_runtime"] = std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
  } else {
    info["cuda_runtime"] = "none";
  }
  info["driver"] = nvidia_driver();
  info["nccl"] = nccl_version_string();
  info["gloo"] = "compiled in (c10d ProcessGroupGloo)";
#ifdef __clang__
  info["compiler"] = std::string("clang ") + __VERSION__;
#else
  info["compiler"] = std::string("gcc ") + __VERSION__;
#endif
  info["git_sha"] = build_git_sha();
  info["git_dirty"] = build_git_dirty();
  info["build_type"] = build_type();
  info["sparsebalance_version"] = build_version();
  info["intra_op_threads"] = at::get_num_threads();
  return info;
}

std::string debug_build_warning() {
#ifdef NDEBUG
  return "";
#else
  return "WARNING: this is an unoptimised (" + std::string(build_type()) +
         ") build; timings are not representative. Rebuild with -DCMAKE_BUILD_TYPE=Release.";
#endif
}

}  // namespace sb
