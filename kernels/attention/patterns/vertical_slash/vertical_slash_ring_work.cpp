#include "kernels/attention/patterns/vertical_slash/vertical_slash_ring_work.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "kernels/attention/patterns/vertical_slash/vertical_slash_pattern_model.h"
#include "kernels/attention/core/packed_sequences.h"

namespace sb {

RingWork vertical_slash_ring_work(const std::vector<int64_t>& lengths, const std::vector<int64_t>& kept_keys, int64_t cp,
                                  const CpLayout& layout, int64_t sink, int64_t window, double spread,
                                  int64_t query_heads) {
  if (lengths.size() != kept_keys.size()) {
    throw std::invalid_argument("vertical_slash_ring_work: " + std::to_string(lengths.size()) + " lengths but " +
                                std::to_string(kept_keys.size()) + " kept-key counts");
  }
  if (sink < 0 || window < 0) throw std::invalid_argument("vertical_slash_ring_work: sink and window must be >= 0");
  DealtMicrobatch dealt = deal_microbatch(lengths, cp, layout);
  const PackedSequences& packed = dealt.packed;
  const std::vector<int32_t>& owner = dealt.owner;
  RingWork& work = dealt.work;
  const auto W = static_cast<size_t>(cp);

  // Keys per rank in the query's causal past, its sinks, its window and between them.
  std::vector<double> past(W), sinks(W), near(W), middle(W);
  for (int64_t s = 0; s < packed.num_sequences(); ++s) {
    const int64_t offset = packed.offsets[static_cast<size_t>(s)], length = packed.length(s);
    if (length == 0) continue;
    const VerticalSlashShape shape{sink + window, spread};
    const double level =
        shape.level_for_kept_keys(length, static_cast<double>(std::max<int64_t>(1, kept_keys[static_cast<size_t>(s)])));
    std::fill(past.begin(), past.end(), 0.0);
    std::fill(sinks.begin(), sinks.end(), 0.0);
    std::fill(near.begin(), near.end(), 0.0);
    std::fill(middle.begin(), middle.end(), 0.0);
    const auto rank_of = [&](int64_t position) { return static_cast<size_t>(owner[static_cast<size_t>(offset + position)]); };
    for (int64_t i = 0; i < length; ++i) {
      // Key i joins the past and the window; key i - window leaves the window for the middle.
      past[rank_of(i)] += 1;
      if (i < sink) sinks[rank_of(i)] += 1;
      near[rank_of(i)] += 1;
      if (i - window >= 0) {
        near[rank_of(i - window)] -= 1;
        if (i - window >= sink) middle[rank_of(i - window)] += 1;
      }
      std::vector<double>& row = work.pairs[rank_of(i)];
      const double extra = shape.query_keys(length, i, level) - static_cast<double>(sink + window);
      const auto between = static_cast<double>(i + 1 - sink - window);
      if (i + 1 <= sink + window || extra >= between) {
        for (size_t b = 0; b < W; ++b) row[b] += past[b];
        continue;
      }
      // sink + window < i + 1, so the three sets are disjoint and the middle is not empty.
      const double keep = std::max(0.0, extra) / between;
      for (size_t b = 0; b < W; ++b) row[b] += sinks[b] + near[b] + keep * middle[b];
    }
  }
  for (auto& row : work.pairs) {
    for (double& p : row) p *= static_cast<double>(query_heads);
  }
  return std::move(work);
}

}  // namespace sb
