#pragma once
// MoBA as an attention backend ("moba"): the model's attention calls moba_attention
// with the budget of the current request, and the backend records, per layer, the
// budget each sequence got and the routing-score coverage.
//
// Decoding with a cache (forward_cached): the n new queries are the last n positions.
// Under the token gate each routes by itself, as in training; under the block gate the
// gate's query side of a block is the mean of the new queries in that block. Either way
// a prefill (n = L) is exactly the training forward and a one-token step gates with the
// token's own query (docs/sparsebalance.md 1.1, "MoBA decoding rule").

#include <map>

#include "kernels/attention/core/attention_backend.h"
#include "kernels/attention/patterns/moba/moba_attention.h"

namespace sb {

// The MoBA parameters of a budget request: its budgets (one per sequence, or the default
// when it holds none; std::invalid_argument naming the layer for another count), floor
// and curve. Shared by every backend that runs MoBA.
MobaParams moba_params_for_request(const AttentionBudgetRequest& request, int64_t block_size,
                                   int64_t default_top_k, double scale, int64_t num_sequences,
                                   int64_t layer);
// A layer's statistics from its routing.
AttentionLayerStats moba_layer_stats(int64_t layer, MobaRouting&& routing);

class MobaAttention : public AttentionBackend {
 public:
  MobaAttention(int64_t block_size, int64_t default_top_k,
                MobaCudaKernel cuda_kernel = MobaCudaKernel::kAuto, MobaGate gate = MobaGate::kBlock);

  std::string name() const override { return "moba"; }
  at::Tensor forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                     const PackedSequences& sequences, double scale, int64_t layer) override;
  void set_budget_request(const AttentionBudgetRequest& request) override;
  void set_head_shard_sum(std::function<void(std::vector<double>&)> sum) override { head_shard_sum_ = std::move(sum); }
  std::vector<AttentionLayerStats> take_layer_stats() override;
  // Budget: the request's when it holds exactly one, else the default; the floor of
  // the request applies. Records no statistics (no layer index).
  at::Tensor forward_cached(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            double scale) override;

  int64_t block_size() const { return block_size_; }
  int64_t default_top_k() const { return default_top_k_; }
  MobaGate gate() const { return gate_; }

 private:
  int64_t block_size_;
  int64_t default_top_k_;
  MobaCudaKernel cuda_kernel_;
  MobaGate gate_;
  AttentionBudgetRequest request_;
  std::function<void(std::vector<double>&)> head_shard_sum_;  // MobaParams::sum_over_head_shards
  std::map<int64_t, AttentionLayerStats> stats_;  // by layer; a rerun replaces its entry
};

}  // namespace sb
