#include "kernels/attention/ring/ring_step_cpu.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/GradMode.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/attention/core/single_threaded_blas.h"

namespace sb {

RingShardTiles RingShardTiles::build(const std::vector<int64_t>& tokens, const BlockLayout& layout) {
  RingShardTiles shard;
  shard.tokens = static_cast<int64_t>(tokens.size());
  shard.first_tile_of_block.assign(layout.num_blocks() + 1, 0);
  int64_t block = 0;
  for (int64_t i = 0; i < shard.tokens; ++i) {
    const int64_t t = tokens[i];
    while (block < layout.num_blocks() &&
           layout.blocks[block].key_start + layout.blocks[block].key_len <= t) {
      ++block;
    }
    TORCH_CHECK(block < layout.num_blocks(), "RingShardTiles: token ", t, " lies past the micro-batch");
    const bool extends = !shard.tiles.empty() && shard.tiles.back().block == block &&
                         shard.tiles.back().global_start + shard.tiles.back().length == t;
    if (extends) {
      ++shard.tiles.back().length;
    } else {
      const LayoutBlock& b = layout.blocks[block];
      const int64_t position = b.index_in_sequence * layout.block_size + (t - b.key_start);
      shard.tiles.push_back({i, 1, t, block, b.sequence, position});
      ++shard.first_tile_of_block[block + 1];
    }
  }
  for (int64_t j = 0; j < layout.num_blocks(); ++j) shard.first_tile_of_block[j + 1] += shard.first_tile_of_block[j];
  return shard;
}

int64_t RingShardTiles::row_of(int64_t token) const {
  auto it = std::upper_bound(tiles.begin(), tiles.end(), token,
                             [](int64_t t, const RingTile& tile) { return t < tile.global_start; });
  if (it == tiles.begin()) return -1;
  --it;
  return token < it->global_start + it->length ? it->local_start + token - it->global_start : -1;
}

std::vector<int64_t> RingShardTiles::block_of_rows() const {
  std::vector<int64_t> blocks(tokens);
  for (const RingTile& tile : tiles) {
    std::fill(blocks.begin() + tile.local_start, blocks.begin() + tile.local_start + tile.length, tile.block);
  }
  return blocks;
}

RingBlockPattern RingBlockPattern::causal(const BlockLayout& layout) {
  const int64_t blocks = layout.num_blocks();
  int64_t capacity = 1;
  for (int64_t b = 0; b < blocks; ++b) capacity = std::max(capacity, layout.eligible_end(b) - layout.eligible_first(b));
  RingBlockPattern pattern;
  pattern.selected = at::full({1, blocks, capacity}, -1, at::kInt);
  pattern.count = at::zeros({1, blocks}, at::kInt);
  int32_t* selected = pattern.selected.mutable_data_ptr<int32_t>();
  int32_t* count = pattern.count.mutable_data_ptr<int32_t>();
  for (int64_t b = 0; b < blocks; ++b) {
    int64_t n = 0;
    for (int64_t j = layout.eligible_first(b); j < layout.eligible_end(b); ++j) {
      selected[b * capacity + n++] = static_cast<int32_t>(j);
    }
    count[b] = static_cast<int32_t>(n);
  }
  return pattern;
}

namespace {

// A key tile a row attends to, and whether some of its pairs are masked (the causal mask
// inside the diagonal block, or the pattern's band).
struct RowKeyTile {
  const RingTile* tile;
  bool masked;
};

// One row of the step: query head h, query tile, and the key tiles it keeps.
struct RingRow {
  int64_t head = 0;
  const RingTile* query = nullptr;
  std::vector<RowKeyTile> keys;
  int64_t key_count = 0;  // m: rows of the gathered keys
  int64_t band_window = -1;  // the pattern's band for the query tile's sequence (-1: none)
  int64_t band_sinks = 0;
};

std::vector<RingRow> ring_rows(const RingStepShapes& shapes, int64_t q_heads) {
  const int32_t* selected = shapes.pattern.selected.const_data_ptr<int32_t>();
  const int32_t* count = shapes.pattern.count.const_data_ptr<int32_t>();
  const int64_t pattern_heads = shapes.pattern.selected.size(0);
  const int64_t blocks = shapes.pattern.selected.size(1), capacity = shapes.pattern.selected.size(2);
  std::vector<RingRow> rows;
  for (int64_t h = 0; h < q_heads; ++h) {
    const int64_t ph = pattern_heads == 1 ? 0 : h;
    for (const RingTile& query : shapes.queries.tiles) {
      RingRow row;
      row.head = h;
      row.query = &query;
      if (!shapes.pattern.band_window.empty()) {
        row.band_window = shapes.pattern.band_window[query.sequence];
        row.band_sinks = shapes.pattern.band_sinks;
      }
      const int64_t last_query = query.global_start + query.length - 1;
      const int32_t* list = selected + (ph * blocks + query.block) * capacity;
      for (int64_t n = 0; n < count[ph * blocks + query.block]; ++n) {
        const int64_t j = list[n];
        for (int64_t t = shapes.keys.first_tile_of_block[j]; t < shapes.keys.first_tile_of_block[j + 1]; ++t) {
          const RingTile& key = shapes.keys.tiles[t];
          if (j == query.block && key.global_start > last_query) continue;  // all in the future
          bool masked = j == query.block && key.global_start + key.length - 1 > query.global_start;
          if (!shapes.pattern.band_window.empty()) {
            const int64_t window = shapes.pattern.band_window[query.sequence], sinks = shapes.pattern.band_sinks;
            const int64_t key_last = key.position + key.length - 1, query_last = query.position + query.length - 1;
            const bool none = query.position - key_last >= window && key.position >= sinks;
            if (none) continue;
            masked = masked || !(query_last - key.position < window || key_last < sinks);
          }
          row.keys.push_back({&key, masked});
          row.key_count += key.length;
        }
      }
      if (row.key_count > 0) rows.push_back(std::move(row));
    }
  }
  return rows;
}

// Buffers a worker reuses across rows, grown on demand.
struct RingScratch {
  at::Tensor keys, values, scores, grad_scores;
  static at::Tensor matrix(at::Tensor& buffer, int64_t rows, int64_t cols, const at::TensorOptions& options) {
    if (!buffer.defined() || buffer.numel() < rows * cols) buffer = at::empty({rows * cols}, options);
    return buffer.narrow(0, 0, rows * cols).view({rows, cols});
  }
};

template <typename scalar_t>
at::Tensor gather_keys(const at::Tensor& x, const RingRow& row, int64_t kv_head, at::Tensor& buffer) {
  const int64_t kv_heads = x.size(1), dim = x.size(2);
  at::Tensor gathered = RingScratch::matrix(buffer, row.key_count, dim, x.options());
  scalar_t* dst = gathered.mutable_data_ptr<scalar_t>();
  const scalar_t* src = x.const_data_ptr<scalar_t>();
  for (const RowKeyTile& key : row.keys) {
    for (int64_t t = key.tile->local_start; t < key.tile->local_start + key.tile->length; ++t) {
      std::memcpy(dst, src + (t * kv_heads + kv_head) * dim, sizeof(scalar_t) * dim);
      dst += dim;
    }
  }
  return gathered;
}

// Scaled scores [lq, m] of the row with -inf at masked pairs; returns the kept pairs.
template <typename scalar_t>
int64_t row_scores(const at::Tensor& queries, const at::Tensor& keys, const RingRow& row, double scale,
                   at::Tensor& scores) {
  at::addmm_out(scores, scores, queries, keys.t(), /*beta=*/0, /*alpha=*/scale);
  const int64_t lq = queries.size(0), m = keys.size(0);
  scalar_t* s = scores.mutable_data_ptr<scalar_t>();
  int64_t kept = lq * m, column = 0;
  for (const RowKeyTile& key : row.keys) {
    if (key.masked) {
      for (int64_t r = 0; r < lq; ++r) {
        const int64_t query_global = row.query->global_start + r, query_position = row.query->position + r;
        for (int64_t c = 0; c < key.tile->length; ++c) {
          const int64_t key_position = key.tile->position + c;
          const bool outside_band = row.band_window >= 0 && query_position - key_position >= row.band_window &&
                                    key_position >= row.band_sinks;
          if (key.tile->global_start + c > query_global || outside_band) {
            s[r * m + column + c] = -std::numeric_limits<scalar_t>::infinity();
            --kept;
          }
        }
      }
    }
    column += key.tile->length;
  }
  return kept;
}

at::Tensor query_rows(const at::Tensor& x, const RingRow& row) {
  return x.select(1, row.head).narrow(0, row.query->local_start, row.query->length);
}

template <typename scalar_t>
int64_t forward_typed(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                      const RingStepShapes& shapes, at::Tensor& out, at::Tensor& lse) {
  const int64_t group = q.size(1) / k.size(1);
  const std::vector<RingRow> rows = ring_rows(shapes, q.size(1));
  std::vector<int64_t> kept(rows.size(), 0);
  out.zero_();
  lse.fill_(-std::numeric_limits<double>::infinity());
  at::parallel_for(0, static_cast<int64_t>(rows.size()), 1, [&](int64_t r0, int64_t r1) {
    const c10::NoGradGuard no_grad;
    const SingleThreadedBlas single_threaded_blas;
    RingScratch scratch;
    for (int64_t i = r0; i < r1; ++i) {
      const RingRow& row = rows[i];
      const int64_t lq = row.query->length, m = row.key_count;
      const at::Tensor keys = gather_keys<scalar_t>(k, row, row.head / group, scratch.keys);
      const at::Tensor values = gather_keys<scalar_t>(v, row, row.head / group, scratch.values);
      at::Tensor scores = RingScratch::matrix(scratch.scores, lq, m, q.options());
      kept[i] = row_scores<scalar_t>(query_rows(q, row), keys, row, shapes.scale, scores);
      // Softmax per query in place, vectorised; a query without a kept key (its max is
      // -inf, taken as 0) gets exp = 0 everywhere, probabilities 0 and lse = log 0 = -inf
      // (it may keep keys of another shard). Otherwise the sum is >= 1, so the clamp is inert.
      at::Tensor top = scores.amax(1, /*keepdim=*/true);  // [lq, 1]
      top.masked_fill_(top.isneginf(), 0);
      scores.sub_(top).exp_();
      const at::Tensor sum = scores.sum(1, /*keepdim=*/true);
      scores.div_(sum.clamp_min(std::numeric_limits<scalar_t>::min()));
      query_rows(lse, row).copy_((top + sum.log()).squeeze(1));
      at::Tensor out_rows = query_rows(out, row);
      at::mm_out(out_rows, scores, values);
    }
  });
  int64_t total = 0;
  for (int64_t n : kept) total += n;
  return total;
}

// Adds staged rows [m, D] back into x [Tk, Hkv, D] at the row's key tiles.
template <typename scalar_t>
void scatter_add_keys(at::Tensor& x, const RingRow& row, int64_t kv_head, const at::Tensor& staged) {
  const int64_t kv_heads = x.size(1), dim = x.size(2);
  scalar_t* dst = x.mutable_data_ptr<scalar_t>();
  const scalar_t* src = staged.const_data_ptr<scalar_t>();
  for (const RowKeyTile& key : row.keys) {
    for (int64_t t = key.tile->local_start; t < key.tile->local_start + key.tile->length; ++t) {
      scalar_t* d = dst + (t * kv_heads + kv_head) * dim;
      for (int64_t e = 0; e < dim; ++e) d[e] += src[e];
      src += dim;
    }
  }
}

template <typename scalar_t>
int64_t backward_typed(const at::Tensor& grad_out, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                    const at::Tensor& lse, const at::Tensor& delta, const RingStepShapes& shapes, at::Tensor& dq,
                    at::Tensor& dk, at::Tensor& dv) {
  const int64_t group = q.size(1) / k.size(1);
  const std::vector<RingRow> rows = ring_rows(shapes, q.size(1));
  const int64_t n = static_cast<int64_t>(rows.size());
  // Rows go to `parts` contiguous ranges; each range adds its key/value gradients into a
  // buffer of its own, summed in range order afterwards (no races, fixed order).
  const int64_t parts = std::max<int64_t>(1, std::min<int64_t>(at::get_num_threads(), n));
  std::vector<at::Tensor> part_dk(parts), part_dv(parts);
  std::vector<int64_t> part_kept(parts, 0);
  for (int64_t p = 0; p < parts; ++p) {
    part_dk[p] = parts == 1 ? dk : at::zeros_like(dk);
    part_dv[p] = parts == 1 ? dv : at::zeros_like(dv);
  }
  at::parallel_for(0, parts, 1, [&](int64_t p0, int64_t p1) {
    const c10::NoGradGuard no_grad;
    const SingleThreadedBlas single_threaded_blas;
    RingScratch scratch;
    at::Tensor staged_dk, staged_dv;
    for (int64_t p = p0; p < p1; ++p) {
      for (int64_t i = p * n / parts; i < (p + 1) * n / parts; ++i) {
        const RingRow& row = rows[i];
        const int64_t lq = row.query->length, m = row.key_count, g = row.head / group;
        const at::Tensor keys = gather_keys<scalar_t>(k, row, g, scratch.keys);
        const at::Tensor values = gather_keys<scalar_t>(v, row, g, scratch.values);
        const at::Tensor queries = query_rows(q, row);
        const at::Tensor grad_rows = query_rows(grad_out, row);
        at::Tensor probs = RingScratch::matrix(scratch.scores, lq, m, q.options());
        part_kept[p] += row_scores<scalar_t>(queries, keys, row, shapes.scale, probs);
        probs.sub_(query_rows(lse, row).unsqueeze(1)).exp_();  // P; masked: exp(-inf) = 0
        at::Tensor grad_scores = RingScratch::matrix(scratch.grad_scores, lq, m, q.options());
        at::mm_out(grad_scores, grad_rows, values.t());                     // dP [lq, m]
        grad_scores.sub_(query_rows(delta, row).unsqueeze(1)).mul_(probs);  // dS
        at::Tensor dq_rows = query_rows(dq, row);
        at::addmm_out(dq_rows, dq_rows, grad_scores, keys, /*beta=*/1, /*alpha=*/shapes.scale);
        at::Tensor dk_rows = RingScratch::matrix(staged_dk, m, k.size(2), k.options());
        at::addmm_out(dk_rows, dk_rows, grad_scores.t(), queries, /*beta=*/0, /*alpha=*/shapes.scale);
        at::Tensor dv_rows = RingScratch::matrix(staged_dv, m, v.size(2), v.options());
        at::mm_out(dv_rows, probs.t(), grad_rows);
        scatter_add_keys<scalar_t>(part_dk[p], row, g, dk_rows);
        scatter_add_keys<scalar_t>(part_dv[p], row, g, dv_rows);
      }
    }
  });
  if (parts > 1) {
    for (int64_t p = 0; p < parts; ++p) {
      dk.add_(part_dk[p]);
      dv.add_(part_dv[p]);
    }
  }
  int64_t kept = 0;
  for (int64_t n : part_kept) kept += n;
  return kept;
}

void check_step_inputs(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const RingStepShapes& shapes) {
  TORCH_CHECK(q.scalar_type() == at::kFloat || q.scalar_type() == at::kDouble,
              "ring attention on the CPU: float32 or float64 expected, got ", q.scalar_type());
  TORCH_CHECK(q.is_contiguous() && k.is_contiguous() && v.is_contiguous(), "ring attention: q, k, v must be contiguous");
  TORCH_CHECK(q.dim() == 3 && k.dim() == 3 && k.sizes() == v.sizes() && q.size(1) % k.size(1) == 0 &&
                  q.size(2) == k.size(2),
              "ring attention: q [Tq, Hq, D] and k, v [Tk, Hkv, D] with Hq % Hkv == 0 expected");
  TORCH_CHECK(q.size(0) == shapes.queries.tokens && k.size(0) == shapes.keys.tokens,
              "ring attention: the tensors' token counts do not match the shards' (", q.size(0), " vs ",
              shapes.queries.tokens, ", ", k.size(0), " vs ", shapes.keys.tokens, ")");
  const int64_t pattern_heads = shapes.pattern.selected.size(0);
  TORCH_CHECK(pattern_heads == 1 || pattern_heads == q.size(1), "ring attention: the pattern has ", pattern_heads,
              " heads for ", q.size(1), " query heads");
}

}  // namespace

int64_t ring_step_forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                          const RingStepShapes& shapes, at::Tensor& out_step, at::Tensor& lse_step) {
  check_step_inputs(q, k, v, shapes);
  int64_t kept = 0;
  AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "ring_step_forward",
                             [&] { kept = forward_typed<scalar_t>(q, k, v, shapes, out_step, lse_step); });
  return kept;
}

