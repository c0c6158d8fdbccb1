#include "kernels/attention/patterns/sliding_window/sliding_window_work_model.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "kernels/attention/patterns/sliding_window/sliding_window_rule.h"

namespace sb {

SlidingWindowCoverageModel::SlidingWindowCoverageModel(double exponent) : exponent_(exponent) {
  if (!(exponent >= 0)) throw std::invalid_argument("sliding-window coverage model: the exponent must be >= 0");
}

double SlidingWindowCoverageModel::harmonic(int64_t n) const {
  while (static_cast<int64_t>(harmonic_.size()) <= n) {
    const auto d = static_cast<double>(harmonic_.size());
    harmonic_.push_back(harmonic_.back() + std::pow(d, -exponent_));
  }
  return harmonic_[static_cast<size_t>(n)];
}

double SlidingWindowCoverageModel::coverage(int64_t length, int64_t window) const {
  if (length < 1) return 1.0;
  const int64_t n = std::min(kSlidingWindowCoverageQueries, length);
  double sum = 0;
  for (int64_t p = length - n; p < length; ++p) sum += harmonic(std::min(window, p + 1)) / harmonic(p + 1);
  return sum / static_cast<double>(n);
}

int64_t SlidingWindowCoverageModel::floor_window(int64_t length, int64_t reference, double ratio) const {
  const double target = ratio * coverage(length, reference);
  int64_t low = 1, high = std::max<int64_t>(1, reference);
  while (low < high) {
    const int64_t mid = low + (high - low) / 2;
    if (coverage(length, mid) >= target) {
      high = mid;
    } else {
      low = mid + 1;
    }
  }
  return low;
}

RingWork sliding_window_ring_work(const std::vector<int64_t>& lengths, const std::vector<int64_t>& windows,
                                  int64_t sinks, int64_t cp, const CpLayout& layout, int64_t query_heads) {
  if (lengths.size() != windows.size()) {
    throw std::invalid_argument("sliding_window_ring_work: " + std::to_string(lengths.size()) + " lengths but " +
                                std::to_string(windows.size()) + " windows");
  }
  DealtMicrobatch dealt = deal_microbatch(lengths, cp, layout);
  RingWork& work = dealt.work;
  const auto W = static_cast<size_t>(cp);
  for (int64_t s = 0; s < dealt.packed.num_sequences(); ++s) {
    const int64_t offset = dealt.packed.offsets[static_cast<size_t>(s)], length = dealt.packed.length(s);
    const int64_t window = std::max<int64_t>(1, windows[static_cast<size_t>(s)]);
    // before[r][j]: keys 0 .. j - 1 of the sequence rank r holds.
    std::vector<std::vector<double>> before(W, std::vector<double>(static_cast<size_t>(length) + 1, 0.0));
    for (int64_t j = 0; j < length; ++j) {
      for (size_t r = 0; r < W; ++r) before[r][static_cast<size_t>(j) + 1] = before[r][static_cast<size_t>(j)];
      before[static_cast<size_t>(dealt.owner[static_cast<size_t>(offset + j)])][static_cast<size_t>(j) + 1] += 1;
    }
    const auto held = [&](size_t r, int64_t first, int64_t end) {  // keys [first, end) rank r holds
      return end > first ? before[r][static_cast<size_t>(end)] - before[r][static_cast<size_t>(first)] : 0.0;
    };
    for (int64_t p = 0; p < length; ++p) {
      std::vector<double>& row = work.pairs[static_cast<size_t>(dealt.owner[static_cast<size_t>(offset + p)])];
      const int64_t window_first = std::max<int64_t>(0, p - window + 1);
      const int64_t sink_end = std::min(sinks, window_first);
      for (size_t r = 0; r < W; ++r) row[r] += held(r, window_first, p + 1) + held(r, 0, sink_end);
    }
  }
  for (auto& row : work.pairs) {
    for (double& p : row) p *= static_cast<double>(query_heads);
  }
  return std::move(work);
}

}  // namespace sb
