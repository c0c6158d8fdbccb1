#include "kernels/attention/ring/ring_query_block_step_cpu.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/GradMode.h>

#include <limits>
#include <numeric>

#include "kernels/attention/core/gathered_rows_attention_cpu.h"
#include "kernels/attention/core/single_threaded_blas.h"

namespace sb {

RingQueryBlockLists::RingQueryBlockLists(at::Tensor selected_blocks, int64_t num_blocks)
    : selected(selected_blocks.to(at::kInt).cpu().contiguous()), blocks(num_blocks) {
  TORCH_CHECK(selected.dim() == 3, "RingQueryBlockLists: selected [Hq, Tq, cap] expected");
  heads = selected.size(0);
  const int64_t rows = selected.size(1), capacity = selected.size(2);
  const int32_t* ids = selected.const_data_ptr<int32_t>();
  // Counting sort by (head, block): rows come out ascending within each list.
  first.assign(heads * blocks + 1, 0);
  for (int64_t i = 0; i < selected.numel(); ++i) {
    if (ids[i] < 0) continue;
    TORCH_CHECK(ids[i] < blocks, "RingQueryBlockLists: block ", ids[i], " outside the ", blocks, " blocks");
    ++first[(i / (rows * capacity)) * blocks + ids[i] + 1];
  }
  std::partial_sum(first.begin(), first.end(), first.begin());
  readers.resize(static_cast<size_t>(first.back()));
  std::vector<int64_t> fill(first.begin(), first.end() - 1);
  for (int64_t h = 0; h < heads; ++h) {
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < capacity; ++c) {
        const int32_t j = ids[(h * rows + r) * capacity + c];
        if (j >= 0) readers[static_cast<size_t>(fill[h * blocks + j]++)] = r;
      }
    }
  }
}

