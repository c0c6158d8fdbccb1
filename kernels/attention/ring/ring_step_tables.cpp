#include "kernels/attention/ring/ring_step_tables.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <vector>

namespace sb {
namespace {

bool same_tiles(const RingShardTiles& a, const RingShardTiles& b) {
  if (&a == &b) return true;
  if (a.tiles.size() != b.tiles.size()) return false;
  for (size_t t = 0; t < a.tiles.size(); ++t) {
    if (a.tiles[t].global_start != b.tiles[t].global_start || a.tiles[t].length != b.tiles[t].length) return false;
  }
  return true;
}

}  // namespace

RingStepTables ring_step_tables(const RingStepShapes& shapes, int64_t q_heads) {
  const RingShardTiles& queries = shapes.queries;
  const RingShardTiles& keys = shapes.keys;
  const RingBlockPattern& pattern = shapes.pattern;
  TORCH_CHECK(pattern.selected.dim() == 3 && pattern.selected.scalar_type() == at::kInt &&
                  pattern.count.scalar_type() == at::kInt && pattern.selected.device().is_cpu(),
              "ring step tables: the pattern must be int32 [Hs, NB, capacity] on the CPU");
  const int64_t pattern_heads = pattern.selected.size(0), blocks = pattern.selected.size(1),
                capacity = pattern.selected.size(2);
  TORCH_CHECK(pattern_heads == 1 || pattern_heads == q_heads, "ring step tables: the pattern has ", pattern_heads,
              " heads for ", q_heads, " query heads");
  const bool own_step = same_tiles(queries, keys);
  const int64_t query_tiles = static_cast<int64_t>(queries.tiles.size());
  const int64_t key_tiles = static_cast<int64_t>(keys.tiles.size());
  const int64_t slots = std::max<int64_t>({query_tiles, key_tiles, 1});

  RingStepTables tables;
  tables.slots.block_size = 0;  // slots have no common size; the kernels read the table only
  tables.slots.causal = own_step;
  tables.slots.total_queries = queries.tokens;
  tables.slots.total_keys = keys.tokens;
  tables.slots.sequence_first_block = {0, slots};
  tables.slots.max_blocks_per_sequence = slots;
  tables.slots.blocks.resize(static_cast<size_t>(slots));
  for (int64_t t = 0; t < slots; ++t) {
    LayoutBlock& slot = tables.slots.blocks[t];
    slot.index_in_sequence = t;
    if (t < query_tiles) {
      slot.query_start = queries.tiles[t].local_start;
      slot.query_len = queries.tiles[t].length;
    }
    if (t < key_tiles) {
      slot.key_start = keys.tiles[t].local_start;
      slot.key_len = keys.tiles[t].length;
    }
  }

  // Per (pattern head, query slot) its key slots (a pattern shared by every head, as
  // dense attention's, is walked once), then one [Hq, NS, capacity] table.
  const int32_t* selected = pattern.selected.const_data_ptr<int32_t>();
  const int32_t* count = pattern.count.const_data_ptr<int32_t>();
  std::vector<std::vector<int32_t>> lists(static_cast<size_t>(pattern_heads * slots));
  int64_t longest = 1, pattern_pairs = 0;
  for (int64_t ph = 0; ph < pattern_heads; ++ph) {
    for (int64_t t = 0; t < query_tiles; ++t) {
      const RingTile& query = queries.tiles[t];
      TORCH_CHECK(query.block >= 0 && query.block < blocks, "ring step tables: query tile in block ", query.block,
                  " of a pattern over ", blocks, " blocks");
      const int64_t last_query = query.global_start + query.length - 1;
      std::vector<int32_t>& list = lists[ph * slots + t];
      const int32_t* row = selected + (ph * blocks + query.block) * capacity;
      for (int64_t n = 0; n < count[ph * blocks + query.block]; ++n) {
        const int64_t j = row[n];
        for (int64_t u = keys.first_tile_of_block[j]; u < keys.first_tile_of_block[j + 1]; ++u) {
          const RingTile& key = keys.tiles[u];
          if (j == query.block && key.global_start > last_query) continue;  // all in the future
          const bool masked = j == query.block && key.global_start + key.length - 1 > query.global_start;
          if (masked) {
            // Disjoint runs of tokens never overlap: a masked key tile is the query tile itself.
            TORCH_CHECK(own_step && u == t, "ring step tables: key tile ", u, " overlaps query tile ", t,
                        " without being it");
            pattern_pairs += query.length * (query.length + 1) / 2;
          } else {
            pattern_pairs += query.length * key.length;
          }
          list.push_back(static_cast<int32_t>(u));
        }
      }
      std::sort(list.begin(), list.end());
      longest = std::max<int64_t>(longest, static_cast<int64_t>(list.size()));
    }
  }
  tables.kept_pairs = pattern_heads == 1 ? q_heads * pattern_pairs : pattern_pairs;
  tables.selected = at::full({q_heads, slots, longest}, -1, at::kInt);
  tables.count = at::zeros({q_heads, slots}, at::kInt);
  int32_t* out_selected = tables.selected.mutable_data_ptr<int32_t>();
  int32_t* out_count = tables.count.mutable_data_ptr<int32_t>();
  for (int64_t h = 0; h < q_heads; ++h) {
    for (int64_t t = 0; t < slots; ++t) {
      const std::vector<int32_t>& list = lists[(pattern_heads == 1 ? 0 : h) * slots + t];
      std::copy(list.begin(), list.end(), out_selected + (h * slots + t) * longest);
      out_count[h * slots + t] = static_cast<int32_t>(list.size());
    }
  }
  return tables;
}

RingColumnStepTables ring_column_step_tables(const RingShardTiles& queries, const RingShardTiles& keys,
                                             const RingColumnLists& columns, int64_t q_heads, int64_t kv_heads) {
  TORCH_CHECK(kv_heads > 0 && q_heads % kv_heads == 0 && columns.heads == q_heads,
              "ring column step tables: ", q_heads, " query heads, ", kv_heads, " key/value heads, lists for ",
              columns.heads);
  const int64_t tiles = static_cast<int64_t>(queries.tiles.size()), group = q_heads / kv_heads;
  const int64_t blocks = q_heads * tiles;
  RingColumnStepTables tables;
  tables.blocks.block_size = 0;  // blocks of one query tile each; the kernels read the table only
  tables.blocks.causal = false;
  tables.blocks.total_queries = q_heads * queries.tokens;
  tables.blocks.sequence_first_block = {0, blocks};
  tables.blocks.max_blocks_per_sequence = blocks;
  tables.blocks.blocks.resize(static_cast<size_t>(blocks));
  tables.selected = at::full({1, blocks, 1}, -1, at::kInt);
  tables.count = at::zeros({1, blocks}, at::kInt);
  int32_t* selected = tables.selected.mutable_data_ptr<int32_t>();
  int32_t* count = tables.count.mutable_data_ptr<int32_t>();
  std::vector<int64_t> key_rows, tokens;
  for (int64_t h = 0; h < q_heads; ++h) {
    for (int64_t t = 0; t < tiles; ++t) {
      const RingTile& tile = queries.tiles[t];
      const int64_t b = h * tiles + t;
      LayoutBlock& block = tables.blocks.blocks[b];
      block.index_in_sequence = b;
      block.query_start = h * queries.tokens + tile.local_start;
      block.query_len = tile.length;
      block.key_start = static_cast<int64_t>(key_rows.size());
      columns.of(h, tile.block, tokens);
      for (const int64_t token : tokens) {
        const int64_t row = keys.row_of(token);
        if (row < 0) continue;
        TORCH_CHECK(token < tile.global_start, "ring column step tables: column ", token, " of head ", h,
                    " is not before its query tile at ", tile.global_start);
        key_rows.push_back(row * kv_heads + h / group);
      }
      block.key_len = static_cast<int64_t>(key_rows.size()) - block.key_start;
      if (block.key_len == 0) continue;
      selected[b] = static_cast<int32_t>(b);
      count[b] = 1;
      tables.kept_pairs += tile.length * block.key_len;
    }
  }
  tables.blocks.total_keys = static_cast<int64_t>(key_rows.size());
  tables.key_rows = at::tensor(key_rows, at::kLong);
  return tables;
}

}  // namespace sb
