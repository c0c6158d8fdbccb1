#pragma once
// The processes of one `sparsebalance run` command and how they agree: one process
// alone, or the ranks of a job (local launcher, torchrun, srun) that share a
// rendezvous store, a Gloo group over all ranks and a watchdog (rank_watchdog.h).
// Decisions that touch the results folder are taken by rank 0 and shared, so every
// rank acts on the same decision even with a shared file system that is slow to show
// rank 0's changes.

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <functional>
#include <ostream>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

#include "harness/parallel/process_group.h"
#include "harness/parallel/rank_context.h"
#include "harness/parallel/rank_watchdog.h"

namespace sb {

// A failure of this rank that JobSession::report_failure has already printed.
class RankFailure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class JobSession {
 public:
  static std::unique_ptr<JobSession> single_process();
  // Connects this rank (collective over the job). `describe` names ranks in messages.
  static std::unique_ptr<JobSession> connect(const DistEnv& env, std::chrono::milliseconds timeout,
                                             std::function<std::string(int)> describe);
  ~JobSession();

  int rank() const { return env_.rank; }
  int world_size() const { return env_.world_size; }
  bool is_leader() const { return env_.rank == 0; }
  const DistEnv& env() const { return env_; }

  // Rank 0 computes the value, the others receive it. When rank 0's computation
  // throws, every rank throws: a ConfigError stays a ConfigError (exit 2).
  std::string agree(const std::string& key, const std::function<std::string()>& compute);

  // The groups for one run (fresh keys per run name).
  // gpu_backend: the data groups' backend for CUDA ranks (RankContext::connect).
  RankContext connect_run(const std::string& run, ParallelLayout layout, c10::Device device,
                          bool tied_embeddings, CollectiveBackend gpu_backend = CollectiveBackend::kNccl) const;

  // Called with the exception that ends this rank: prints it to `log` (a ConfigError is
  // left to the caller, which prints it) naming peers that have gone silent, then
  // publishes it to the other ranks, who stop with the same exit code (2 for a
  // ConfigError, else 1). Returns the message.
  std::string report_failure(const std::exception& error, std::ostream& log);

  // Clean end of the command: barrier, stop the watchdog, barrier (so that rank 0,
  // which serves the store, leaves last).
  void shutdown();

 private:
  JobSession() = default;
  std::string key(const std::string& name) const { return prefix_ + name; }

  DistEnv env_;
  std::chrono::milliseconds timeout_{60000};
  std::string prefix_;
  std::function<std::string(int)> describe_;
  c10::intrusive_ptr<c10d::Store> store_;
  c10::intrusive_ptr<c10d::Backend> world_;
  std::unique_ptr<RankWatchdog> watchdog_;
  std::optional<std::string> reported_;  // report_failure runs once
};

}  // namespace sb
