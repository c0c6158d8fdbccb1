#pragma once
// c10d process groups from the launcher's environment. The variables are torchrun's
// (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT), so the same binary runs
// under torchrun, srun wrappers that export them, or this project's own launcher.
// Rendezvous is a TCPStore served by rank 0. Every wait is bounded by `timeout`:
// a rank that never arrives makes the others fail with a clear error, not hang.

#include <torch/csrc/distributed/c10d/Backend.hpp>

#include <chrono>
#include <string>

namespace sb {

struct DistEnv {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;

  // Reads the torchrun variables; a missing or malformed one is a ConfigError naming
  // the variable. RANK and WORLD_SIZE are required; LOCAL_RANK defaults to RANK,
  // MASTER_ADDR to 127.0.0.1, MASTER_PORT to 29500.
  static DistEnv from_environment();
};

enum class CollectiveBackend { kGloo, kNccl };

// Creates the store and the process group of all ranks. NCCL requires a CUDA build
// (SB_CUDA) and a GPU per local rank; asking for it elsewhere throws.
c10::intrusive_ptr<c10d::Backend> create_process_group(const DistEnv& env,
                                                       CollectiveBackend backend,
                                                       std::chrono::milliseconds timeout);

// "none" when NCCL is not compiled in, else "<major>.<minor>.<patch>".
std::string nccl_version_string();

}  // namespace sb
