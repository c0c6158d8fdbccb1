#pragma once
// The routing-score coverage model the simulator uses for DST's per-layer floor
// (docs: sparsebalance.md 1.1 and 1.5; docs/simulator.md). In a real run the floor is
// applied by the MoBA backend at run time from the gate scores: each layer runs
// max(k_m, smallest k with C(k) >= (1 - p) C(k0)). The BatchPlanner itself only uses
// predicted latency. The simulator has no gate scores, so it models C:
//
//   "zipf" (exponent s): the routing probabilities of a query block's n eligible blocks,
//   ranked, fall as a Zipf law, pi_j = j^-s / H_n(s) with H_n(s) = sum_{j<=n} j^-s, and
//   the selected blocks are the top min(k, n) (the diagonal block counted as the
//   highest-ranked one). With L tokens in B-token blocks, query block i (0-based) has
//   n_i = i + 1 eligible blocks, and
//       C(L, k) = mean over i of H_{min(k, n_i)}(s) / H_{n_i}(s).
//   s = 0 is uniform routing (C = selected share); larger s concentrates the mass.
//   The exponent is an assumption of the manifest (simulation.coverage.exponent,
//   default 1.0), not a measurement; one model for every layer and head.
//
// The floor budget of a sequence: the smallest k in [1, k0] with
// C(L, k) >= ratio x C(L, k0); its effective budget max(k_m, floor).

#include <cstdint>
#include <map>
#include <vector>

namespace sb {

class ZipfCoverageModel {
 public:
  ZipfCoverageModel(double exponent, int64_t block_size);

  double coverage(int64_t length, int64_t budget) const;
  int64_t floor_budget(int64_t length, int64_t reference_k, double ratio) const;
  int64_t effective_budget(int64_t length, int64_t planned_k, int64_t reference_k, double ratio) const;

  double exponent() const { return exponent_; }

 private:
  int64_t blocks(int64_t length) const { return (length + block_size_ - 1) / block_size_; }
  // H_n(s) for n = 0 .. max_blocks (grown on demand).
  double harmonic(int64_t n) const;

  double exponent_;
  int64_t block_size_;
  mutable std::vector<double> harmonic_{0.0};
  mutable std::map<std::pair<int64_t, int64_t>, double> cache_;  // (blocks, k) -> C
};

}  // namespace sb
