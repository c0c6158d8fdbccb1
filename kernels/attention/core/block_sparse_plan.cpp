#include "kernels/attention/core/block_sparse_plan.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <limits>
#include <vector>

namespace sb {
namespace {

// A host int32 table on `device`. To a GPU it is written straight into pinned memory and
// copied asynchronously: the caching host allocator keeps the pinned buffer until the copy
// has run, so the host does not wait for the device's queue (a pageable copy would).
at::Tensor int_table_on(const std::vector<int32_t>& values, int64_t columns, const at::Device& device) {
  const int64_t rows = static_cast<int64_t>(values.size()) / columns;
  at::Tensor host = at::empty({rows, columns}, at::TensorOptions(at::kInt).pinned_memory(!device.is_cpu()));
  std::copy(values.begin(), values.end(), host.mutable_data_ptr<int32_t>());
  if (device.is_cpu()) return host;
  return host.to(device, /*non_blocking=*/true);
}

int32_t narrow_int(int64_t value, const char* what) {
  TORCH_CHECK(value >= 0 && value <= std::numeric_limits<int32_t>::max(),
              "block-sparse attention: ", what, " ", value, " does not fit the kernels' int32 tables");
  return static_cast<int32_t>(value);
}

}  // namespace

BlockSparseTables block_sparse_tables(const BlockLayout& layout, const at::Tensor& selected,
                                      const at::Tensor& selected_count, double scale) {
  const int64_t blocks = layout.num_blocks();
  TORCH_CHECK(selected.dim() == 3 && selected.size(1) == blocks && selected.scalar_type() == at::kInt,
              "block-sparse attention: selected must be int32 [Hq, ", blocks, ", capacity], got ",
              selected.sizes(), " ", selected.scalar_type());
  TORCH_CHECK(selected_count.dim() == 2 && selected_count.size(0) == selected.size(0) &&
                  selected_count.size(1) == blocks && selected_count.scalar_type() == at::kInt,
              "block-sparse attention: selected_count must be int32 [Hq, NB] like selected");
  const at::Device device = selected.device();
  std::vector<int32_t> table, query_tiles, key_tiles;
  table.reserve(blocks * kBsBlockFields);
  for (int64_t b = 0; b < blocks; ++b) {
    const LayoutBlock& block = layout.blocks[b];
    table.push_back(narrow_int(block.key_start, "key start"));
    table.push_back(narrow_int(block.key_len, "key count"));
    table.push_back(narrow_int(block.query_start, "query start"));
    table.push_back(narrow_int(block.query_len, "query count"));
    table.push_back(narrow_int(block.query_pos0, "query position"));
    for (int64_t r = 0; r < block.query_len; r += kBlockSparseTile) {
      query_tiles.push_back(static_cast<int32_t>(b));
      query_tiles.push_back(static_cast<int32_t>(r));
    }
    for (int64_t r = 0; r < block.key_len; r += kBlockSparseTile) {
      key_tiles.push_back(static_cast<int32_t>(b));
      key_tiles.push_back(static_cast<int32_t>(r));
    }
  }
  narrow_int(layout.total_keys, "key count");
  narrow_int(layout.total_queries, "query count");
  BlockSparseTables tables;
  tables.block_table = int_table_on(table, kBsBlockFields, device);
  tables.query_tiles = int_table_on(query_tiles, 2, device);
  tables.key_tiles = int_table_on(key_tiles, 2, device);
  tables.selected = selected.contiguous();
  tables.selected_count = selected_count.contiguous();
  tables.num_queries = layout.total_queries;
  tables.num_keys = layout.total_keys;
  tables.causal = layout.causal;
  tables.scale = scale;
  return tables;
}

BlockSparseInverse block_sparse_inverse(const at::Tensor& selected) {
  TORCH_CHECK(selected.dim() == 3, "block_sparse_inverse: selected must be [Hq, NB, capacity], got ",
              selected.sizes());
  const int64_t heads = selected.size(0), blocks = selected.size(1);
  const auto longs = selected.options().dtype(at::kLong);
  narrow_int(selected.numel(), "routing entry count");
  // One sort key per listed (h, b, j): (h * NB + j) * NB + b, so that sorting groups the
  // entries by (head, key block) and orders each group by query block. Padding sorts last.
  const at::Tensor j = selected.to(at::kLong);
  const at::Tensor h = at::arange(heads, longs).view({heads, 1, 1});
  const at::Tensor b = at::arange(blocks, longs).view({1, blocks, 1});
  const at::Tensor padding = at::full({}, std::numeric_limits<int64_t>::max(), longs);
  const at::Tensor keys = at::where(j.ge(0), (h * blocks + j) * blocks + b, padding).flatten();
  const at::Tensor sorted = std::get<0>(keys.sort());
  const at::Tensor bounds = at::arange(heads * blocks + 1, longs) * blocks;
  BlockSparseInverse inverse;
  inverse.offsets = at::searchsorted(sorted, bounds).to(at::kInt);
  inverse.blocks = sorted.remainder(std::max<int64_t>(blocks, 1)).to(at::kInt);
  return inverse;
}

}  // namespace sb
