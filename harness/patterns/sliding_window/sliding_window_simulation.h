#pragma once
// Sliding-window attention in the simulator (attention_simulation.h): every sequence runs
// the planned window, raised to DST's floor by the Zipf-by-distance coverage model
// (sliding_window_work_model.h); the ring's work is counted exactly.

#include "harness/patterns/attention_simulation.h"
#include "kernels/attention/patterns/sliding_window/sliding_window_rule.h"
#include "kernels/attention/patterns/sliding_window/sliding_window_work_model.h"

namespace sb {

class SlidingWindowSimulation : public AttentionSimulation {
 public:
  SlidingWindowSimulation(const SlidingWindowOptions& options, const SimulationCoverage& coverage);

  SimulatedAttention micro_batch(const PlannedMicroBatch& mb, const std::vector<int64_t>& lengths,
                                 int64_t total_layers, IterationRecord& record, std::vector<double>& sample_budgets,
                                 std::vector<double>& sample_references) const override;
  RingWork ring_work(const std::vector<int64_t>& lengths, const std::vector<int64_t>& budgets, int64_t cp,
                     const CpLayout& layout, int64_t query_heads) const override;
  nlohmann::json context(const FittedCoverage* fitted) const override;
  // Every sequence at the record's mean window over the layers (rounded), else the planned
  // one, else the default.
  std::vector<int64_t> recorded_budgets(const IterationRecord& record, size_t k, size_t sequences) const override;
  const SlidingWindowCoverageModel& model() const { return model_; }

 private:
  SlidingWindowOptions options_;
  SimulationCoverage settings_;
  SlidingWindowCoverageModel model_;
};

}  // namespace sb
