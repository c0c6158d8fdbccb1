#pragma once
// The processes a tensor-parallel latency profile is measured on (latency_profiler.h):
// the run's tp TP ranks, timing their shares of each point together with the collectives
// between them. `sparsebalance profile --tensor-parallel N` started by hand, and `run`
// measuring a TP run's missing profile, start them on this machine with the local
// launcher; under torchrun or srun each process is one of them already.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "harness/parallel/process_group.h"

namespace sb {

class TensorParallelGroup;

// Starts tp processes of `executable` (empty: this process's) with `arguments` (argv
// without the executable, e.g. profile_command_arguments) as TP ranks 0..tp-1 of one job
// on this machine, their output prefixed with the rank, and waits for them. Returns 0,
// or launch_local_ranks's code after the first failure stopped them all.
int launch_profile_ranks(int64_t tp, const std::string& executable, const std::vector<std::string>& arguments,
                         std::ostream& log);

struct ProfileRanksOptions {
  int64_t tp = 2;                 // the job's world size must be this
  bool cuda = false;              // the ranks time on GPUs (the local rank's, or shared with kGloo)
  CollectiveBackend gpu_backend = CollectiveBackend::kNccl;  // with cuda: kGloo stages through host memory
  std::chrono::milliseconds timeout{300000};  // rendezvous and every collective's wait
};

// In a process started as a rank (DistEnv::started_as_rank()): connects the TP group of
// the job's tp ranks and runs body(group, leader) on each (leader: TP rank 0, which
// writes and prints). A rank that fails stops the others (bounded by the timeout) with
// its message naming it. Returns the exit code: 0, 2 for a ConfigError, 1 otherwise.
int run_as_profile_rank(const ProfileRanksOptions& options,
                        const std::function<void(std::shared_ptr<TensorParallelGroup>, bool)>& body,
                        std::ostream& log);

}  // namespace sb
