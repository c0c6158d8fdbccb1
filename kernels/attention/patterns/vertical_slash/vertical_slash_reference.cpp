#include "kernels/attention/patterns/vertical_slash/vertical_slash_reference.h"

#include <algorithm>
#include <limits>

#include "kernels/attention/patterns/vertical_slash/vertical_slash_blocks.h"

namespace sb {

at::Tensor vertical_slash_mask(const VerticalSlashHeadIndex& index, int64_t length, int64_t first_row) {
  at::Tensor mask = at::zeros({length - first_row, length}, at::kBool);
  bool* m = mask.mutable_data_ptr<bool>();
  std::vector<int64_t> keys;
  for (int64_t block = first_row / index.block_size; block * index.block_size < length; ++block) {
    vertical_slash_block_keys(index, block, length, keys);
    const int64_t last = std::min((block + 1) * index.block_size, length) - 1;
    for (int64_t i = std::max(first_row, block * index.block_size); i <= last; ++i) {
      for (const int64_t j : keys) {
        if (j > i) break;
        m[(i - first_row) * length + j] = true;
      }
    }
  }
  return mask;
}

at::Tensor vertical_slash_reference_rows(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                         const std::vector<VerticalSlashHeadIndex>& heads, double scale,
                                         int64_t first_row) {
  const int64_t length = q.size(0), group = q.size(1) / k.size(1);
  TORCH_CHECK(first_row >= 0 && first_row < length && static_cast<int64_t>(heads.size()) == q.size(1),
              "vertical-slash reference: rows within the sequence and one index per query head expected");
  const at::Tensor q64 = q.to(at::kDouble), k64 = k.to(at::kDouble), v64 = v.to(at::kDouble);
  std::vector<at::Tensor> head_out;
  for (int64_t h = 0; h < q.size(1); ++h) {
    const at::Tensor qs = q64.narrow(0, first_row, length - first_row).select(1, h);
    const at::Tensor scores = at::matmul(qs, k64.select(1, h / group).t())
                                  .mul(scale)
                                  .masked_fill(vertical_slash_mask(heads[static_cast<size_t>(h)], length, first_row)
                                                   .logical_not(),
                                               -std::numeric_limits<double>::infinity());
    head_out.push_back(at::matmul(at::softmax(scores, 1), v64.select(1, h / group)));
  }
  return at::stack(head_out, 1);
}

VerticalSlashReferenceResult vertical_slash_reference(
    const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const PackedSequences& sequences,
    const std::vector<std::vector<VerticalSlashHeadIndex>>& index, double scale) {
  TORCH_CHECK(q.dim() == 3 && k.dim() == 3 && v.sizes() == k.sizes() && q.size(2) == k.size(2),
              "vertical-slash reference: q [T, Hq, D], k and v [T, Hkv, D]");
  TORCH_CHECK(static_cast<int64_t>(index.size()) == sequences.num_sequences(),
              "vertical-slash reference: one index per sequence expected");
  const int64_t heads = q.size(1), group = q.size(1) / k.size(1);
  const at::Tensor q64 = q.to(at::kDouble), k64 = k.to(at::kDouble), v64 = v.to(at::kDouble);
  std::vector<at::Tensor> outs, lses;
  for (int64_t s = 0; s < sequences.num_sequences(); ++s) {
    const int64_t offset = sequences.offsets[static_cast<size_t>(s)], length = sequences.length(s);
    if (length == 0) continue;
    TORCH_CHECK(static_cast<int64_t>(index[static_cast<size_t>(s)].size()) == heads,
                "vertical-slash reference: one index per query head expected");
    std::vector<at::Tensor> head_out, head_lse;
    for (int64_t h = 0; h < heads; ++h) {
      const at::Tensor qs = q64.narrow(0, offset, length).select(1, h);
      const at::Tensor ks = k64.narrow(0, offset, length).select(1, h / group);
      const at::Tensor vs = v64.narrow(0, offset, length).select(1, h / group);
      const at::Tensor mask = vertical_slash_mask(index[static_cast<size_t>(s)][static_cast<size_t>(h)], length);
      const at::Tensor scores =
          at::matmul(qs, ks.t()).mul(scale).masked_fill(mask.logical_not(), -std::numeric_limits<double>::infinity());
      const at::Tensor lse = at::logsumexp(scores, 1);
      head_out.push_back(at::matmul(at::exp(scores - lse.unsqueeze(1)), vs));
      head_lse.push_back(lse);
    }
    outs.push_back(at::stack(head_out, 1));
    lses.push_back(at::stack(head_lse, 1));
  }
  return {at::cat(outs, 0), at::cat(lses, 0)};
}

}  // namespace sb
