#include "harness/train/plan_observations.h"

#include <numeric>
#include <stdexcept>
#include <string>

namespace sb {

double PlanObservations::loss_sum() const {
  double sum = 0;
  for (double share : loss_shares) sum += share;
  return sum;
}

PlanObservationSlots::PlanObservationSlots(const GlobalBatchPlan& plan, const ParallelLayout& layout, size_t samples)
    : plan_(plan), layout_(layout), sample_count_(samples) {
  if (plan.dp() != layout.dp()) {
    throw std::invalid_argument("plan observations: a plan for " + std::to_string(plan.dp()) +
                                " DP ranks in a layout of " + std::to_string(layout.dp()));
  }
  for (const auto& rank : plan.ranks) {
    first_microbatch_.push_back(microbatches_);
    microbatches_ += rank.size();
  }
  budgets_ = microbatches_ * static_cast<size_t>(2 * layout_.pp());
  samples_ = budgets_ + 3 * microbatches_;
  references_ = samples_ + 2 * sample_count_;
  ranks_ = references_ + 1;
  size_ = ranks_ + 2 * static_cast<size_t>(layout.world_size());
}

std::vector<double> PlanObservationSlots::share(int64_t rank, const std::vector<TimelineEvent>& events,
                                                const std::vector<std::vector<AttentionLayerStats>>& layer_stats,
                                                double loss_sum, double grad_norm_squared) const {
  std::vector<double> slots(size_, 0.0);
  const int64_t d = layout_.dp_rank_of(rank), s = layout_.stage_of(rank);
  const bool lane = layout_.cp_rank_of(rank) == 0 && layout_.tp_rank_of(rank) == 0;
  const auto& mine = plan_.ranks.at(static_cast<size_t>(d));
  const size_t first = first_microbatch_[static_cast<size_t>(d)];
  if (lane) {
    for (const TimelineEvent& e : events) {
      if (e.kind != EventKind::kForward && e.kind != EventKind::kBackward) continue;
      if (e.microbatch < 0 || static_cast<size_t>(e.microbatch) >= mine.size()) {
        throw std::invalid_argument("plan observations: " + layout_.describe_rank(rank) + " timed micro-batch " +
                                    std::to_string(e.microbatch) + " of " + std::to_string(mine.size()));
      }
      const size_t slot = latency_slot(first + static_cast<size_t>(e.microbatch), s) +
                          (e.kind == EventKind::kForward ? 0 : 1);
      slots[slot] += e.duration_ms();
    }
    for (size_t j = 0; j < layer_stats.size() && j < mine.size(); ++j) {
      const PlannedMicroBatch& mb = mine[j];
      const size_t b = budget_slot(first + j);
      for (const AttentionLayerStats& layer : layer_stats[j]) {
        if (layer.top_k.size() != mb.samples.size()) {
          throw std::invalid_argument("plan observations: " + layout_.describe_rank(rank) + " reported " +
                                      std::to_string(layer.top_k.size()) + " budgets in layer " +
                                      std::to_string(layer.layer) + " of micro-batch " + std::to_string(j) + " of " +
                                      std::to_string(mb.samples.size()) + " sequences");
        }
        slots[b] += static_cast<double>(std::accumulate(layer.top_k.begin(), layer.top_k.end(), int64_t{0}));
        slots[b + 1] += 1.0;
        slots[b + 2] += static_cast<double>(layer.k_floor);
        if (layer.reference_top_k.empty()) continue;
        if (layer.reference_top_k.size() != mb.samples.size()) {
          throw std::invalid_argument("plan observations: " + layout_.describe_rank(rank) + " reported " +
                                      std::to_string(layer.reference_top_k.size()) + " reference budgets in layer " +
                                      std::to_string(layer.layer) + " of a micro-batch of " +
                                      std::to_string(mb.samples.size()) + " sequences");
        }
        slots[references_] += 1.0;
        for (size_t i = 0; i < mb.samples.size(); ++i) {
          slots[sample_slot(mb.samples[i])] += static_cast<double>(layer.top_k[i]);
          slots[sample_slot(mb.samples[i]) + 1] += static_cast<double>(layer.reference_top_k[i]);
        }
      }
    }
  }
  if (layout_.is_last_stage(rank) && layout_.tp_rank_of(rank) == 0) slots[rank_slot(rank)] = loss_sum;
  slots[rank_slot(rank) + 1] = grad_norm_squared;
  return slots;
}

PlanObservations PlanObservationSlots::read(const std::vector<double>& summed, int64_t num_layers) const {
  if (summed.size() != size_) {
    throw std::invalid_argument("plan observations: " + std::to_string(summed.size()) + " values where the plan has " +
                                std::to_string(size_) + " slots");
  }
  PlanObservations out;
  const auto layers = static_cast<double>(num_layers);
  size_t k = 0;
  for (const auto& rank : plan_.ranks) {
    out.budgets.emplace_back();
    out.floors.emplace_back();
    out.latency_ms.emplace_back();
    for (const PlannedMicroBatch& mb : rank) {
      double latency = 0;
      for (int64_t s = 0; s < layout_.pp(); ++s) {
        latency += summed[latency_slot(k, s)];
        latency += summed[latency_slot(k, s) + 1];
      }
      const size_t b = budget_slot(k);
      const double reported = summed[b + 1];
      if (reported != 0 && reported != layers) {
        throw std::invalid_argument("plan observations: micro-batch " + std::to_string(k) + " has statistics for " +
                                    std::to_string(static_cast<int64_t>(reported)) + " of its " +
                                    std::to_string(num_layers) + " layers");
      }
      out.budgets.back().push_back(reported > 0 ? summed[b] / (layers * static_cast<double>(mb.samples.size()))
                                                : static_cast<double>(mb.budget));
      out.floors.back().push_back(reported > 0 ? summed[b + 2] / layers : 0.0);
      out.latency_ms.back().push_back(latency);
      ++k;
    }
  }
  if (summed[references_] > 0) {
    out.sample_budgets.resize(sample_count_);
    out.sample_references.resize(sample_count_);
    for (size_t i = 0; i < sample_count_; ++i) {
      out.sample_budgets[i] = summed[sample_slot(static_cast<int64_t>(i))] / layers;
      out.sample_references[i] = summed[sample_slot(static_cast<int64_t>(i)) + 1] / layers;
    }
  }
  for (int64_t r = 0; r < layout_.world_size(); ++r) {
    out.loss_shares.push_back(summed[rank_slot(r)]);
    out.grad_norm_squared.push_back(summed[rank_slot(r) + 1]);
  }
  return out;
}

}  // namespace sb
