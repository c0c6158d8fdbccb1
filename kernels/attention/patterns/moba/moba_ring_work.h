#pragma once
// MoBA's work under context parallelism, per pair of CP ranks, for the simulator
// (ring_work.h; docs/simulator.md, "Context parallelism"). [our rule] Query block i keeps
// every earlier block when its sequence has at most k blocks up to i, else each of its i
// earlier blocks with probability (k - 1) / i: the diagonal takes one of the k slots and
// the k - 1 others fall on the earlier blocks alike (the simulator has no gate scores).
// The counts are expectations; k = 0 keeps every block (dense).

#include <cstdint>
#include <vector>

#include "kernels/attention/ring/ring_work.h"

namespace sb {

// The probability above for budget k and a query block with `earlier` earlier blocks.
double moba_block_keep_probability(int64_t budget, int64_t earlier);

// budgets: one per sequence (packing order). Throws std::invalid_argument on mismatched sizes.
RingWork moba_ring_work(const std::vector<int64_t>& lengths, const std::vector<int64_t>& budgets, int64_t cp,
                        const CpLayout& layout, int64_t block_size, int64_t query_heads);

}  // namespace sb
