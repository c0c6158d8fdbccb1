#pragma once
// Everything one rank needs to know about the job it is part of: where it sits
// (layout, rank), the process groups it belongs to, the common clock and the device.
// Groups of one member are null: there is nothing to communicate.
//
//   world          Gloo over all ranks (CPU tensors): control traffic such as the
//                  per-iteration reports, barriers, clock alignment
//   pipeline       this rank's pipeline (group rank = stage): activations
//   data_parallel  the ranks holding this rank's stage, every DP and CP rank (group rank =
//                  dp rank * cp + cp rank): gradients
//   context_parallel  the CP ranks sharing this rank's micro-batches (group rank = cp
//                  rank): the ring attention
//   tensor_parallel  the TP ranks sharing this rank's layers (group rank = tp rank): the
//                  sequence-parallel all-gathers and reduce-scatters of every layer
//   embedding      first and last stage of this pipeline (tied embeddings, pp > 1)
//   exchange       all ranks, for the one per-iteration sum that brings the planner's
//                  observations to every rank (harness/train/plan_observations.h): NCCL
//                  over the GPUs when the data groups use NCCL (a tree all-reduce at scale),
//                  otherwise the world group itself; its tensors live on exchange_device
// The others use NCCL when the device is a GPU and Gloo on the CPU, or Gloo with the
// tensors staged through host memory on GPUs that ranks share (HostStagedBackend).

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <c10/core/Device.h>

#include <chrono>
#include <string>

#include "harness/parallel/parallel_layout.h"
#include "harness/parallel/process_group.h"
#include "harness/trace/timeline.h"

namespace sb {

struct RankContext {
  ParallelLayout layout{1, 1, 1};
  int64_t rank = 0;
  int64_t local_world_size = 1;  // ranks on this host (they share its cores)
  c10::Device device{c10::kCPU};
  std::chrono::milliseconds timeout{60000};
  CommonClock clock;
  double origin_unix_ms = 0;  // Unix time of common-clock 0 (rank 0's reading)
  c10::intrusive_ptr<c10d::Backend> world, pipeline, data_parallel, context_parallel, tensor_parallel, embedding;
  c10::intrusive_ptr<c10d::Backend> exchange;
  c10::Device exchange_device{c10::kCPU};
  c10::intrusive_ptr<c10d::Store> store;  // the job's store (null alone)
  std::string store_prefix;               // this run's keys

  int64_t dp_rank() const { return layout.dp_rank_of(rank); }
  int64_t stage() const { return layout.stage_of(rank); }
  int64_t cp_rank() const { return layout.cp_rank_of(rank); }
  int64_t tp_rank() const { return layout.tp_rank_of(rank); }
  std::string describe() const { return layout.describe_rank(rank); }

  // One process, one stage, no groups.
  static RankContext single_process(ParallelLayout layout, c10::Device device);

  // Creates this rank's groups over `store` under keys `prefix`... (distinct per run)
  // and aligns the clocks. Collective: every rank of the job calls it. `tied_embeddings`:
  // whether the model ties its head to the embedding (then pp > 1 needs the embedding
  // group). With a CUDA device the current device becomes this rank's GPU: its local
  // rank's with `gpu_backend` NCCL (one GPU per rank, more local ranks than GPUs are
  // refused), local rank mod the visible GPUs with Gloo (ranks may share a GPU; the
  // data groups stage their tensors through host memory).
  static RankContext connect(const DistEnv& env, ParallelLayout layout,
                             const c10::intrusive_ptr<c10d::Store>& store, const std::string& prefix,
                             c10::Device device, bool tied_embeddings, std::chrono::milliseconds timeout,
                             CollectiveBackend gpu_backend = CollectiveBackend::kNccl);

  // Barrier over all ranks (no-op alone) bounded by `timeout`; a failure names this rank.
  void barrier() const;
  // Barrier for slow work such as writing checkpoints, bounded by `limit` instead: over
  // the store, one key per rank under `name` (unique per use); on timeout the error
  // names the ranks that have not arrived. Rank deaths are caught by the watchdog.
  void wait_for_all(const std::string& name, std::chrono::milliseconds limit) const;
};

}  // namespace sb
