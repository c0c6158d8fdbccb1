#pragma once
// The simulator's communication model (docs/simulator.md), on a cluster block
// (harness/config/simulation_spec.h):
//
//   rank placement  TP innermost, then CP, then PP, then DP:
//                     world rank = ((dp_rank * pp + stage) * cp + cp_rank) * tp + tp_rank
//                   (without TP the trainer's order, harness/parallel/parallel_layout.h),
//                   node = world rank / gpus_per_node; two ranks on one node talk over
//                   the intra-node link (NVLink), otherwise over the inter-node one (IB)
//   point to point  alpha-beta: alpha + bytes / bandwidth (one message, one direction)
//   ring all-reduce of n ranks: 2 (n - 1) / n x bytes / bandwidth + 2 (n - 1) alpha, over
//                   the inter-node link as soon as the group spans two nodes (the ring's
//                   slowest hop sets its pace), over the intra-node link otherwise
//   tree all-reduce of n ranks: 2 ceil(log2 n) alpha + 2 x bytes / bandwidth (a reduce up a
//                   binary tree and a broadcast down it, pipelined, so each phase passes the
//                   bytes over a link once: NCCL's tree algorithm in outline)
//   small all-reduce  the faster of the two, as NCCL's tuner picks per size [our rule]: the
//                   planner's observation exchange over the world (the DP gradient
//                   all-reduce keeps the ring model)
//
// Times in milliseconds, bytes in bytes, bandwidths in Gbit/s (10^9 bit/s).

#include <cstdint>

#include "harness/config/simulation_spec.h"

namespace sb {

// alpha + bytes / bandwidth (ms).
double alpha_beta_ms(const LinkSection& link, double bytes);
// Ring all-reduce of `bytes` over `ranks` ranks (ms); 0 for ranks <= 1.
double ring_allreduce_ms(const LinkSection& link, int64_t ranks, double bytes);
// Tree all-reduce of `bytes` over `ranks` ranks (ms); 0 for ranks <= 1.
double tree_allreduce_ms(const LinkSection& link, int64_t ranks, double bytes);
// The faster of ring_allreduce_ms and tree_allreduce_ms.
double fastest_allreduce_ms(const LinkSection& link, int64_t ranks, double bytes);

class ClusterModel {
 public:
  // Throws std::invalid_argument for a layout that is not dp, pp, tp, cp >= 1.
  ClusterModel(ClusterSection cluster, int64_t dp, int64_t pp, int64_t tp, int64_t cp = 1);

  int64_t world_rank(int64_t dp_rank, int64_t stage, int64_t tp_rank, int64_t cp_rank = 0) const;
  int64_t node_of(int64_t world_rank) const;
  int64_t world_size() const { return dp_ * pp_ * tp_ * cp_; }
  int64_t node_count() const;

  // The link between two ranks (intra-node when on one node).
  const LinkSection& link_between(int64_t rank_a, int64_t rank_b) const;
  // Stage -> stage + 1 of DP rank d, CP rank c (TP rank 0's pair; all TP ranks alike).
  const LinkSection& pipeline_link(int64_t dp_rank, int64_t stage, int64_t cp_rank = 0) const;
  // The gradient ring of `stage`: its DP and CP ranks (TP rank 0's group; all TP ranks
  // alike), data_parallel_ranks() of them.
  const LinkSection& data_parallel_link(int64_t stage) const;
  int64_t data_parallel_ranks() const { return dp_ * cp_; }
  // Between CP ranks a and b of (dp_rank, stage) (TP rank 0's; all TP ranks alike).
  const LinkSection& context_parallel_link(int64_t dp_rank, int64_t stage, int64_t cp_a, int64_t cp_b) const;
  // The CP group of (dp_rank, stage) as one collective: inter-node when it spans nodes.
  const LinkSection& context_parallel_group_link(int64_t dp_rank, int64_t stage) const;
  // Every rank as one collective: inter-node when the world spans nodes.
  const LinkSection& world_link() const;
  // The TP group of (dp_rank, stage).
  const LinkSection& tensor_parallel_link(int64_t dp_rank, int64_t stage) const;

  const ClusterSection& cluster() const { return cluster_; }
  int64_t dp() const { return dp_; }
  int64_t pp() const { return pp_; }
  int64_t tp() const { return tp_; }
  int64_t cp() const { return cp_; }

 private:
  ClusterSection cluster_;
  int64_t dp_, pp_, tp_, cp_;
};

}  // namespace sb
