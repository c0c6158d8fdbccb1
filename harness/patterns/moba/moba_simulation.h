#pragma once
// MoBA in the simulator (attention_simulation.h): every sequence of a micro-batch runs the
// planned k, raised to DST's floor by the Zipf coverage model (moba_coverage_model.h);
// the ring's work is moba_ring_work.h's.

#include "harness/patterns/attention_simulation.h"
#include "kernels/attention/patterns/moba/moba_coverage_model.h"
#include "kernels/attention/patterns/moba/moba_pattern.h"

namespace sb {

class MobaSimulation : public AttentionSimulation {
 public:
  MobaSimulation(const MobaOptions& options, const SimulationCoverage& coverage);

  SimulatedAttention micro_batch(const PlannedMicroBatch& mb, const std::vector<int64_t>& lengths,
                                 int64_t total_layers, IterationRecord& record, std::vector<double>& sample_budgets,
                                 std::vector<double>& sample_references) const override;
  RingWork ring_work(const std::vector<int64_t>& lengths, const std::vector<int64_t>& budgets, int64_t cp,
                     const CpLayout& layout, int64_t query_heads) const override;
  nlohmann::json context(const FittedCoverage* fitted) const override;
  // Every sequence at the record's mean effective budget over the layers (rounded, at
  // least 1), else the planned one, else k0.
  std::vector<int64_t> recorded_budgets(const IterationRecord& record, size_t k, size_t sequences) const override;

  const ZipfCoverageModel& coverage() const { return coverage_model_; }

 private:
  MobaOptions options_;
  SimulationCoverage settings_;
  ZipfCoverageModel coverage_model_;
};

}  // namespace sb
