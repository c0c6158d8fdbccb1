#pragma once
// Vertical-slash in the simulator (attention_simulation.h): each sequence's kept keys per
// query, reference rule, DST floor and coverage from the pattern model
// (vertical_slash_pattern_model.h), reported as the backend reports them; the ring's work
// is vertical_slash_ring_work.h's.

#include "harness/patterns/attention_simulation.h"
#include "kernels/attention/patterns/vertical_slash/vertical_slash_index.h"
#include "kernels/attention/patterns/vertical_slash/vertical_slash_pattern_model.h"

namespace sb {

class VerticalSlashSimulation : public AttentionSimulation {
 public:
  // Throws std::invalid_argument when the settings give no model (a top-k rule whose
  // counts are all 0 and no rule_keys).
  VerticalSlashSimulation(const VerticalSlashParams& params, const SimulationCoverage& coverage);

  SimulatedAttention micro_batch(const PlannedMicroBatch& mb, const std::vector<int64_t>& lengths,
                                 int64_t total_layers, IterationRecord& record, std::vector<double>& sample_budgets,
                                 std::vector<double>& sample_references) const override;
  RingWork ring_work(const std::vector<int64_t>& lengths, const std::vector<int64_t>& budgets, int64_t cp,
                     const CpLayout& layout, int64_t query_heads) const override;
  nlohmann::json context(const FittedCoverage* fitted) const override;
  // Each sequence's kept keys per query (sequence_budgets, rounded), or the micro-batch's
  // mean over the layers for every sequence without them.
  std::vector<int64_t> recorded_budgets(const IterationRecord& record, size_t k, size_t sequences) const override;

  const VerticalSlashPatternModel& model() const { return model_; }

 private:
  VerticalSlashParams params_;
  SimulationCoverage settings_;
  VerticalSlashPatternModel model_;
};

}  // namespace sb
