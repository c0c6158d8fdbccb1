#pragma once
// Longest-processing-time-first greedy, the [our rule] of SAB's two stages and of LBB
// (docs: sparsebalance.md 1.3, 1.4). Items are taken in descending cost (ties: lower
// index first); each goes to the least-loaded bin (ties: lower bin index). Graham's
// bound holds: the heaviest bin is at most mean load + the largest item.

#include <cstdint>
#include <vector>

namespace sb {

// Assigns every item to one of `bins` bins (no capacity). Returns the bin of each item.
std::vector<int64_t> lpt_assign(const std::vector<double>& costs, int64_t bins);

// Bin packing with a capacity: item i has cost costs[i] and size sizes[i]. Starts with
// `min_bins` empty bins (at least 1); each item, in LPT order, goes to the least-loaded
// bin that still has room for its size (sum of sizes <= capacity) and, when max_items > 0,
// fewer than max_items items; if no bin has room, a new bin is opened. Returns the bins
// as lists of item indices (each in insertion order); empty bins are dropped. Throws
// std::invalid_argument for an item larger than the capacity.
std::vector<std::vector<int64_t>> lpt_pack(const std::vector<double>& costs,
                                           const std::vector<int64_t>& sizes, int64_t capacity,
                                           int64_t max_items, int64_t min_bins);

}  // namespace sb
