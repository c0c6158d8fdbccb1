#include "harness/latency/microbatch_latency_curves.h"

#include <algorithm>
#include <stdexcept>

namespace sb {

MicrobatchLatencyCurves::MicrobatchLatencyCurves(const LatencyPredictor& predictor, int64_t total_layers,
                                                 int64_t lowest_budget, int64_t highest_budget)
    : predictor_(&predictor),
      layers_(static_cast<double>(total_layers)),
      lowest_budget_(lowest_budget),
      add_head_(predictor.options().include_head),
      scaled_(predictor.has_microbatch_scale()) {
  for (int64_t k = lowest_budget; k <= highest_budget; ++k) budget_points_.push_back(predictor.locate_budget(k));
}

LatencyPredictor::BudgetPoint MicrobatchLatencyCurves::budget_point(int64_t budget) const {
  const int64_t slot = budget - lowest_budget_;
  if (slot >= 0 && slot < static_cast<int64_t>(budget_points_.size())) return budget_points_[static_cast<size_t>(slot)];
  return predictor_->locate_budget(budget);
}

size_t MicrobatchLatencyCurves::add(const std::vector<int64_t>& samples, const std::vector<int64_t>& sample_lengths) {
  if (samples.empty()) throw std::invalid_argument("LatencyPredictor: empty micro-batch");
  Microbatch mb;
  mb.first = points_.size();
  mb.count = samples.size();
  int64_t total = 0;
  for (int64_t s : samples) {
    const int64_t length = sample_lengths.at(static_cast<size_t>(s));
    if (length < 1) throw std::invalid_argument("LatencyPredictor: sequence length must be >= 1");
    total += length;
    points_.push_back(predictor_->locate(length));
    rest_.push_back(predictor_->rest_ms(points_.back()));
  }
  // One sequence: the total is its length, already located.
  const LatencyPredictor::LengthPoint at_total = mb.count == 1 ? points_.back() : predictor_->locate(total);
  mb.rest_total = predictor_->rest_ms(at_total);
  if (add_head_) mb.head_total = predictor_->head_ms(at_total);
  mb.overhead_total = predictor_->microbatch_overhead_ms(total);
  if (scaled_) mb.scale = predictor_->microbatch_scale(total);
  microbatches_.push_back(mb);
  return microbatches_.size() - 1;
}

double MicrobatchLatencyCurves::at(size_t m, int64_t budget) const {
  const Microbatch& mb = microbatches_[m];
  const LatencyPredictor::BudgetPoint k = budget_point(budget);
  // The operations of LatencyPredictor::microbatch_ms in its order: the attention terms
  // (packed_attention_ms), the layer, the stage with the head, the overhead, the scale.
  double sum = 0, largest = 0;
  for (size_t i = mb.first; i < mb.first + mb.count; ++i) {
    const double term = std::max(0.0, predictor_->layer_ms(points_[i], k) - rest_[i]);
    sum += term;
    largest = std::max(largest, term);
  }
  const double attention = std::max(largest, sum - static_cast<double>(mb.count - 1) * predictor_->attention_fixed_ms());
  double ms = layers_ * (attention + mb.rest_total);
  if (add_head_) ms += mb.head_total;
  ms = std::max(0.0, ms + mb.overhead_total);
  return scaled_ ? ms * mb.scale : ms;
}

}  // namespace sb
