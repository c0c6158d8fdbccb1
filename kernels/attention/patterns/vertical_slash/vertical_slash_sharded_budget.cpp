#include "kernels/attention/patterns/vertical_slash/vertical_slash_sharded_budget.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

#include "kernels/attention/patterns/vertical_slash/vertical_slash_budget.h"

namespace sb {
namespace {

// Probes per round: the interval is cut into this many parts.
constexpr uint64_t kProbeIntervals = 32;

// A non-negative double's bit pattern, which orders as the doubles do.
uint64_t ordered_bits(double x) {
  uint64_t bits = 0;
  std::memcpy(&bits, &x, sizeof bits);
  return bits;
}

double from_bits(uint64_t bits) {
  double x = 0.0;
  std::memcpy(&x, &bits, sizeof x);
  return x;
}

// One target still searching: P <= limit at lo, not at hi (bit patterns), hi - lo >= 2.
struct Interval {
  size_t target = 0;
  uint64_t lo = 0, hi = 0;
  std::vector<uint64_t> probes;  // this round's, ascending, strictly inside
};

std::vector<uint64_t> probes_inside(uint64_t lo, uint64_t hi) {
  std::vector<uint64_t> probes;
  const uint64_t width = hi - lo;
  if (width <= kProbeIntervals) {
    for (uint64_t b = lo + 1; b < hi; ++b) probes.push_back(b);
    return probes;
  }
  const uint64_t step = width / kProbeIntervals;  // step x kProbeIntervals <= width
  for (uint64_t i = 1; i < kProbeIntervals; ++i) probes.push_back(lo + step * i);
  return probes;
}

}  // namespace

std::vector<double> vertical_slash_budget_thresholds(const std::vector<VerticalSlashBudgetTarget>& targets,
                                                     const std::function<void(std::vector<double>&)>& sum_over_head_shards) {
  std::vector<double> thresholds(targets.size(), 0.0);
  for (const VerticalSlashBudgetTarget& t : targets) {
    if (t.kept_keys <= 0 || t.length <= 0 || !(t.total > 0.0) || t.heads.empty()) {
      throw std::invalid_argument("vertical-slash budget search: a target needs kept_keys > 0, a non-empty sequence, "
                                  "n > 0 and at least one head (got kept_keys " + std::to_string(t.kept_keys) +
                                  ", length " + std::to_string(t.length) + ", " + std::to_string(t.heads.size()) +
                                  " heads)");
    }
  }
  if (!sum_over_head_shards) {
    for (size_t j = 0; j < targets.size(); ++j) {
      const VerticalSlashBudgetTarget& t = targets[j];
      thresholds[j] = vertical_slash_budget_threshold(t.heads, t.kept_keys, t.length, t.total);
    }
    return thresholds;
  }
  if (targets.empty()) return thresholds;  // every rank has the same targets: all skip alike

  // The head count and both ends of every target: [heads, P(0), P(n), P(0), P(n), ...].
  std::vector<double> ends{static_cast<double>(targets.front().heads.size())};
  for (const VerticalSlashBudgetTarget& t : targets) {
    ends.push_back(static_cast<double>(vertical_slash_pairs_at(t.heads, 0.0, t.length)));
    ends.push_back(static_cast<double>(vertical_slash_pairs_at(t.heads, t.total, t.length)));
  }
  sum_over_head_shards(ends);
  const double heads = ends[0];
  std::vector<double> limits;
  std::vector<Interval> searching;
  for (size_t j = 0; j < targets.size(); ++j) {
    const VerticalSlashBudgetTarget& t = targets[j];
    // As the one-rank search: no query keeps more than `length` keys.
    limits.push_back(static_cast<double>(std::min(t.kept_keys, t.length)) * static_cast<double>(t.length) * heads);
    if (ends[1 + 2 * j] > limits[j]) {
      thresholds[j] = 0.0;  // even level 0 keeps more
    } else if (ends[2 + 2 * j] <= limits[j]) {
      thresholds[j] = t.total;  // level 1 fits
    } else {
      searching.push_back({j, ordered_bits(0.0), ordered_bits(t.total), {}});
    }
  }
  while (!searching.empty()) {
    std::vector<double> pairs;
    for (Interval& interval : searching) {
      interval.probes = probes_inside(interval.lo, interval.hi);
      const VerticalSlashBudgetTarget& t = targets[interval.target];
      for (const uint64_t b : interval.probes) {
        pairs.push_back(static_cast<double>(vertical_slash_pairs_at(t.heads, from_bits(b), t.length)));
      }
    }
    sum_over_head_shards(pairs);
    size_t at = 0;
    std::vector<Interval> still;
    for (Interval& interval : searching) {
      for (const uint64_t b : interval.probes) {  // ascending; P never falls
        if (pairs[at++] <= limits[interval.target]) {
          interval.lo = b;
        } else {
          interval.hi = std::min(interval.hi, b);
        }
      }
      if (interval.hi - interval.lo <= 1) {
        thresholds[interval.target] = from_bits(interval.lo);
      } else {
        still.push_back(std::move(interval));
      }
    }
    searching = std::move(still);
  }
  return thresholds;
}

}  // namespace sb
