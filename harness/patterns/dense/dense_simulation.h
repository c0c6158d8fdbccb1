#pragma once
// Dense attention in the simulator (attention_simulation.h): no budget, nothing recorded
// of it; under CP every earlier block of a sequence is kept (ring_work.h, exact counts).

#include "harness/patterns/attention_simulation.h"

namespace sb {

class DenseSimulation : public AttentionSimulation {
 public:
  SimulatedAttention micro_batch(const PlannedMicroBatch& mb, const std::vector<int64_t>& lengths,
                                 int64_t total_layers, IterationRecord& record, std::vector<double>& sample_budgets,
                                 std::vector<double>& sample_references) const override;
  RingWork ring_work(const std::vector<int64_t>& lengths, const std::vector<int64_t>& budgets, int64_t cp,
                     const CpLayout& layout, int64_t query_heads) const override;
  nlohmann::json context(const FittedCoverage* fitted) const override;
  std::vector<int64_t> recorded_budgets(const IterationRecord& record, size_t k, size_t sequences) const override;
};

}  // namespace sb
