#include "harness/balance/lpt.h"

#include <algorithm>
#include <functional>
#include <numeric>
#include <stdexcept>
#include <string>
#include <utility>

namespace sb {
namespace {

// Items by cost, largest first, ties in item order (what a stable sort by cost gives),
// sorted as contiguous (cost, item) pairs rather than through the costs array.
std::vector<int64_t> lpt_order(const std::vector<double>& costs) {
  std::vector<std::pair<double, int64_t>> by_cost;
  by_cost.reserve(costs.size());
  for (size_t i = 0; i < costs.size(); ++i) by_cost.emplace_back(costs[i], static_cast<int64_t>(i));
  std::sort(by_cost.begin(), by_cost.end(), [](const auto& a, const auto& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  });
  std::vector<int64_t> order;
  order.reserve(costs.size());
  for (const auto& [cost, item] : by_cost) order.push_back(item);
  return order;
}

using LoadOfBin = std::pair<double, int64_t>;

// Restores a min-heap of (load, bin) after its top's load grew: the top sinks to its place.
void sink_top(std::vector<LoadOfBin>& heap) {
  const size_t n = heap.size();
  size_t i = 0;
  while (true) {
    const size_t left = 2 * i + 1, right = left + 1;
    size_t smallest = i;
    if (left < n && heap[left] < heap[smallest]) smallest = left;
    if (right < n && heap[right] < heap[smallest]) smallest = right;
    if (smallest == i) return;
    std::swap(heap[i], heap[smallest]);
    i = smallest;
  }
}

}  // namespace

std::vector<int64_t> lpt_assign(const std::vector<double>& costs, int64_t bins) {
  if (bins < 1) throw std::invalid_argument("lpt_assign: bins must be >= 1");
  // (load, bin), smallest first: the least-loaded bin, ties to the lower index, in
  // O(log bins) per item (a scan of every bin per item is O(items x bins): 3.4e7 steps
  // for 16,384 sequences on 2,048 DP ranks).
  std::vector<LoadOfBin> heap;  // a min-heap: the lightest bin on top
  heap.reserve(static_cast<size_t>(bins));
  for (int64_t b = 0; b < bins; ++b) heap.emplace_back(0.0, b);  // ascending: a heap already
  std::vector<int64_t> bin_of(costs.size(), 0);
  for (int64_t item : lpt_order(costs)) {
    // The lightest bin takes the item and sinks to its place. (load, bin) pairs are
    // distinct, so the top is the one minimum whatever the heap's shape.
    bin_of[static_cast<size_t>(item)] = heap.front().second;
    heap.front().first += costs[static_cast<size_t>(item)];
    sink_top(heap);
  }
  return bin_of;
}

std::vector<std::vector<int64_t>> lpt_pack(const std::vector<double>& costs,
                                           const std::vector<int64_t>& sizes, int64_t capacity,
                                           int64_t max_items, int64_t min_bins) {
  if (costs.size() != sizes.size()) throw std::invalid_argument("lpt_pack: costs and sizes differ in length");
  // Loads, sizes and counts per bin, each item's bin; the item lists are made at the end,
  // each at its final size (a DP rank's packing runs once per rank per iteration).
  struct Bin {
    double load = 0;
    int64_t size = 0;
    int64_t items = 0;
  };
  std::vector<Bin> bins(static_cast<size_t>(std::max<int64_t>(min_bins, 1)));
  const std::vector<int64_t> order = lpt_order(costs);
  std::vector<size_t> bin_of(costs.size(), 0);
  for (int64_t item : order) {
    const int64_t size = sizes[static_cast<size_t>(item)];
    if (size > capacity) {
      throw std::invalid_argument("lpt_pack: item " + std::to_string(item) + " of size " +
                                  std::to_string(size) + " exceeds the capacity " +
                                  std::to_string(capacity));
    }
    size_t best = bins.size();
    for (size_t b = 0; b < bins.size(); ++b) {
      const Bin& bin = bins[b];
      const bool fits = bin.size + size <= capacity && (max_items <= 0 || bin.items < max_items);
      if (fits && (best == bins.size() || bin.load < bins[best].load)) best = b;
    }
    if (best == bins.size()) bins.emplace_back();
    Bin& chosen = bins[best];
    chosen.load += costs[static_cast<size_t>(item)];
    chosen.size += size;
    chosen.items += 1;
    bin_of[static_cast<size_t>(item)] = best;
  }
  // Non-empty bins in bin order, each with its items in insertion (LPT) order.
  std::vector<size_t> slot(bins.size(), 0);
  std::vector<std::vector<int64_t>> out;
  for (size_t b = 0; b < bins.size(); ++b) {
    if (bins[b].items == 0) continue;
    slot[b] = out.size();
    out.emplace_back().reserve(static_cast<size_t>(bins[b].items));
  }
  for (int64_t item : order) out[slot[bin_of[static_cast<size_t>(item)]]].push_back(item);
  return out;
}

}  // namespace sb
