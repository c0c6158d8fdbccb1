#include "kernels/attention/patterns/vertical_slash/vertical_slash_ring_index.h"

#include "kernels/attention/patterns/vertical_slash/vertical_slash_ring_sums.h"

namespace sb {

std::vector<std::vector<VerticalSlashHeadIndex>> vertical_slash_ring_index(
    const at::Tensor& q, const at::Tensor& k, const RingGeometry& geometry, const VerticalSlashParams& params,
    double scale, RingContext& context, int64_t call) {
  VerticalSlashRingSums sums(q, k, geometry, params, scale, context, call);
  // 4. The same selection on every rank; the coverage from every rank's kept mass.
  const auto& sequences = sums.sequences();
  const int64_t heads = q.size(1);
  std::vector<std::vector<VerticalSlashHeadIndex>> index(sequences.size());
  std::vector<VerticalSlashRingSums::Item> items;
  for (size_t s = 0; s < sequences.size(); ++s) {
    index[s].resize(static_cast<size_t>(heads));
    if (sequences[s].length == 0) continue;
    for (int64_t h = 0; h < heads; ++h) {
      VerticalSlashHeadIndex& head = index[s][static_cast<size_t>(h)];
      head = vertical_slash_select(sequences[s].vertical[static_cast<size_t>(h)],
                                   sequences[s].slash[static_cast<size_t>(h)], sequences[s].n, params);
      items.push_back({static_cast<int64_t>(s), h, &head});
    }
  }
  const std::vector<double> coverage = sums.kept_coverage(items, "vertical-slash's kept attention mass");
  for (size_t i = 0; i < items.size(); ++i) {
    index[static_cast<size_t>(items[i].sequence)][static_cast<size_t>(items[i].head)].coverage = coverage[i];
  }
  sums.record_event();
  return index;
}

}  // namespace sb