namespace {

void check_inputs(const at::Tensor& q, const at::Tensor& k, const RingQueryBlockLists& lists,
                  const RingShardTiles& keys) {
  TORCH_CHECK(q.dim() == 3 && k.dim() == 3 && q.size(1) % k.size(1) == 0 && q.is_contiguous() && k.is_contiguous(),
              "ring query-block step: contiguous q [Tq, Hq, D] and k [Tk, Hkv, D] expected");
  TORCH_CHECK(lists.heads == q.size(1) && lists.selected.size(1) == q.size(0),
              "ring query-block step: the lists are for ", lists.heads, " heads and ", lists.selected.size(1),
              " queries, q holds ", q.size(1), " and ", q.size(0));
  TORCH_CHECK(static_cast<int64_t>(keys.first_tile_of_block.size()) == lists.blocks + 1,
              "ring query-block step: the shard's tiles are cut on another block layout");
}

// Runs visit(h, rows, tile) for every (query head in [h0, h1), key block with readers,
// tile of that block in the visiting shard), blocks ascending; `rows` are the readers.
template <class Visit>
void for_each_visit(const RingQueryBlockLists& lists, const RingShardTiles& keys, int64_t h, Visit visit) {
  std::vector<int64_t> rows;
  for (int64_t j = 0; j < lists.blocks; ++j) {
    const int64_t begin = lists.first[h * lists.blocks + j], end = lists.first[h * lists.blocks + j + 1];
    const int64_t tile_begin = keys.first_tile_of_block[j], tile_end = keys.first_tile_of_block[j + 1];
    if (begin == end || tile_begin == tile_end) continue;
    rows.assign(lists.readers.begin() + begin, lists.readers.begin() + end);
    for (int64_t t = tile_begin; t < tile_end; ++t) visit(rows, keys.tiles[t]);
  }
}

template <typename scalar_t>
int64_t forward_typed(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const RingShardTiles& keys,
                      const RingQueryBlockLists& lists, double scale, at::Tensor& out_step, at::Tensor& lse_step) {
  const int64_t tq = q.size(0), heads = q.size(1), group = heads / k.size(1), dim = q.size(2);
  std::vector<int64_t> pairs(heads, 0);
  at::parallel_for(0, heads, 1, [&](int64_t h0, int64_t h1) {
    const c10::NoGradGuard no_grad;  // grad mode is per thread; workers start with it on
    const SingleThreadedBlas single_threaded_blas;
    std::vector<scalar_t> running_max, running_sum;
    for (int64_t h = h0; h < h1; ++h) {
      running_max.assign(tq, -std::numeric_limits<scalar_t>::infinity());
      running_sum.assign(tq, 0);
      OnlineSoftmaxRows<scalar_t> softmax{out_step.mutable_data_ptr<scalar_t>(), heads, dim, h, running_max.data(),
                                          running_sum.data()};
      const int64_t g = h / group;
      for_each_visit(lists, keys, h, [&](const std::vector<int64_t>& rows, const RingTile& tile) {
        const at::Tensor key_rows = k.narrow(0, tile.local_start, tile.length).select(1, g);
        at::Tensor scores = at::mm(gather_head_rows<scalar_t>(q, h, rows), key_rows.t()).mul_(scale);
        softmax.add(scores, v.narrow(0, tile.local_start, tile.length).select(1, g), rows);
        pairs[h] += static_cast<int64_t>(rows.size()) * tile.length;
      });
      // A row that kept no key of the shard finishes as -inf with out 0.
      for (int64_t r = 0; r < tq; ++r) softmax.finish(r, lse_step.mutable_data_ptr<scalar_t>());
    }
  });
  return std::accumulate(pairs.begin(), pairs.end(), int64_t{0});
}

template <typename scalar_t>
int64_t backward_typed(const at::Tensor& grad_out, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                       const at::Tensor& lse, const at::Tensor& delta, const RingShardTiles& keys,
                       const RingQueryBlockLists& lists, double scale, at::Tensor& dq, at::Tensor& dk,
                       at::Tensor& dv) {
  const int64_t heads = q.size(1), kv_heads = k.size(1), group = heads / kv_heads;
  std::vector<int64_t> pairs(kv_heads, 0);
  // A unit (key/value head) owns its keys' gradients and its query heads' dq rows.
  at::parallel_for(0, kv_heads, 1, [&](int64_t g0, int64_t g1) {
    const c10::NoGradGuard no_grad;
    const SingleThreadedBlas single_threaded_blas;
    for (int64_t g = g0; g < g1; ++g) {
      for (int64_t h = g * group; h < (g + 1) * group; ++h) {
        for_each_visit(lists, keys, h, [&](const std::vector<int64_t>& rows, const RingTile& tile) {
          const at::Tensor key_rows = k.narrow(0, tile.local_start, tile.length).select(1, g);
          const at::Tensor queries = gather_head_rows<scalar_t>(q, h, rows);
          at::Tensor scores = at::mm(queries, key_rows.t()).mul_(scale);
          at::Tensor dk_rows = dk.narrow(0, tile.local_start, tile.length).select(1, g);
          at::Tensor dv_rows = dv.narrow(0, tile.local_start, tile.length).select(1, g);
          gathered_rows_backward<scalar_t>(scores, queries, gather_head_rows<scalar_t>(grad_out, h, rows), key_rows,
                                           v.narrow(0, tile.local_start, tile.length).select(1, g), rows, h, heads,
                                           lse.const_data_ptr<scalar_t>(), delta.const_data_ptr<scalar_t>(), scale,
                                           dq.mutable_data_ptr<scalar_t>(), dk_rows, dv_rows);
          pairs[g] += static_cast<int64_t>(rows.size()) * tile.length;
        });
      }
    }
  });
  return std::accumulate(pairs.begin(), pairs.end(), int64_t{0});
}

}  // namespace

int64_t ring_query_block_step_forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                      const RingShardTiles& keys, const RingQueryBlockLists& lists, double scale,
                                      at::Tensor& out_step, at::Tensor& lse_step) {
  check_inputs(q, k, lists, keys);
  out_step.zero_();
  lse_step.fill_(-std::numeric_limits<double>::infinity());
  int64_t pairs = 0;
  AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "ring_query_block_step_forward", [&] {
    pairs = forward_typed<scalar_t>(q, k, v, keys, lists, scale, out_step, lse_step);
  });
  return pairs;
}

int64_t ring_query_block_step_backward(const at::Tensor& grad_out, const at::Tensor& q, const at::Tensor& k,
                                       const at::Tensor& v, const at::Tensor& lse, const at::Tensor& delta,
                                       const RingShardTiles& keys, const RingQueryBlockLists& lists, double scale,
                                       at::Tensor& dq, at::Tensor& dk, at::Tensor& dv) {
  check_inputs(q, k, lists, keys);
  TORCH_CHECK(grad_out.is_contiguous() && lse.is_contiguous() && delta.is_contiguous() && dq.is_contiguous(),
              "ring query-block step: contiguous grad_out, lse, delta and dq expected");
  int64_t pairs = 0;
  AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "ring_query_block_step_backward", [&] {
    pairs = backward_typed<scalar_t>(grad_out, q, k, v, lse, delta, keys, lists, scale, dq, dk, dv);
  });
  return pairs;
}

}  // namespace sb
