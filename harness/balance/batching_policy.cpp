#include "harness/balance/batching_policy.h"

#include <stdexcept>

#include "harness/balance/lbb_batching.h"
#include "harness/balance/sab_batching.h"
#include "harness/balance/sequential_batching.h"
#include "common/option_names.h"

namespace sb {

const OptionNames<BatchingKind>& batching_kind_options() {
  static const OptionNames<BatchingKind> names{
      "batching policy",
      {{"sequential", BatchingKind::kSequential}, {"lbb", BatchingKind::kLbb}, {"sab", BatchingKind::kSab}}};
  return names;
}

std::unique_ptr<BatchingPolicy> make_batching_policy(BatchingKind kind, const BatchingDependencies& dependencies) {
  switch (kind) {
    case BatchingKind::kSequential:
      return std::make_unique<SequentialBatching>();
    case BatchingKind::kLbb:
      return std::make_unique<LbbBatching>();
    case BatchingKind::kSab:
      if (dependencies.predictor == nullptr || dependencies.estimator == nullptr) {
        throw std::invalid_argument("the sab batching policy needs a latency profile (methods[].profile)");
      }
      return std::make_unique<SabBatching>(*dependencies.predictor, *dependencies.estimator,
                                           dependencies.total_layers);
  }
  throw std::logic_error("make_batching_policy: unhandled BatchingKind");
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
