#pragma once
// Where each rank sits in a DP x PP job and which layers each pipeline stage holds.
//
// World rank r = dp_rank * pp + stage: the stages of one pipeline are consecutive ranks
// (on one node when pp divides the GPUs per node, so activations travel over NVLink).
// Groups:
//   pipeline group of DP rank d: ranks d*pp .. d*pp + pp - 1 (group rank = stage)
//   data-parallel group of stage s: ranks s, pp + s, 2 pp + s, ... (group rank = dp rank)
//   embedding group of DP rank d (tied embeddings, pp > 1): {first stage, last stage}
//     of pipeline d, which both hold the tied embedding / head weight.

#include <cstdint>
#include <string>
#include <vector>

namespace sb {

struct StageLayers {
  int64_t first = 0;  // first decoder layer of the stage
  int64_t end = 0;    // one past the last
  int64_t count() const { return end - first; }
};

class ParallelLayout {
 public:
  // stage_layers: decoder layers per stage (size pp, each >= 1, summing to num_layers);
  // empty: the even split (see even_stage_split). Throws std::invalid_argument.
  ParallelLayout(int64_t dp, int64_t pp, int64_t num_layers, std::vector<int64_t> stage_layers = {});

  int64_t dp() const { return dp_; }
  int64_t pp() const { return pp_; }
  int64_t world_size() const { return dp_ * pp_; }

  int64_t rank_of(int64_t dp_rank, int64_t stage) const;
  int64_t dp_rank_of(int64_t rank) const;
  int64_t stage_of(int64_t rank) const;
  bool is_first_stage(int64_t rank) const { return stage_of(rank) == 0; }
  bool is_last_stage(int64_t rank) const { return stage_of(rank) == pp_ - 1; }

  const std::vector<int64_t>& stage_layer_counts() const { return stage_layer_counts_; }
  StageLayers layers_of_stage(int64_t stage) const;

  std::vector<int64_t> pipeline_group(int64_t dp_rank) const;      // world ranks, by stage
  std::vector<int64_t> data_parallel_group(int64_t stage) const;   // world ranks, by dp rank
  std::vector<int64_t> embedding_group(int64_t dp_rank) const;     // {first, last}; pp > 1

  // "rank 5 (dp 1, stage 1)" for messages.
  std::string describe_rank(int64_t rank) const;

 private:
  void check_rank(int64_t rank) const;

  int64_t dp_, pp_;
  std::vector<int64_t> stage_layer_counts_;
};

// num_layers split into pp near-equal parts; the first (num_layers mod pp) stages take
// one layer more (the last stage already carries the final norm, head and loss).
std::vector<int64_t> even_stage_split(int64_t num_layers, int64_t pp);

}  // namespace sb
