#pragma once
// How much attention a window keeps, for the layer's statistics and DST's coverage floor
// ([our rule], docs/sliding_window.md "Coverage"): the last n = min(64, L) queries of each
// sequence attend, in float64, to all their causal keys; their kept mass under window W
// (and the S sinks) over their number is the sequence's coverage C_s(W). Every window's is
// computed at once (a cumulative sum over the key distance), so the floor's search and
// the coverage of any budget read one table.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "kernels/attention/core/packed_sequences.h"

namespace sb {

struct SlidingWindowMass {
  // [sequence][W - 1] for W = 1 .. L_s: the kept mass summed over the query heads and the
  // last queries (W >= L_s keeps everything).
  std::vector<std::vector<double>> kept;
  std::vector<double> rows;  // [sequence]: the (query head, last query) rows summed

  // C_s(W) (1 for an empty sequence).
  double coverage(size_t sequence, int64_t window) const;
  // The call's C(W): every sequence's kept mass at W over all rows (1 without rows).
  double call_coverage(int64_t window) const;
  // DST's floor: the smallest W >= 1 with call_coverage(W) >= ratio x call_coverage(reference)
  // (C grows with W; the search stops at the longest sequence, which keeps everything).
  int64_t floor_window(double ratio, int64_t reference) const;
  // One vector of every number (to sum it over tensor-parallel head shards) and back.
  std::vector<double> flatten() const;
  void unflatten(const std::vector<double>& flat);
};

// q [T, Hq, D], k [T, Hkv, D] packed by `sequences` (any device and float dtype);
// detached, float64, the sums on the host.
SlidingWindowMass sliding_window_mass(const at::Tensor& q, const at::Tensor& k, const PackedSequences& sequences,
                                      int64_t sinks, double scale);

}  // namespace sb
