#include "harness/dist/process_group.h"

#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#ifdef SB_WITH_CUDA
#include <torch/csrc/cuda/nccl.h>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include <cerrno>
#include <cstdlib>
#include <limits>
#include <stdexcept>

#include "harness/common/errors.h"

namespace sb {
namespace {

const char* kFix = "set the torchrun variables RANK, WORLD_SIZE (and MASTER_ADDR, MASTER_PORT)";

int read_int_variable(const char* name, int fallback, bool required, int min_value) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') {
    if (required) throw ConfigError("environment", name, "is not set", kFix);
    return fallback;
  }
  errno = 0;
  char* end = nullptr;
  long value = std::strtol(text, &end, 10);
  if (errno != 0 || *end != '\0' || value < min_value || value > std::numeric_limits<int>::max()) {
    throw ConfigError("environment", name,
                      std::string("\"") + text + "\" is not an integer >= " +
                          std::to_string(min_value),
                      kFix);
  }
  return static_cast<int>(value);
}

}  // namespace

DistEnv DistEnv::from_environment() {
  DistEnv env;
  env.rank = read_int_variable("RANK", 0, true, 0);
  env.world_size = read_int_variable("WORLD_SIZE", 1, true, 1);
  env.local_rank = read_int_variable("LOCAL_RANK", env.rank, false, 0);
  env.master_port = read_int_variable("MASTER_PORT", 29500, false, 1);
  if (const char* addr = std::getenv("MASTER_ADDR"); addr != nullptr && *addr != '\0') {
    env.master_addr = addr;
  }
  if (env.rank >= env.world_size) {
    throw ConfigError("environment", "RANK",
                      "is " + std::to_string(env.rank) + " but WORLD_SIZE is " +
                          std::to_string(env.world_size),
                      "ranks are numbered 0 .. WORLD_SIZE-1");
  }
  if (env.master_port > 65535) {
    throw ConfigError("environment", "MASTER_PORT", "is above 65535", "use a free TCP port");
  }
  return env;
}

c10::intrusive_ptr<c10d::Backend> create_process_group(const DistEnv& env,
                                                       CollectiveBackend backend,
                                                       std::chrono::milliseconds timeout) {
  c10d::TCPStoreOptions store_options;
  store_options.port = static_cast<uint16_t>(env.master_port);
  store_options.isServer = env.rank == 0;
  store_options.numWorkers = env.world_size;
  store_options.waitWorkers = true;
  store_options.timeout = timeout;
  auto store = c10::make_intrusive<c10d::TCPStore>(env.master_addr, store_options);

  switch (backend) {
    case CollectiveBackend::kGloo: {
      auto options = c10d::ProcessGroupGloo::Options::create();
      options->timeout = timeout;
      options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(env.master_addr));
      return c10::make_intrusive<c10d::ProcessGroupGloo>(store, env.rank, env.world_size, options);
    }
    case CollectiveBackend::kNccl: {
#ifdef SB_WITH_CUDA
      auto options = c10d::ProcessGroupNCCL::Options::create();
      options->timeout = timeout;
      return c10::make_intrusive<c10d::ProcessGroupNCCL>(store, env.rank, env.world_size, options);
#else
      throw std::runtime_error(
          "NCCL was requested but this build has no CUDA support; rebuild with -DSB_CUDA=ON "
          "(needs nvcc) or use the Gloo backend");
#endif
    }
  }
  throw std::logic_error("create_process_group: unhandled collective backend");
}

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

}  // namespace sb
