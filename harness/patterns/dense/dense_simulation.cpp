#include "harness/patterns/dense/dense_simulation.h"

namespace sb {

// The blocks the dense work is counted in: any size gives the same counts.
constexpr int64_t kDenseWorkBlock = 128;

SimulatedAttention DenseSimulation::micro_batch(const PlannedMicroBatch& mb, const std::vector<int64_t>& lengths,
                                                int64_t /*total_layers*/, IterationRecord& /*record*/,
                                                std::vector<double>& /*sample_budgets*/,
                                                std::vector<double>& /*sample_references*/) const {
  SimulatedAttention out;
  out.sequence_budgets.assign(lengths.size(), 0);
  out.realized = static_cast<double>(mb.budget);
  return out;
}

RingWork DenseSimulation::ring_work(const std::vector<int64_t>& lengths, const std::vector<int64_t>& /*budgets*/,
                                    int64_t cp, const CpLayout& layout, int64_t query_heads) const {
  return ring_block_work(lengths, cp, layout, kDenseWorkBlock, query_heads, [](int64_t, int64_t) { return 1.0; });
}

nlohmann::json DenseSimulation::context(const FittedCoverage* /*fitted*/) const {
  return {{"model", "none"}, {"reason", "dense attention has no budget"}};
}

std::vector<int64_t> DenseSimulation::recorded_budgets(const IterationRecord& /*record*/, size_t /*k*/,
                                                       size_t sequences) const {
  return std::vector<int64_t>(sequences, 0);
}

}  // namespace sb
