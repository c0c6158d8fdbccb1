#include "kernels/attention/patterns/sliding_window/sliding_window_coverage.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "kernels/attention/patterns/sliding_window/sliding_window_rule.h"

namespace sb {

double SlidingWindowMass::coverage(size_t sequence, int64_t window) const {
  const std::vector<double>& mass = kept.at(sequence);
  if (mass.empty() || rows.at(sequence) <= 0) return 1.0;
  const auto w = static_cast<size_t>(std::clamp<int64_t>(window, 1, static_cast<int64_t>(mass.size())));
  return mass[w - 1] / rows[sequence];
}

double SlidingWindowMass::call_coverage(int64_t window) const {
  double mass = 0, counted = 0;
  for (size_t s = 0; s < kept.size(); ++s) {
    if (kept[s].empty()) continue;
    const auto w = static_cast<size_t>(std::clamp<int64_t>(window, 1, static_cast<int64_t>(kept[s].size())));
    mass += kept[s][w - 1];
    counted += rows[s];
  }
  return counted > 0 ? mass / counted : 1.0;
}

int64_t SlidingWindowMass::floor_window(double ratio, int64_t reference) const {
  int64_t longest = 1;
  for (const auto& mass : kept) longest = std::max<int64_t>(longest, static_cast<int64_t>(mass.size()));
  const double target = ratio * call_coverage(reference);
  int64_t low = 1, high = longest;  // call_coverage(longest) >= any target
  while (low < high) {
    const int64_t mid = low + (high - low) / 2;
    if (call_coverage(mid) >= target) {
      high = mid;
    } else {
      low = mid + 1;
    }
  }
  return low;
}

std::vector<double> SlidingWindowMass::flatten() const {
  std::vector<double> flat(rows.begin(), rows.end());
  for (const auto& mass : kept) flat.insert(flat.end(), mass.begin(), mass.end());
  return flat;
}

void SlidingWindowMass::unflatten(const std::vector<double>& flat) {
  size_t at = 0;
  for (double& r : rows) r = flat.at(at++);
  for (auto& mass : kept) {
    for (double& m : mass) m = flat.at(at++);
  }
}

SlidingWindowMass sliding_window_mass(const at::Tensor& q, const at::Tensor& k, const PackedSequences& sequences,
                                      int64_t sinks, double scale) {
  const c10::NoGradGuard no_grad;
  const int64_t q_heads = q.size(1), group = q_heads / k.size(1);
  const auto index = at::TensorOptions().dtype(at::kLong).device(q.device());
  SlidingWindowMass out;
  for (int64_t s = 0; s < sequences.num_sequences(); ++s) {
    const int64_t begin = sequences.offsets[s], length = sequences.length(s);
    const int64_t n = std::min(kSlidingWindowCoverageQueries, length), sink_count = std::min(sinks, length);
    out.rows.push_back(static_cast<double>(q_heads * n));
    if (length == 0) {
      out.kept.emplace_back();
      continue;
    }
    const at::Tensor position = at::arange(length - n, length, index).unsqueeze(1);  // [n, 1]: p_i
    const at::Tensor key = at::arange(length, index).unsqueeze(0);                    // [1, L]: j, or distance d
    const at::Tensor future = key.gt(position);
    // Query i's key at distance d is p_i - d; it counts for the window when it is no sink.
    const at::Tensor at_distance = position.sub(key).clamp_min(0);                    // [n, L]
    const at::Tensor in_window = position.sub(key).ge(sink_count);
    at::Tensor kept = at::zeros({length}, q.options().dtype(at::kDouble));
    for (int64_t h = 0; h < q_heads; ++h) {
      const at::Tensor last = q.narrow(0, begin + length - n, n).select(1, h).to(at::kDouble);  // [n, D]
      const at::Tensor keys = k.narrow(0, begin, length).select(1, h / group).to(at::kDouble);  // [L, D]
      const at::Tensor attention = at::softmax(at::matmul(last, keys.t()).mul(scale).masked_fill(future, -INFINITY), 1);
      const at::Tensor sink_mass = attention.narrow(1, 0, sink_count).sum(1, /*keepdim=*/true);       // [n, 1]
      const at::Tensor by_distance = attention.gather(1, at_distance).mul(in_window);                 // [n, L]
      kept.add_(by_distance.cumsum(1).add(sink_mass).sum(0));
    }
    const at::Tensor host = kept.cpu();
    out.kept.emplace_back(host.const_data_ptr<double>(), host.const_data_ptr<double>() + length);
  }
  return out;
}

}  // namespace sb
