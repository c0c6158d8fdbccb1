#include "kernels/attention/patterns/vertical_slash/vertical_slash_ring_pattern.h"

#include <ATen/ATen.h>

#include <algorithm>

#include "kernels/attention/patterns/vertical_slash/vertical_slash_blocks.h"

namespace sb {

RingCallPattern vertical_slash_ring_pattern(const std::vector<std::vector<VerticalSlashHeadIndex>>& index,
                                            const BlockLayout& layout) {
  const int64_t blocks = layout.num_blocks();
  const int64_t heads = index.empty() ? 0 : static_cast<int64_t>(index.front().size());
  TORCH_CHECK(static_cast<int64_t>(index.size()) == layout.num_sequences(),
              "vertical-slash ring pattern: one index per sequence expected");
  std::vector<std::vector<int32_t>> reached(static_cast<size_t>(heads * blocks));
  RingCallPattern pattern;
  auto lists = std::make_shared<RingColumnLists>();
  RingColumnLists& columns = *lists;
  columns.heads = heads;
  columns.block_size = layout.block_size;
  columns.head_columns.resize(static_cast<size_t>(layout.num_sequences() * heads));
  columns.block_sequence.resize(static_cast<size_t>(blocks));
  columns.block_last.resize(static_cast<size_t>(blocks));
  columns.sequence_offset.assign(static_cast<size_t>(layout.num_sequences()), 0);
  columns.sequence_first_block.assign(layout.sequence_first_block.begin(), layout.sequence_first_block.end() - 1);
  for (int64_t b = 0; b < blocks; ++b) {
    const LayoutBlock& block = layout.blocks[static_cast<size_t>(b)];
    columns.block_sequence[static_cast<size_t>(b)] = block.sequence;
    columns.block_last[static_cast<size_t>(b)] = block.key_start + block.key_len - 1;
  }
  for (int64_t s = 0; s < layout.num_sequences(); ++s) {
    const int64_t first = layout.sequence_first_block[static_cast<size_t>(s)];
    const int64_t count = layout.blocks_in_sequence(s);
    if (count == 0) continue;
    const LayoutBlock& last_block = layout.blocks[static_cast<size_t>(first + count - 1)];
    const int64_t offset = layout.blocks[static_cast<size_t>(first)].key_start;
    const int64_t length = last_block.index_in_sequence * layout.block_size + last_block.key_len;
    columns.sequence_offset[static_cast<size_t>(s)] = offset;
    TORCH_CHECK(static_cast<int64_t>(index[static_cast<size_t>(s)].size()) == heads,
                "vertical-slash ring pattern: one index per query head expected");
    for (int64_t h = 0; h < heads; ++h) {
      const VerticalSlashHeadIndex& head = index[static_cast<size_t>(s)][static_cast<size_t>(h)];
      TORCH_CHECK(head.block_size == layout.block_size, "vertical-slash ring pattern: the index's block_size ",
                  head.block_size, " must be the ring's attention block ", layout.block_size);
      for (int64_t m = 0; m < count; ++m) {
        const std::vector<char> slash_blocks = vertical_slash_slash_blocks(head, m, length);
        std::vector<int32_t>& selected = reached[static_cast<size_t>(h * blocks + first + m)];
        for (int64_t c = 0; c <= m; ++c) {
          if (slash_blocks[static_cast<size_t>(c)]) selected.push_back(static_cast<int32_t>(first + c));
        }
      }
      std::vector<int64_t>& verticals = columns.head_columns[static_cast<size_t>(s * heads + h)];
      for (const int64_t j : head.verticals) {
        if (j >= length) break;
        verticals.push_back(offset + j);
      }
    }
  }
  int64_t capacity = 1;
  for (const auto& selected : reached) capacity = std::max<int64_t>(capacity, static_cast<int64_t>(selected.size()));
  pattern.blocks.selected = at::full({heads, blocks, capacity}, -1, at::kInt);
  pattern.blocks.count = at::zeros({heads, blocks}, at::kInt);
  int32_t* selected_data = pattern.blocks.selected.mutable_data_ptr<int32_t>();
  int32_t* count_data = pattern.blocks.count.mutable_data_ptr<int32_t>();
  for (size_t row = 0; row < reached.size(); ++row) {
    std::copy(reached[row].begin(), reached[row].end(), selected_data + static_cast<int64_t>(row) * capacity);
    count_data[row] = static_cast<int32_t>(reached[row].size());
  }
  columns.selected = pattern.blocks.selected;
  columns.count = pattern.blocks.count;
  pattern.columns = std::move(lists);
  return pattern;
}

}  // namespace sb
