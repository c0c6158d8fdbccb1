#pragma once
// The simulator's model of sliding-window attention (docs/simulator.md; the pattern:
// sliding_window_rule.h). A simulation has no attention scores, so coverage is modelled
// ([our rule]): a query's attention over its causal keys falls with the distance as a Zipf
// law of exponent s (simulation.coverage.exponent), so a query at position p keeps under
// window W
//     H(min(W, p + 1))(s) / H(p + 1)(s),   H(x)(s) = sum_{d <= x} d^-s,
// the sinks' share left out (at most S of the p + 1 keys); C(L, W) is its mean over the
// last min(64, L) queries, as the backend measures it. DST's floor of a sequence is the
// smallest W <= the reference with C(L, W) >= ratio x C(L, reference). The ring's work is
// counted exactly: every query keeps its window and its sinks.

#include <cstdint>
#include <vector>

#include "kernels/attention/ring/ring_work.h"

namespace sb {

class SlidingWindowCoverageModel {
 public:
  explicit SlidingWindowCoverageModel(double exponent);  // >= 0
  double coverage(int64_t length, int64_t window) const;
  int64_t floor_window(int64_t length, int64_t reference, double ratio) const;
  double exponent() const { return exponent_; }

 private:
  double harmonic(int64_t n) const;  // H(n)(s), grown on demand
  double exponent_;
  mutable std::vector<double> harmonic_{0.0};
};

// The work of a micro-batch of `lengths` (packing order) at `windows` per pair of CP ranks,
// summed over query_heads: exact counts of sliding_window_keeps.
RingWork sliding_window_ring_work(const std::vector<int64_t>& lengths, const std::vector<int64_t>& windows,
                                  int64_t sinks, int64_t cp, const CpLayout& layout, int64_t query_heads);

}  // namespace sb
