#pragma once
// How concentrated MoBA's routing is on held-out samples of the run's synthetic task:
// the coverage curve C(k) (docs/sparsebalance.md 1.1, "routing-score coverage"), and
// the budget DST's coverage floor would keep at each p. A model whose gate scores are
// near-uniform has C(k) close to k / K and a floor close to k0; a model whose routing
// has concentrated reaches most of C(k0) with few blocks, so the floor lets budgets fall.
//
// Per held-out sample (the ids of synthetic_heldout.h, one sample per forward pass, no
// gradients) and per layer, the MoBA gate gives the call-wide curve C(1) .. C(K_s), K_s
// the sample's most eligible blocks; C(k) = 1 from K_s on. From it:
//   floor(p) = the smallest k with C(k) >= (1 - p) C(min(k0, K_s)), as the layer computes
//              it under DST with that sample alone in the micro-batch.
// Reported means are over (sample, layer) pairs: overall, per layer, and per length
// bucket [2^b, 2^(b+1)) tokens (the buckets of DST's floor estimator).
//
// Output (JSON):
//   {"block_size", "top_k", "gate", "samples", "k": [1 .. k_max],
//    "curve": [...], "floor": {"0.1": mean floor, ...},
//    "layers": [{"layer", "curve", "floor"}],
//    "buckets": [{"min_tokens", "max_tokens", "samples", "curve", "floor"}]}

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "kernels/attention/patterns/attention_pattern.h"
#include "models/qwen2/qwen2_model.h"

namespace sb {

class Dataset;  // harness/data/dataset.h

struct RoutingCoverageOptions {
  int64_t samples = 16;
  int64_t block_size = 0;  // MoBA block size; 0: the run's MoBA attention's
  int64_t top_k = 0;       // k0 the floors refer to; 0: the run's MoBA attention's
  // MoBA's gate, "token" or "block"; "": the run's MoBA attention's (block for other patterns).
  std::string gate;
  int64_t k_max = 0;       // curve length; 0: the most eligible blocks of any sample
  std::vector<double> p{0.1, 0.2, 0.3};
  bool before = true;  // also measure the weights the run started from
};

// The block size and k0 eval.coverage routes with by default: a run's own where its
// pattern reports a coverage curve (AttentionPattern::reports_coverage_curve), else
// {0, 0} (the section must name them).
std::pair<int64_t, int64_t> routing_geometry(const AttentionOptions& attention);

// options.block_size and options.top_k must be set (>= 1). Runs model with a MoBA
// backend of that block size and restores the model's own backend afterwards.
nlohmann::ordered_json routing_coverage(Qwen2ForCausalLM& model, const Dataset& data,
                                        const RoutingCoverageOptions& options);

// The floor budget of one curve (curve[k - 1] = C(k)) at p for reference budget k0.
int64_t coverage_floor_of_curve(const std::vector<double>& curve, double p, int64_t k0);

}  // namespace sb
