#include "kernels/bench/moba_composed_aten.h"

#include <ATen/ATen.h>

#include <limits>
#include <vector>

namespace sb {

at::Tensor moba_attention_composed_aten(const at::Tensor& q, const at::Tensor& k,
                                        const at::Tensor& v, const BlockLayout& layout,
                                        const MobaRouting& routing, double scale) {
  const int64_t tokens = q.size(0), q_heads = q.size(1), kv_heads = k.size(1), dim = q.size(2);
  const int64_t blocks = layout.num_blocks(), block = layout.block_size;
  const int64_t capacity = routing.selected.size(2), group = q_heads / kv_heads;
  const int64_t rows = q_heads * blocks, keys = capacity * block;
  const int64_t q_pad = tokens * q_heads, kv_pad = tokens * kv_heads;  // index of a zero row
  const auto ids = routing.selected.accessor<int32_t, 3>();

  std::vector<int64_t> q_rows(rows * block), kv_rows(rows * keys), valid_slots, valid_rows;
  at::Tensor allowed = at::zeros({rows, block, keys}, at::kBool);  // [R, B, k * B]
  auto mask = allowed.accessor<bool, 3>();
  for (int64_t h = 0; h < q_heads; ++h) {
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t row = h * blocks + b;
      const LayoutBlock& qb = layout.blocks[b];
      for (int64_t r = 0; r < block; ++r) {
        const bool real = r < qb.query_len;
        q_rows[row * block + r] = real ? (qb.query_start + r) * q_heads + h : q_pad;
        if (real) {
          valid_slots.push_back(row * block + r);
          valid_rows.push_back((qb.query_start + r) * q_heads + h);
        }
      }
      for (int64_t s = 0; s < capacity; ++s) {
        const int64_t j = ids[h][b][s];
        for (int64_t c = 0; c < block; ++c) {
          const bool real = j >= 0 && c < layout.blocks[j].key_len;
          kv_rows[row * keys + s * block + c] =
              real ? (layout.blocks[j].key_start + c) * kv_heads + h / group : kv_pad;
          if (!real) continue;
          for (int64_t r = 0; r < block; ++r) {
            // Padding queries see every real key (their rows are dropped; no NaN).
            mask[row][r][s * block + c] = !layout.causal || j != b || c <= qb.query_pos0 + r ||
                                          r >= qb.query_len;
          }
        }
      }
    }
  }
  const auto zero_row = [&](const at::Tensor& x, int64_t n) {
    return at::cat({x.reshape({n, dim}), at::zeros({1, dim}, x.options())});
  };
  const at::Tensor q_index = at::tensor(q_rows, at::kLong), kv_index = at::tensor(kv_rows, at::kLong);
  const at::Tensor qg = zero_row(q, q_pad).index_select(0, q_index).view({rows, block, dim});
  const at::Tensor kg = zero_row(k, kv_pad).index_select(0, kv_index).view({rows, keys, dim});
  const at::Tensor vg = zero_row(v, kv_pad).index_select(0, kv_index).view({rows, keys, dim});
  const at::Tensor scores = (at::bmm(qg, kg.transpose(1, 2)) * scale)
                                .masked_fill(allowed.logical_not(), -std::numeric_limits<double>::infinity());
  const at::Tensor out_rows = at::bmm(at::softmax(scores, -1), vg).view({rows * block, dim});
  return at::zeros({q_pad, dim}, q.options())
      .index_copy(0, at::tensor(valid_rows, at::kLong),
                  out_rows.index_select(0, at::tensor(valid_slots, at::kLong)))
      .view({tokens, q_heads, dim});
}

}  // namespace sb
