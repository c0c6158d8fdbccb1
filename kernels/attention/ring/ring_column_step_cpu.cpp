#include "kernels/attention/ring/ring_column_step_cpu.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <algorithm>
#include <limits>

namespace sb {

void RingColumnLists::of(int64_t head, int64_t block, std::vector<int64_t>& out) const {
  out.clear();
  const int64_t s = block_sequence[static_cast<size_t>(block)], blocks = count.size(1);
  const int32_t* first = selected.const_data_ptr<int32_t>() + (head * blocks + block) * selected.size(2);
  const int32_t* last = first + count.const_data_ptr<int32_t>()[head * blocks + block];
  for (const int64_t token : head_columns[static_cast<size_t>(s * heads + head)]) {
    if (token > block_last[static_cast<size_t>(block)]) break;
    const auto key_block = static_cast<int32_t>(sequence_first_block[static_cast<size_t>(s)] +
                                                (token - sequence_offset[static_cast<size_t>(s)]) / block_size);
    if (!std::binary_search(first, last, key_block)) out.push_back(token);
  }
}

int64_t RingColumnLists::total() const {
  int64_t n = 0;
  std::vector<int64_t> list;
  for (int64_t h = 0; h < heads; ++h) {
    for (int64_t b = 0; b < static_cast<int64_t>(block_sequence.size()); ++b) {
      of(h, b, list);
      n += static_cast<int64_t>(list.size());
    }
  }
  return n;
}

namespace {

// One (query tile, head)'s columns that the visiting shard holds.
struct TileColumns {
  at::Tensor rows;      // [nc] long: rows in the visiting shard
  at::Tensor visible;   // [length, nc] bool: column at or before the query
  int64_t pairs = 0;
};

TileColumns tile_columns(const RingTile& tile, const std::vector<int64_t>& tokens, const RingShardTiles& keys) {
  std::vector<int64_t> rows, global;
  for (const int64_t token : tokens) {
    const int64_t row = keys.row_of(token);
    if (row < 0) continue;
    rows.push_back(row);
    global.push_back(token);
  }
  TileColumns out;
  if (rows.empty()) return out;
  out.rows = at::tensor(rows, at::kLong);
  const at::Tensor query = at::arange(tile.global_start, tile.global_start + tile.length, at::kLong).unsqueeze(1);
  out.visible = at::tensor(global, at::kLong).unsqueeze(0) <= query;
  out.pairs = out.visible.sum().item<int64_t>();
  return out;
}

// Runs body(tile, head, columns, scores) for each (query tile, head) with a visible
// column in the shard; scores [length, nc] scaled, invisible ones -inf.
template <class Body>
int64_t for_each_column_tile(const at::Tensor& q, const at::Tensor& k, const RingShardTiles& queries,
                             const RingShardTiles& keys, const RingColumnLists& columns, double scale, Body body) {
  const int64_t heads = q.size(1), group = q.size(1) / k.size(1);
  int64_t pairs = 0;
  std::vector<int64_t> tokens;
  for (const RingTile& tile : queries.tiles) {
    for (int64_t h = 0; h < heads; ++h) {
      columns.of(h, tile.block, tokens);
      const TileColumns cols = tile_columns(tile, tokens, keys);
      if (cols.pairs == 0) continue;
      const at::Tensor key_rows = k.select(1, h / group).index_select(0, cols.rows);  // [nc, D]
      const at::Tensor scores = at::matmul(q.narrow(0, tile.local_start, tile.length).select(1, h), key_rows.t())
                                    .mul_(scale)
                                    .masked_fill_(cols.visible.logical_not(), -std::numeric_limits<double>::infinity());
      body(tile, h, h / group, cols, key_rows, scores);
      pairs += cols.pairs;
    }
  }
  return pairs;
}

}  // namespace

int64_t ring_column_step_forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                 const RingShardTiles& queries, const RingShardTiles& keys,
                                 const RingColumnLists& columns, double scale, at::Tensor& out_step,
                                 at::Tensor& lse_step) {
  const c10::NoGradGuard no_grad;
  out_step.zero_();
  lse_step.fill_(-std::numeric_limits<double>::infinity());
  return for_each_column_tile(q, k, queries, keys, columns, scale,
                              [&](const RingTile& tile, int64_t h, int64_t kv, const TileColumns& cols,
                                  const at::Tensor&, const at::Tensor& scores) {
                                const at::Tensor lse = at::logsumexp(scores, 1);  // -inf: no visible column
                                const at::Tensor safe = at::where(lse.isinf(), at::zeros_like(lse), lse);
                                const at::Tensor probs = at::exp(scores - safe.unsqueeze(1));
                                const at::Tensor values = v.select(1, kv).index_select(0, cols.rows);
                                out_step.narrow(0, tile.local_start, tile.length).select(1, h).copy_(
                                    at::matmul(probs, values));
                                lse_step.narrow(0, tile.local_start, tile.length).select(1, h).copy_(lse);
                              });
}

int64_t ring_column_step_backward(const at::Tensor& grad_out, const at::Tensor& q, const at::Tensor& k,
                                  const at::Tensor& v, const at::Tensor& lse, const at::Tensor& delta,
                                  const RingShardTiles& queries, const RingShardTiles& keys,
                                  const RingColumnLists& columns, double scale, at::Tensor& dq, at::Tensor& dk,
                                  at::Tensor& dv) {
  const c10::NoGradGuard no_grad;
  return for_each_column_tile(
      q, k, queries, keys, columns, scale,
      [&](const RingTile& tile, int64_t h, int64_t kv, const TileColumns& cols, const at::Tensor& key_rows,
          const at::Tensor& scores) {
        const auto rows_of = [&](const at::Tensor& x) { return x.narrow(0, tile.local_start, tile.length).select(1, h); };
        const at::Tensor probs = at::exp(scores - rows_of(lse).unsqueeze(1));  // the final softmax's entries
        const at::Tensor values = v.select(1, kv).index_select(0, cols.rows);
        const at::Tensor grad_rows = rows_of(grad_out);
        const at::Tensor grad_scores =
            probs * (at::matmul(grad_rows, values.t()) - rows_of(delta).unsqueeze(1)) * scale;  // dS
        rows_of(dq).add_(at::matmul(grad_scores, key_rows));
        dk.select(1, kv).index_add_(0, cols.rows, at::matmul(grad_scores.t(), rows_of(q)));
        dv.select(1, kv).index_add_(0, cols.rows, at::matmul(probs.t(), grad_rows));
      });
}

}  // namespace sb
