#include "harness/balance/batching_policy.h"

#include <stdexcept>

#include "harness/balance/lbb_batching.h"
#include "harness/balance/sab_batching.h"
#include "harness/balance/sequential_batching.h"

namespace sb {

std::vector<std::string> batching_policy_names() { return {"sequential", "lbb", "sab"}; }

std::unique_ptr<BatchingPolicy> make_batching_policy(const std::string& name,
                                                     const BatchingDependencies& dependencies) {
  if (name == "sequential") return std::make_unique<SequentialBatching>();
  if (name == "lbb") return std::make_unique<LbbBatching>();
  if (name == "sab") {
    if (dependencies.predictor == nullptr || dependencies.estimator == nullptr) {
      throw std::invalid_argument("the sab batching policy needs a latency profile (methods[].profile)");
    }
    return std::make_unique<SabBatching>(*dependencies.predictor, *dependencies.estimator,
                                         dependencies.total_layers);
  }
  std::string known;
  for (const auto& n : batching_policy_names()) known += (known.empty() ? "" : ", ") + n;
  throw std::invalid_argument("unknown batching policy \"" + name + "\"; known: " + known);
}

void check_batching_input(const BatchingInput& input) {
  if (input.dp < 1) throw std::invalid_argument("batching: dp must be >= 1");
  if (input.max_tokens < 1) throw std::invalid_argument("batching: max_tokens must be >= 1");
  if (input.max_samples < 0) throw std::invalid_argument("batching: max_samples must be >= 0");
  for (size_t i = 0; i < input.sample_lengths.size(); ++i) {
    if (input.sample_lengths[i] > input.max_tokens) {
      throw std::invalid_argument(
          "sample " + std::to_string(i) + " of the global batch has " +
          std::to_string(input.sample_lengths[i]) +
          " tokens, more than train.max_tokens_per_microbatch = " +
          std::to_string(input.max_tokens) +
          " (fix: raise train.max_tokens_per_microbatch or shorten the data)");
    }
  }
}

}  // namespace sb
