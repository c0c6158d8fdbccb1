#include "harness/latency/microbatch_latency_curves.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <stdexcept>

namespace sb {
namespace {

// Micro-batches per task on the intra-op threads.
constexpr int64_t kFillBlock = 512;

}  // namespace

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
  add_all({&samples}, sample_lengths);
  return microbatches_.size() - 1;
}

void MicrobatchLatencyCurves::add_all(const std::vector<const std::vector<int64_t>*>& microbatches,
                                      const std::vector<int64_t>& sample_lengths) {
  const size_t first = microbatches_.size();
  size_t sequences = points_.size();
  for (const std::vector<int64_t>* samples : microbatches) {
    if (samples->empty()) throw std::invalid_argument("LatencyPredictor: empty micro-batch");
    Microbatch mb;
    mb.first = sequences;
    mb.count = samples->size();
    sequences += mb.count;
    microbatches_.push_back(mb);
  }
  points_.resize(sequences);
  rest_.resize(sequences);
  // Each micro-batch writes only its own entries: any split over the threads gives the same.
  at::parallel_for(0, static_cast<int64_t>(microbatches.size()), kFillBlock, [&](int64_t begin, int64_t end) {
    for (int64_t m = begin; m < end; ++m) {
      fill(microbatches_[first + static_cast<size_t>(m)], *microbatches[static_cast<size_t>(m)], sample_lengths);
    }
  });
}

void MicrobatchLatencyCurves::fill(Microbatch& mb, const std::vector<int64_t>& samples,
                                   const std::vector<int64_t>& sample_lengths) {
  int64_t total = 0;
  for (size_t i = 0; i < samples.size(); ++i) {
    const int64_t length = sample_lengths.at(static_cast<size_t>(samples[i]));
    if (length < 1) throw std::invalid_argument("LatencyPredictor: sequence length must be >= 1");
    total += length;
    points_[mb.first + i] = predictor_->locate(length);
    rest_[mb.first + i] = predictor_->rest_ms(points_[mb.first + i]);
  }
  // One sequence: the total is its length, already located.
  const LatencyPredictor::LengthPoint at_total = mb.count == 1 ? points_[mb.first] : predictor_->locate(total);
  mb.rest_total = predictor_->rest_ms(at_total);
  if (add_head_) mb.head_total = predictor_->head_ms(at_total);
  mb.overhead_total = predictor_->microbatch_overhead_ms(total);
  if (scaled_) mb.scale = predictor_->microbatch_scale(total);
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
