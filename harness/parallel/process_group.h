#pragma once
// c10d process groups from the launcher's environment. The variables are torchrun's
// (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT), so the
// same binary runs under torchrun, under this project's own launcher, or under srun
// (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID inside a job step, with MASTER_ADDR and
// MASTER_PORT exported by the job script). Rendezvous is a TCPStore served by rank 0,
// or by torchrun's agent when it says so (TORCHELASTIC_USE_AGENT_STORE=True). Every
// wait is bounded by `timeout`: a rank that never arrives makes the others fail with a
// clear error, not hang.

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <string>
#include <vector>

namespace sb {

struct DistEnv {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  bool use_agent_store = false;  // torchrun's agent serves the store; rank 0 is a client
  std::string source = "single process";  // "torchrun", "srun", "sparsebalance launcher"

  // Reads the torchrun variables, or srun's when RANK is absent and SLURM_PROCID and
  // SLURM_STEP_NUM_TASKS are set (a job step; a batch script alone is not one). A
  // missing or malformed variable is a ConfigError naming it. RANK and WORLD_SIZE are
  // required; LOCAL_RANK defaults to RANK, LOCAL_WORLD_SIZE to WORLD_SIZE, MASTER_ADDR
  // to 127.0.0.1, MASTER_PORT to 29500. Under srun with more than one task MASTER_ADDR
  // is required (docs/distributed.md, "Job scripts", shows how a job script sets it).
  static DistEnv from_environment();
  // True when the process was started as one rank of a job (torchrun, srun, or this
  // project's launcher), i.e. from_environment() applies.
  static bool started_as_rank();
};

enum class CollectiveBackend { kGloo, kNccl };
std::string collective_backend_name(CollectiveBackend backend);

// The rendezvous store of the job (see above); waits up to `timeout` for every rank.
c10::intrusive_ptr<c10d::Store> create_rendezvous_store(const DistEnv& env,
                                                        std::chrono::milliseconds timeout);

// A process group over `store` keys under `prefix` (distinct per group), of which this
// process is member `group_rank` of `group_size`. NCCL requires a CUDA build (SB_CUDA)
// and the current CUDA device set to this rank's GPU; asking for it elsewhere throws.
// master_addr picks Gloo's network interface: a loopback address keeps Gloo on
// loopback; otherwise GLOO_SOCKET_IFNAME, else the interface of this host's name.
c10::intrusive_ptr<c10d::Backend> create_group(const c10::intrusive_ptr<c10d::Store>& store,
                                               const std::string& prefix, int group_rank,
                                               int group_size, CollectiveBackend backend,
                                               std::chrono::milliseconds timeout,
                                               const std::string& master_addr);

// The store and the process group of all ranks (the two-process tests use it).
c10::intrusive_ptr<c10d::Backend> create_process_group(const DistEnv& env,
                                                       CollectiveBackend backend,
                                                       std::chrono::milliseconds timeout);


}  // namespace sb
