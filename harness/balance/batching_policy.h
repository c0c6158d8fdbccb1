#pragma once
// The batching-policy interface: given the samples of one global batch, decide which
// samples go together into each micro-batch. Policies are chosen by name in the
// manifest (methods[].batching): "sequential" now; LBB and SAB plug in here.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace sb {

// Micro-batches as lists of positions in the global batch, in execution order.
using MicroBatchPlan = std::vector<std::vector<int64_t>>;

class BatchingPolicy {
 public:
  virtual ~BatchingPolicy() = default;
  virtual std::string name() const = 0;
  // sample_lengths[i]: tokens of sample i. Every sample appears in exactly one
  // micro-batch and no micro-batch exceeds max_tokens (a sample longer than
  // max_tokens is an error: std::invalid_argument).
  virtual MicroBatchPlan plan(const std::vector<int64_t>& sample_lengths, int64_t max_tokens) = 0;
};

std::unique_ptr<BatchingPolicy> make_batching_policy(const std::string& name);
std::vector<std::string> batching_policy_names();

}  // namespace sb
