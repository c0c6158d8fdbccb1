#include "kernels/attention/patterns/sliding_window/sliding_window_backend.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <stdexcept>

#include "kernels/attention/patterns/sliding_window/sliding_window_attention.h"

namespace sb {

SlidingWindowChoice sliding_window_choice(const AttentionBudgetRequest& request, int64_t default_window,
                                          const SlidingWindowMass& mass, int64_t num_sequences, int64_t layer) {
  if (!request.top_k.empty() && static_cast<int64_t>(request.top_k.size()) != num_sequences) {
    throw std::invalid_argument("sliding-window attention (layer " + std::to_string(layer) + "): the budget request holds " +
                                std::to_string(request.top_k.size()) + " budgets but the micro-batch packs " +
                                std::to_string(num_sequences) + " sequences");
  }
  SlidingWindowChoice out;
  out.windows = request.top_k.empty() ? std::vector<int64_t>(num_sequences, default_window) : request.top_k;
  for (int64_t w : out.windows) {
    if (w < 1) throw std::invalid_argument("sliding-window attention: a window must be >= 1, got " + std::to_string(w));
  }
  AttentionLayerStats& stats = out.stats;
  stats.layer = layer;
  if (request.coverage_floor_ratio > 0) {
    const int64_t reference = request.coverage_reference_k > 0 ? request.coverage_reference_k : default_window;
    stats.k_floor = mass.floor_window(request.coverage_floor_ratio, reference);
    for (int64_t& w : out.windows) w = std::max(w, stats.k_floor);
  }
  double kept = 0, rows = 0;
  for (size_t s = 0; s < out.windows.size(); ++s) {
    stats.coverage.push_back(mass.coverage(s, out.windows[s]));
    kept += stats.coverage.back() * mass.rows[s];
    rows += mass.rows[s];
  }
  stats.top_k = out.windows;
  stats.coverage_mean = rows > 0 ? kept / rows : 1.0;
  if (request.coverage_curve_up_to > 0) {
    for (int64_t w = 1; w <= request.coverage_curve_up_to; ++w) stats.coverage_curve.push_back(mass.call_coverage(w));
  }
  return out;
}

SlidingWindowAttention::SlidingWindowAttention(SlidingWindowOptions options) : options_(options) {
  if (const auto problem = sliding_window_first_problem(options_)) {
    throw std::invalid_argument("sliding-window attention: " + problem->field + " " + problem->problem);
  }
}

at::Tensor SlidingWindowAttention::forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                           const PackedSequences& sequences, double scale, int64_t layer) {
  SlidingWindowMass mass = sliding_window_mass(q, k, sequences, options_.sink_tokens, scale);
  if (head_shard_sum_) {  // the layer's coverage over every head, the same on every TP rank
    std::vector<double> flat = mass.flatten();
    head_shard_sum_(flat);
    mass.unflatten(flat);
  }
  SlidingWindowChoice choice =
      sliding_window_choice(request_, options_.window, mass, sequences.num_sequences(), layer);
  stats_[layer] = std::move(choice.stats);
  return sliding_window_attention(q, k, v, sequences, choice.windows, options_.sink_tokens, scale);
}

std::vector<AttentionLayerStats> SlidingWindowAttention::take_layer_stats() { return take_stats_by_layer(stats_); }

at::Tensor SlidingWindowAttention::forward_cached(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                                  double scale) {
  TORCH_CHECK(q.dim() == 3 && k.dim() == 3 && q.size(0) <= k.size(0),
              "sliding-window attention (cached): q [n, Hq, D] and k [L, Hkv, D] with n <= L expected");
  const int64_t window = request_.top_k.size() == 1 ? request_.top_k.front() : options_.window;
  const int64_t n = q.size(0), length = k.size(0);
  if (n == length) {
    return sliding_window_attention(q, k, v, PackedSequences::from_lengths({n}), {window}, options_.sink_tokens, scale);
  }
  // The new queries at positions L - n .. L - 1 against the cache, their keys masked by the rule.
  const auto index = at::TensorOptions().dtype(at::kLong).device(q.device());
  const at::Tensor query = at::arange(length - n, length, index).unsqueeze(1);  // [n, 1]
  const at::Tensor key = at::arange(length, index).unsqueeze(0);                // [1, L]
  const at::Tensor keep =
      key.le(query).logical_and(query.sub(key).lt(window).logical_or(key.lt(options_.sink_tokens)));
  const auto heads_first = [](const at::Tensor& x) { return x.transpose(0, 1).unsqueeze(0); };  // [1, H, L, D]
  const at::Tensor out = at::scaled_dot_product_attention(heads_first(q), heads_first(k), heads_first(v), keep, 0.0,
                                                          false, scale, q.size(1) != k.size(1));
  return out.squeeze(0).transpose(0, 1).contiguous();
}

}  // namespace sb
