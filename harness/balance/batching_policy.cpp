#include "harness/balance/batching_policy.h"

#include <stdexcept>

#include "harness/balance/sequential_batching.h"

namespace sb {

std::vector<std::string> batching_policy_names() { return {"sequential"}; }

std::unique_ptr<BatchingPolicy> make_batching_policy(const std::string& name) {
  if (name == "sequential") return std::make_unique<SequentialBatching>();
  std::string known;
  for (const auto& n : batching_policy_names()) known += (known.empty() ? "" : ", ") + n;
  throw std::invalid_argument("unknown batching policy \"" + name + "\"; known: " + known);
}

}  // namespace sb
