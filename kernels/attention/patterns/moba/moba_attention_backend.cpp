#include "kernels/attention/patterns/moba/moba_attention_backend.h"

#include <stdexcept>
#include <string>

#include "kernels/attention/patterns/moba/moba_attention.h"

namespace sb {

MobaAttention::MobaAttention(int64_t block_size, int64_t default_top_k, MobaCudaKernel cuda_kernel, MobaGate gate)
    : block_size_(block_size), default_top_k_(default_top_k), cuda_kernel_(cuda_kernel), gate_(gate) {
  if (block_size < 1) {
    throw std::invalid_argument("moba attention: block_size must be >= 1, got " +
                                std::to_string(block_size));
  }
  if (default_top_k < 1) {
    throw std::invalid_argument("moba attention: top_k must be >= 1 (it counts the diagonal "
                                "block), got " +
                                std::to_string(default_top_k));
  }
}

void MobaAttention::set_budget_request(const AttentionBudgetRequest& request) {
  request_ = request;
}

MobaParams moba_params_for_request(const AttentionBudgetRequest& request, int64_t block_size,
                                   int64_t default_top_k, double scale, int64_t num_sequences,
                                   int64_t layer) {
  MobaParams params;
  params.block_size = block_size;
  params.scale = scale;
  params.top_k = request.top_k.empty() ? std::vector<int64_t>{default_top_k} : request.top_k;
  if (!request.top_k.empty() && static_cast<int64_t>(request.top_k.size()) != num_sequences) {
    throw std::invalid_argument(
        "moba attention (layer " + std::to_string(layer) + "): the budget request holds " +
        std::to_string(request.top_k.size()) + " budgets but the micro-batch packs " +
        std::to_string(num_sequences) +
        " sequences; set_budget_request must give one budget per sequence (or none)");
  }
  params.coverage_floor_ratio = request.coverage_floor_ratio;
  params.coverage_reference_k = request.coverage_reference_k;
  params.coverage_curve_up_to = request.coverage_curve_up_to;
  return params;
}

AttentionLayerStats moba_layer_stats(int64_t layer, MobaRouting&& routing) {
  AttentionLayerStats stats;
  stats.layer = layer;
  stats.top_k = std::move(routing.top_k);
  stats.coverage = std::move(routing.coverage);
  stats.coverage_mean = routing.coverage_mean;
  stats.k_floor = routing.k_floor;
  stats.coverage_curve = std::move(routing.coverage_curve);
  return stats;
}

at::Tensor MobaAttention::forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                  const PackedSequences& sequences, double scale, int64_t layer) {
  MobaParams params = moba_params_for_request(request_, block_size_, default_top_k_, scale,
                                              sequences.num_sequences(), layer);
  params.sum_over_head_shards = head_shard_sum_;
  params.cuda_kernel = cuda_kernel_;
  params.gate = gate_;
  MobaResult result = moba_attention(q, k, v, sequences, params);
  stats_[layer] = moba_layer_stats(layer, std::move(result.routing));
  return result.out;
}

std::vector<AttentionLayerStats> MobaAttention::take_layer_stats() { return take_stats_by_layer(stats_); }

at::Tensor MobaAttention::forward_cached(const at::Tensor& q, const at::Tensor& k,
                                         const at::Tensor& v, double scale) {
  TORCH_CHECK(q.dim() == 3 && k.dim() == 3, "moba attention (cached): q and k must be [n, H, D]");
  MobaParams params;
  params.block_size = block_size_;
  params.scale = scale;
  params.top_k = {request_.top_k.size() == 1 ? request_.top_k.front() : default_top_k_};
  params.coverage_floor_ratio = request_.coverage_floor_ratio;
  params.coverage_reference_k = request_.coverage_reference_k;
  params.cuda_kernel = cuda_kernel_;
  params.gate = gate_;
  return moba_attention_packed(q, k, v, PackedSequences::from_lengths({q.size(0)}),
                               PackedSequences::from_lengths({k.size(0)}), params)
      .out;
}

}  // namespace sb
