#pragma once
// Where each rank sits in a DP x PP x CP x TP job and which layers each pipeline stage holds.
//
// World rank r = ((dp_rank * pp + stage) * cp + cp_rank) * tp + tp_rank: the TP ranks of
// one stage are consecutive (innermost, as Megatron orders them: on one node, where
// their per-layer collectives need the fastest links), then the CP ranks, then the
// stages of one pipeline. With cp = tp = 1 this is r = dp_rank * pp + stage.
// Groups:
//   pipeline group of (DP rank d, CP rank c, TP rank t): its pp stages (group rank = stage)
//   data-parallel group of (stage s, TP rank t): every rank holding the same shard of
//     stage s, DP and CP ranks alike (group rank = dp_rank * cp + cp_rank): gradients
//     are summed over all of them
//   context-parallel group of (d, s, t): its cp ranks (group rank = cp rank)
//   tensor-parallel group of (d, s, c): its tp ranks (group rank = tp rank)
//   embedding group of (d, c, t) (tied embeddings, pp > 1): {first stage, last stage}
//     of that pipeline, which both hold the tied embedding / head weight (shard).

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
  ParallelLayout(int64_t dp, int64_t pp, int64_t num_layers, std::vector<int64_t> stage_layers = {},
                 int64_t cp = 1, int64_t tp = 1);

  int64_t dp() const { return dp_; }
  int64_t pp() const { return pp_; }
  int64_t cp() const { return cp_; }
  int64_t tp() const { return tp_; }
  int64_t world_size() const { return dp_ * pp_ * cp_ * tp_; }

  int64_t rank_of(int64_t dp_rank, int64_t stage, int64_t cp_rank = 0, int64_t tp_rank = 0) const;
  int64_t dp_rank_of(int64_t rank) const;
  int64_t stage_of(int64_t rank) const;
  int64_t cp_rank_of(int64_t rank) const;
  int64_t tp_rank_of(int64_t rank) const;
  bool is_first_stage(int64_t rank) const { return stage_of(rank) == 0; }
  bool is_last_stage(int64_t rank) const { return stage_of(rank) == pp_ - 1; }

  const std::vector<int64_t>& stage_layer_counts() const { return stage_layer_counts_; }
  StageLayers layers_of_stage(int64_t stage) const;

  std::vector<int64_t> pipeline_group(int64_t dp_rank, int64_t cp_rank = 0, int64_t tp_rank = 0) const;  // by stage
  std::vector<int64_t> data_parallel_group(int64_t stage, int64_t tp_rank = 0) const;  // by dp rank, then cp rank
  std::vector<int64_t> context_parallel_group(int64_t dp_rank, int64_t stage, int64_t tp_rank = 0) const;  // by cp rank
  std::vector<int64_t> tensor_parallel_group(int64_t dp_rank, int64_t stage, int64_t cp_rank = 0) const;  // by tp rank
  // {first, last}; pp > 1
  std::vector<int64_t> embedding_group(int64_t dp_rank, int64_t cp_rank = 0, int64_t tp_rank = 0) const;

  // "rank 5 (dp 1, stage 1)" for messages; ", cp 1" and ", tp 1" added when cp, tp > 1.
  std::string describe_rank(int64_t rank) const;

 private:
  void check_rank(int64_t rank) const;

  int64_t dp_, pp_, cp_, tp_;
  std::vector<int64_t> stage_layer_counts_;
};

// num_layers split into pp near-equal parts; the first (num_layers mod pp) stages take
// one layer more (the last stage already carries the final norm, head and loss).
std::vector<int64_t> even_stage_split(int64_t num_layers, int64_t pp);

}  // namespace sb
