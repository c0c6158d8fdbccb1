#pragma once
// Vertical-slash attention as an attention backend ("vertical_slash"): each forward
// builds the index of every (sequence, query head) from the call's own q and k
// (vertical_slash_index.h) and runs the CPU kernel (vertical_slash_attention_cpu.h); per
// layer it records the pattern's coverage of the last queries' attention mass.
// Used by `sparsebalance bench attention --impl vertical_slash`; not yet selectable in a
// manifest (docs/vertical_slash.md, "State").

#include <map>
#include <string>
#include <vector>

#include "kernels/attention/attention_backend.h"
#include "kernels/attention/vertical_slash/vertical_slash_index.h"

namespace sb {

class VerticalSlashAttention : public AttentionBackend {
 public:
  // Throws std::invalid_argument for params that do not validate.
  explicit VerticalSlashAttention(VerticalSlashParams params);

  std::string name() const override { return "vertical_slash"; }
  at::Tensor forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                     const PackedSequences& sequences, double scale, int64_t layer) override;
  // Per layer: coverage per sequence (mean over its query heads) and over the call;
  // top_k holds each sequence's kept keys per query, averaged over its heads and rows.
  std::vector<AttentionLayerStats> take_layer_stats() override;
  // Decoding with a cache is not built: std::logic_error.
  at::Tensor forward_cached(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            double scale) override;

  const VerticalSlashParams& params() const { return params_; }

 private:
  VerticalSlashParams params_;
  std::map<int64_t, AttentionLayerStats> stats_;  // by layer; a rerun replaces its entry
};

}  // namespace sb
