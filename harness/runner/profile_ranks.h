#pragma once
// The processes a tensor- or context-parallel latency profile is measured on
// (latency_profiler.h): the run's tp TP ranks, timing their shares of each point together
// with the collectives between them, or its cp CP ranks, timing each point's micro-batch
// dealt to them with attention a ring over them. `sparsebalance profile --tensor-parallel N` started by hand, and `run`
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
class RingContext;

// Starts `ranks` processes of this executable (the sparsebalance binary) with `arguments`
// (argv without the executable, e.g. profile_command_arguments) as ranks 0..ranks-1 of
// one job on this machine, their output prefixed with the rank, and waits for them.
// Returns 0, or launch_local_ranks's code after the first failure stopped them all.
int launch_profile_ranks(int64_t ranks, const std::vector<std::string>& arguments, std::ostream& log);

struct ProfileRanksOptions {
  int64_t tp = 1;                 // the job's world size must be tp x cp
  int64_t cp = 1;
  int64_t cp_inner = 0;           // ranks per inner ring (0: flat)
  bool cuda = false;              // the ranks time on GPUs (the local rank's, or shared with kGloo)
  CollectiveBackend gpu_backend = CollectiveBackend::kNccl;  // with cuda: kGloo stages through host memory
  std::chrono::milliseconds timeout{300000};  // rendezvous and every collective's wait
};

// In a process started as a rank (DistEnv::started_as_rank()): connects the TP group (tp
// > 1) or the CP ring (cp > 1) of the job's ranks and runs body(group, ring, leader) on
// each, null where the size is 1 (leader: rank 0, which writes and prints). A rank that fails stops
// the others (bounded by the timeout) with its message naming it. Returns the exit code:
// 0, 2 for a ConfigError, 1 otherwise.
using ProfileRankBody = std::function<void(std::shared_ptr<TensorParallelGroup>, std::shared_ptr<RingContext>, bool)>;
int run_as_profile_rank(const ProfileRanksOptions& options, const ProfileRankBody& body, std::ostream& log);

}  // namespace sb
