#include "harness/parallel/process_group.h"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#ifdef SB_WITH_CUDA
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include <cerrno>
#include <cstdlib>
#include <limits>
#include <stdexcept>

#include "common/errors.h"

namespace sb {
namespace {

const char* kTorchrunFix = "set the torchrun variables RANK, WORLD_SIZE (and MASTER_ADDR, MASTER_PORT)";
const char* kSlurmFix =
    "run inside an srun job step and export MASTER_ADDR (the first node's name) and MASTER_PORT";

bool is_set(const char* name) {
  const char* text = std::getenv(name);
  return text != nullptr && *text != '\0';
}

int read_int_variable(const char* name, int fallback, bool required, int min_value, const char* fix) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') {
    if (required) throw ConfigError("environment", name, "is not set", fix);
    return fallback;
  }
  errno = 0;
  char* end = nullptr;
  long value = std::strtol(text, &end, 10);
  if (errno != 0 || *end != '\0' || value < min_value || value > std::numeric_limits<int>::max()) {
    throw ConfigError("environment", name,
                      std::string("\"") + text + "\" is not an integer >= " + std::to_string(min_value), fix);
  }
  return static_cast<int>(value);
}

// srun's SLURM_STEP_TASKS_PER_NODE looks like "4(x2),3": the tasks on the first node
// type; enough to size thread pools, which is all it is used for.
int leading_int(const char* name, int fallback) {
  const char* text = std::getenv(name);
  if (text == nullptr) return fallback;
  const long value = std::strtol(text, nullptr, 10);
  return value >= 1 && value < 1 << 20 ? static_cast<int>(value) : fallback;
}

void read_master(DistEnv& env, bool addr_required, const char* fix) {
  env.master_port = read_int_variable("MASTER_PORT", 29500, false, 1, fix);
  if (is_set("MASTER_ADDR")) {
    env.master_addr = std::getenv("MASTER_ADDR");
  } else if (addr_required) {
    throw ConfigError("environment", "MASTER_ADDR", "is not set", fix);
  }
  if (env.master_port > 65535) {
    throw ConfigError("environment", "MASTER_PORT", "is above 65535", "use a free TCP port");
  }
}

bool is_loopback(const std::string& addr) {
  return addr == "localhost" || addr.rfind("127.", 0) == 0 || addr == "::1";
}

}  // namespace

bool DistEnv::started_as_rank() {
  return is_set("RANK") || (is_set("SLURM_PROCID") && is_set("SLURM_STEP_NUM_TASKS"));
}

DistEnv DistEnv::from_environment() {
  DistEnv env;
  if (is_set("RANK") || !is_set("SLURM_PROCID")) {
    env.rank = read_int_variable("RANK", 0, true, 0, kTorchrunFix);
    env.world_size = read_int_variable("WORLD_SIZE", 1, true, 1, kTorchrunFix);
    env.local_rank = read_int_variable("LOCAL_RANK", env.rank, false, 0, kTorchrunFix);
    env.local_world_size = read_int_variable("LOCAL_WORLD_SIZE", env.world_size, false, 1, kTorchrunFix);
    read_master(env, false, kTorchrunFix);
    const char* agent = std::getenv("TORCHELASTIC_USE_AGENT_STORE");
    env.use_agent_store = agent != nullptr && std::string(agent) == "True";
    env.source = is_set("SB_LAUNCHER_PID") ? "sparsebalance launcher"
                 : is_set("TORCHELASTIC_RUN_ID") ? "torchrun" : "environment (RANK, WORLD_SIZE)";
  } else {
    env.rank = read_int_variable("SLURM_PROCID", 0, true, 0, kSlurmFix);
    env.world_size = read_int_variable("SLURM_STEP_NUM_TASKS", 1, false, 1, kSlurmFix);
    if (!is_set("SLURM_STEP_NUM_TASKS")) env.world_size = read_int_variable("SLURM_NTASKS", 1, true, 1, kSlurmFix);
    env.local_rank = read_int_variable("SLURM_LOCALID", 0, false, 0, kSlurmFix);
    env.local_world_size = leading_int("SLURM_STEP_TASKS_PER_NODE", 1);
    read_master(env, env.world_size > 1, kSlurmFix);
    env.source = "srun";
  }
  if (env.rank >= env.world_size) {
    throw ConfigError("environment", env.source == "srun" ? "SLURM_PROCID" : "RANK",
                      "is " + std::to_string(env.rank) + " but the world has " +
                          std::to_string(env.world_size) + " ranks",
                      "ranks are numbered 0 .. world size - 1");
  }
  return env;
}

std::string collective_backend_name(CollectiveBackend backend) {
  switch (backend) {
    case CollectiveBackend::kGloo:
      return "gloo";
    case CollectiveBackend::kNccl:
      return "nccl";
  }
  throw std::logic_error("collective_backend_name: unhandled backend");
}

c10::intrusive_ptr<c10d::Store> create_rendezvous_store(const DistEnv& env,
                                                        std::chrono::milliseconds timeout) {
  c10d::TCPStoreOptions options;
  options.port = static_cast<uint16_t>(env.master_port);
  options.isServer = env.rank == 0 && !env.use_agent_store;
  options.numWorkers = env.use_agent_store ? std::nullopt : std::optional<std::size_t>(env.world_size);
  options.waitWorkers = !env.use_agent_store;
  options.timeout = timeout;
  return c10::make_intrusive<c10d::TCPStore>(env.master_addr, options);
}

c10::intrusive_ptr<c10d::Backend> create_group(const c10::intrusive_ptr<c10d::Store>& store,
                                               const std::string& prefix, int group_rank,
                                               int group_size, CollectiveBackend backend,
                                               std::chrono::milliseconds timeout,
                                               const std::string& master_addr) {
  auto group_store = c10::make_intrusive<c10d::PrefixStore>(prefix, store);
  switch (backend) {
    case CollectiveBackend::kGloo: {
      auto options = c10d::ProcessGroupGloo::Options::create();
      options->timeout = timeout;
      if (is_loopback(master_addr)) {
        options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
      } else if (const char* ifname = std::getenv("GLOO_SOCKET_IFNAME"); ifname && *ifname) {
        options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(ifname));
      } else {
        options->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
      }
      return c10::make_intrusive<c10d::ProcessGroupGloo>(group_store, group_rank, group_size, options);
    }
    case CollectiveBackend::kNccl: {
#ifdef SB_WITH_CUDA
      auto options = c10d::ProcessGroupNCCL::Options::create();
      options->timeout = timeout;
      return c10::make_intrusive<c10d::ProcessGroupNCCL>(group_store, group_rank, group_size, options);
#else
      throw std::runtime_error(
          "NCCL was requested but this build has no CUDA support; rebuild with -DSB_CUDA=ON "
          "(needs nvcc) or use the Gloo backend");
#endif
    }
  }
  throw std::logic_error("create_group: unhandled collective backend");
}

c10::intrusive_ptr<c10d::Backend> create_process_group(const DistEnv& env,
                                                       CollectiveBackend backend,
                                                       std::chrono::milliseconds timeout) {
  return create_group(create_rendezvous_store(env, timeout), "world/", env.rank, env.world_size,
                      backend, timeout, env.master_addr);
}

}  // namespace sb