int64_t ring_step_backward(const at::Tensor& grad_out, const at::Tensor& q, const at::Tensor& k,
                           const at::Tensor& v, const at::Tensor& lse, const at::Tensor& delta,
                           const RingStepShapes& shapes, at::Tensor& dq, at::Tensor& dk, at::Tensor& dv) {
  check_step_inputs(q, k, v, shapes);
  int64_t kept = 0;
  AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "ring_step_backward", [&] {
    kept = backward_typed<scalar_t>(grad_out, q, k, v, lse, delta, shapes, dq, dk, dv);
  });
  return kept;
}

void ring_merge_partial(at::Tensor& out, at::Tensor& lse, const at::Tensor& out_step, const at::Tensor& lse_step) {
  const at::Tensor merged = at::logaddexp(lse, lse_step);  // -inf where both are -inf
  const at::Tensor finite = at::isfinite(merged);
  const at::Tensor safe = at::where(finite, merged, at::zeros_like(merged));
  const at::Tensor old_weight = at::where(finite, at::exp(lse - safe), at::zeros_like(merged)).unsqueeze(-1);
  const at::Tensor step_weight = at::where(finite, at::exp(lse_step - safe), at::zeros_like(merged)).unsqueeze(-1);
  out.mul_(old_weight).add_(out_step * step_weight);
  lse.copy_(merged);
}

}  // namespace sb
