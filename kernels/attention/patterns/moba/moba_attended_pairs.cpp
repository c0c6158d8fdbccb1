#include "kernels/attention/patterns/moba/moba_attended_pairs.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include "kernels/attention/core/block_layout.h"

namespace sb {

double moba_attended_pairs(const at::Tensor& q, const at::Tensor& k, const PackedSequences& packed,
                           const MobaParams& params) {
  const c10::NoGradGuard no_grad;
  const BlockLayout layout = BlockLayout::build(packed, packed, params.block_size, params.causal);
  const MobaRouting routing = moba_attention(q, k, k, packed, params).routing;
  const at::Tensor selected = routing.selected.cpu();
  const auto ids = selected.accessor<int32_t, 3>();
  double pairs = 0.0;
  if (routing.gate == MobaGate::kToken) {  // rows are the queries: the own block up to the query
    for (int64_t h = 0; h < selected.size(0); ++h) {
      for (int64_t b = 0; b < layout.num_blocks(); ++b) {
        const LayoutBlock& block = layout.blocks[b];
        for (int64_t r = 0; r < block.query_len; ++r) {
          const int64_t t = block.query_start + r;
          for (int64_t i = 0; i < selected.size(2) && ids[h][t][i] >= 0; ++i) {
            const int64_t j = ids[h][t][i];
            pairs += static_cast<double>(j == b ? block.query_pos0 + r + 1 : layout.blocks[j].key_len);
          }
        }
      }
    }
    return pairs;
  }
  for (int64_t h = 0; h < selected.size(0); ++h) {
    for (int64_t b = 0; b < selected.size(1); ++b) {
      const double lq = static_cast<double>(layout.blocks[b].query_len);
      for (int64_t i = 0; i < selected.size(2) && ids[h][b][i] >= 0; ++i) {
        const int64_t j = ids[h][b][i];
        pairs += j == b ? lq * (lq + 1.0) / 2.0 : lq * static_cast<double>(layout.blocks[j].key_len);
      }
    }
  }
  return pairs;
}

}  // namespace sb
