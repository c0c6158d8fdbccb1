#include "harness/parallel/parallel_layout.h"

#include <numeric>
#include <stdexcept>

namespace sb {

std::vector<int64_t> even_stage_split(int64_t num_layers, int64_t pp) {
  if (pp < 1 || num_layers < pp) {
    throw std::invalid_argument("cannot split " + std::to_string(num_layers) + " layers into " +
                                std::to_string(pp) + " pipeline stages of at least one layer");
  }
  std::vector<int64_t> counts(static_cast<size_t>(pp), num_layers / pp);
  for (int64_t s = 0; s < num_layers % pp; ++s) ++counts[static_cast<size_t>(s)];
  return counts;
}

ParallelLayout::ParallelLayout(int64_t dp, int64_t pp, int64_t num_layers,
                               std::vector<int64_t> stage_layers, int64_t cp, int64_t tp)
    : dp_(dp), pp_(pp), cp_(cp), tp_(tp) {
  if (dp < 1 || pp < 1 || cp < 1 || tp < 1) throw std::invalid_argument("dp, pp, cp and tp must be >= 1");
  if (stage_layers.empty()) {
    stage_layer_counts_ = even_stage_split(num_layers, pp);
    return;
  }
  if (static_cast<int64_t>(stage_layers.size()) != pp) {
    throw std::invalid_argument("the stage split lists " + std::to_string(stage_layers.size()) +
                                " stages but pp is " + std::to_string(pp));
  }
  for (int64_t count : stage_layers) {
    if (count < 1) throw std::invalid_argument("every pipeline stage needs at least one layer");
  }
  const int64_t total = std::accumulate(stage_layers.begin(), stage_layers.end(), int64_t{0});
  if (total != num_layers) {
    throw std::invalid_argument("the stage split holds " + std::to_string(total) +
                                " layers but the model has " + std::to_string(num_layers));
  }
  stage_layer_counts_ = std::move(stage_layers);
}

void ParallelLayout::check_rank(int64_t rank) const {
  if (rank < 0 || rank >= world_size()) {
    throw std::out_of_range("rank " + std::to_string(rank) + " outside a world of " +
                            std::to_string(world_size()));
  }
}

int64_t ParallelLayout::rank_of(int64_t dp_rank, int64_t stage, int64_t cp_rank, int64_t tp_rank) const {
  if (dp_rank < 0 || dp_rank >= dp_ || stage < 0 || stage >= pp_ || cp_rank < 0 || cp_rank >= cp_ || tp_rank < 0 ||
      tp_rank >= tp_) {
    throw std::out_of_range("no rank at dp " + std::to_string(dp_rank) + ", stage " + std::to_string(stage) +
                            ", cp " + std::to_string(cp_rank) + ", tp " + std::to_string(tp_rank));
  }
  return ((dp_rank * pp_ + stage) * cp_ + cp_rank) * tp_ + tp_rank;
}

int64_t ParallelLayout::dp_rank_of(int64_t rank) const {
  check_rank(rank);
  return rank / tp_ / cp_ / pp_;
}

int64_t ParallelLayout::stage_of(int64_t rank) const {
  check_rank(rank);
  return rank / tp_ / cp_ % pp_;
}

int64_t ParallelLayout::cp_rank_of(int64_t rank) const {
  check_rank(rank);
  return rank / tp_ % cp_;
}

int64_t ParallelLayout::tp_rank_of(int64_t rank) const {
  check_rank(rank);
  return rank % tp_;
}

StageLayers ParallelLayout::layers_of_stage(int64_t stage) const {
  if (stage < 0 || stage >= pp_) throw std::out_of_range("no stage " + std::to_string(stage));
  StageLayers layers;
  for (int64_t s = 0; s < stage; ++s) layers.first += stage_layer_counts_[static_cast<size_t>(s)];
  layers.end = layers.first + stage_layer_counts_[static_cast<size_t>(stage)];
  return layers;
}

std::vector<int64_t> ParallelLayout::pipeline_group(int64_t dp_rank, int64_t cp_rank, int64_t tp_rank) const {
  std::vector<int64_t> ranks;
  for (int64_t s = 0; s < pp_; ++s) ranks.push_back(rank_of(dp_rank, s, cp_rank, tp_rank));
  return ranks;
}

std::vector<int64_t> ParallelLayout::data_parallel_group(int64_t stage, int64_t tp_rank) const {
  std::vector<int64_t> ranks;
  for (int64_t d = 0; d < dp_; ++d) {
    for (int64_t c = 0; c < cp_; ++c) ranks.push_back(rank_of(d, stage, c, tp_rank));
  }
  return ranks;
}

std::vector<int64_t> ParallelLayout::context_parallel_group(int64_t dp_rank, int64_t stage, int64_t tp_rank) const {
  std::vector<int64_t> ranks;
  for (int64_t c = 0; c < cp_; ++c) ranks.push_back(rank_of(dp_rank, stage, c, tp_rank));
  return ranks;
}

std::vector<int64_t> ParallelLayout::tensor_parallel_group(int64_t dp_rank, int64_t stage, int64_t cp_rank) const {
  std::vector<int64_t> ranks;
  for (int64_t t = 0; t < tp_; ++t) ranks.push_back(rank_of(dp_rank, stage, cp_rank, t));
  return ranks;
}

std::vector<int64_t> ParallelLayout::embedding_group(int64_t dp_rank, int64_t cp_rank, int64_t tp_rank) const {
  if (pp_ < 2) throw std::logic_error("an embedding group needs two pipeline stages");
  return {rank_of(dp_rank, 0, cp_rank, tp_rank), rank_of(dp_rank, pp_ - 1, cp_rank, tp_rank)};
}

std::string ParallelLayout::describe_rank(int64_t rank) const {
  return "rank " + std::to_string(rank) + " (dp " + std::to_string(dp_rank_of(rank)) + ", stage " +
         std::to_string(stage_of(rank)) + (cp_ > 1 ? ", cp " + std::to_string(cp_rank_of(rank)) : "") +
         (tp_ > 1 ? ", tp " + std::to_string(tp_rank_of(rank)) : "") + ")";
}

}  // namespace sb
