#include "kernels/attention/core/block_layout.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <stdexcept>
#include <string>

namespace sb {

BlockLayout BlockLayout::build(const PackedSequences& keys, const PackedSequences& queries,
                             int64_t block_size, bool causal) {
  if (block_size < 1) {
    throw std::invalid_argument("block layout: block_size must be >= 1, got " + std::to_string(block_size));
  }
  if (keys.num_sequences() != queries.num_sequences()) {
    throw std::invalid_argument("block layout: " + std::to_string(queries.num_sequences()) +
                                " query sequences but " + std::to_string(keys.num_sequences()) +
                                " key sequences");
  }
  BlockLayout layout;
  layout.block_size = block_size;
  layout.causal = causal;
  layout.total_keys = keys.total_tokens();
  layout.total_queries = queries.total_tokens();
  layout.sequence_first_block.reserve(keys.num_sequences() + 1);
  layout.sequence_first_block.push_back(0);
  for (int64_t s = 0; s < keys.num_sequences(); ++s) {
    const int64_t key_len = keys.length(s);
    const int64_t query_len = queries.length(s);
    if (query_len > key_len) {
      throw std::invalid_argument("block layout: sequence " + std::to_string(s) + " has " +
                                  std::to_string(query_len) + " queries but only " +
                                  std::to_string(key_len) + " keys");
    }
    const int64_t first_query_pos = key_len - query_len;
    const int64_t num_blocks = (key_len + block_size - 1) / block_size;
    for (int64_t j = 0; j < num_blocks; ++j) {
      LayoutBlock block;
      block.sequence = s;
      block.index_in_sequence = j;
      const int64_t begin = j * block_size;
      const int64_t end = std::min(begin + block_size, key_len);
      block.key_start = keys.offsets[s] + begin;
      block.key_len = end - begin;
      const int64_t query_begin = std::max(begin, first_query_pos);
      block.query_len = std::max<int64_t>(0, end - query_begin);
      block.query_pos0 = block.query_len > 0 ? query_begin - begin : 0;
      block.query_start = queries.offsets[s] + std::max<int64_t>(0, query_begin - first_query_pos);
      layout.blocks.push_back(block);
    }
    layout.sequence_first_block.push_back(layout.sequence_first_block.back() + num_blocks);
    layout.max_blocks_per_sequence = std::max(layout.max_blocks_per_sequence, num_blocks);
  }
  return layout;
}

at::Tensor block_layout_table(const BlockLayout& layout) {
  at::Tensor table = at::empty({layout.num_blocks(), kBlockFields}, at::kLong);
  int64_t* t = table.mutable_data_ptr<int64_t>();
  for (const LayoutBlock& block : layout.blocks) {
    t[kBlockKeyStart] = block.key_start;
    t[kBlockKeyLen] = block.key_len;
    t[kBlockQueryStart] = block.query_start;
    t[kBlockQueryLen] = block.query_len;
    t[kBlockQueryPos0] = block.query_pos0;
    t += kBlockFields;
  }
  return table;
}

}  // namespace sb
