#pragma once
// The batching-policy interface: given the samples of one global batch, decide which
// data-parallel rank trains each sample and how each rank's samples are packed into
// micro-batches. Policies are chosen by name in the manifest (methods[].batching):
// "sequential", "lbb" (token balance) and "sab" (predicted-latency balance).

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "harness/balance/batch_plan.h"
#include "common/option_names.h"

namespace sb {

struct BatchingInput {
  std::vector<int64_t> sample_lengths;  // tokens of each sample of the global batch
  int64_t dp = 1;                       // data-parallel ranks
  int64_t max_tokens = 0;               // capacity of one packed micro-batch
  int64_t max_samples = 0;              // samples per micro-batch at most; 0 = no limit
};

class BatchingPolicy {
 public:
  virtual ~BatchingPolicy() = default;
  virtual std::string name() const = 0;
  // Every sample appears in exactly one micro-batch of one rank, no micro-batch exceeds
  // max_tokens. A sample longer than max_tokens is an error (std::invalid_argument
  // naming the sample), raised before anything is planned. Budgets are left at 0 (the
  // budget policy sets them).
  virtual GlobalBatchPlan plan(const BatchingInput& input) = 0;
};

class LatencyPredictor;
class BudgetEstimator;

// What some policies need: SAB needs a latency predictor and the budget estimator (both
// must outlive the policy) and the model's decoder-layer count.
struct BatchingDependencies {
  const LatencyPredictor* predictor = nullptr;
  const BudgetEstimator* estimator = nullptr;
  int64_t total_layers = 1;
};

// methods[].batching.
enum class BatchingKind { kSequential, kLbb, kSab };
// "sequential" | "lbb" | "sab"; from_name throws std::invalid_argument listing them.
const OptionNames<BatchingKind>& batching_kind_options();

// Throws std::invalid_argument for a policy whose dependencies are missing.
std::unique_ptr<BatchingPolicy> make_batching_policy(BatchingKind kind, const BatchingDependencies& dependencies = {});

// Throws std::invalid_argument naming the first sample longer than max_tokens, and for
// dp < 1 or max_tokens < 1. Every policy calls it first.
void check_batching_input(const BatchingInput& input);

}  // namespace sb
