#include "harness/sim/cluster_model.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace sb {

double alpha_beta_ms(const LinkSection& link, double bytes) {
  return link.alpha_us / 1000.0 + bytes * 8.0 / (link.bandwidth_gbps * 1e9) * 1000.0;
}

double ring_allreduce_ms(const LinkSection& link, int64_t ranks, double bytes) {
  if (ranks <= 1) return 0.0;
  const double n = static_cast<double>(ranks);
  return 2.0 * (n - 1.0) / n * bytes * 8.0 / (link.bandwidth_gbps * 1e9) * 1000.0 +
         2.0 * (n - 1.0) * link.alpha_us / 1000.0;
}

double tree_allreduce_ms(const LinkSection& link, int64_t ranks, double bytes) {
  if (ranks <= 1) return 0.0;
  const double depth = std::ceil(std::log2(static_cast<double>(ranks)));
  return 2.0 * depth * link.alpha_us / 1000.0 + 2.0 * bytes * 8.0 / (link.bandwidth_gbps * 1e9) * 1000.0;
}

double fastest_allreduce_ms(const LinkSection& link, int64_t ranks, double bytes) {
  return std::min(ring_allreduce_ms(link, ranks, bytes), tree_allreduce_ms(link, ranks, bytes));
}

ClusterModel::ClusterModel(ClusterSection cluster, int64_t dp, int64_t pp, int64_t tp, int64_t cp)
    : cluster_(std::move(cluster)), dp_(dp), pp_(pp), tp_(tp), cp_(cp) {
  if (dp < 1 || pp < 1 || tp < 1 || cp < 1) {
    throw std::invalid_argument("ClusterModel: dp, pp, tp and cp must be >= 1 (got " + std::to_string(dp) + ", " +
                                std::to_string(pp) + ", " + std::to_string(tp) + ", " + std::to_string(cp) + ")");
  }
  if (cluster_.gpus_per_node < 1) throw std::invalid_argument("ClusterModel: gpus_per_node must be >= 1");
}

int64_t ClusterModel::world_rank(int64_t dp_rank, int64_t stage, int64_t tp_rank, int64_t cp_rank) const {
  return ((dp_rank * pp_ + stage) * cp_ + cp_rank) * tp_ + tp_rank;
}

int64_t ClusterModel::node_of(int64_t rank) const { return rank / cluster_.gpus_per_node; }

int64_t ClusterModel::node_count() const {
  return (world_size() + cluster_.gpus_per_node - 1) / cluster_.gpus_per_node;
}

const LinkSection& ClusterModel::link_between(int64_t a, int64_t b) const {
  return node_of(a) == node_of(b) ? cluster_.intra_node : cluster_.inter_node;
}

const LinkSection& ClusterModel::pipeline_link(int64_t dp_rank, int64_t stage, int64_t cp_rank) const {
  return link_between(world_rank(dp_rank, stage, 0, cp_rank), world_rank(dp_rank, stage + 1, 0, cp_rank));
}

const LinkSection& ClusterModel::data_parallel_link(int64_t stage) const {
  const int64_t first = node_of(world_rank(0, stage, 0));
  for (int64_t d = 0; d < dp_; ++d) {
    for (int64_t c = 0; c < cp_; ++c) {
      if (node_of(world_rank(d, stage, 0, c)) != first) return cluster_.inter_node;
    }
  }
  return cluster_.intra_node;
}

const LinkSection& ClusterModel::context_parallel_link(int64_t dp_rank, int64_t stage, int64_t cp_a,
                                                       int64_t cp_b) const {
  return link_between(world_rank(dp_rank, stage, 0, cp_a), world_rank(dp_rank, stage, 0, cp_b));
}

const LinkSection& ClusterModel::context_parallel_group_link(int64_t dp_rank, int64_t stage) const {
  return context_parallel_link(dp_rank, stage, 0, cp_ - 1);
}

const LinkSection& ClusterModel::world_link() const {
  return node_count() > 1 ? cluster_.inter_node : cluster_.intra_node;
}

const LinkSection& ClusterModel::tensor_parallel_link(int64_t dp_rank, int64_t stage) const {
  return link_between(world_rank(dp_rank, stage, 0), world_rank(dp_rank, stage, tp_ - 1));
}

}  // namespace sb
