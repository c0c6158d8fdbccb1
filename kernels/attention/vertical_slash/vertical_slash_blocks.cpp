#include "kernels/attention/vertical_slash/vertical_slash_blocks.h"

#include <algorithm>

namespace sb {

std::vector<char> vertical_slash_slash_blocks(const VerticalSlashHeadIndex& index, int64_t query_block,
                                              int64_t length) {
  const int64_t block = index.block_size;
  const int64_t first = query_block * block, last = std::min(first + block, length) - 1;
  std::vector<char> reached(static_cast<size_t>(query_block + 1), 0);
  for (const int64_t d : index.slashes) {  // ascending: past `last` none reaches a key
    if (d > last) break;
    const int64_t lo = std::max<int64_t>(0, first - d) / block, hi = (last - d) / block;
    std::fill(reached.begin() + lo, reached.begin() + hi + 1, char{1});
  }
  return reached;
}

void vertical_slash_block_keys(const VerticalSlashHeadIndex& index, int64_t query_block, int64_t length,
                               std::vector<int64_t>& keys) {
  keys.clear();
  const int64_t block = index.block_size;
  const int64_t last = std::min((query_block + 1) * block, length) - 1;
  const std::vector<char> reached = vertical_slash_slash_blocks(index, query_block, length);
  auto vertical = index.verticals.begin();
  for (int64_t c = 0; c <= query_block; ++c) {
    const int64_t begin = c * block, end = std::min(begin + block, last + 1);
    // Verticals before this key block's end: listed alone unless the block is whole.
    for (; vertical != index.verticals.end() && *vertical < end; ++vertical) {
      if (!reached[static_cast<size_t>(c)]) keys.push_back(*vertical);
    }
    if (reached[static_cast<size_t>(c)]) {
      for (int64_t j = begin; j < end; ++j) keys.push_back(j);
    }
  }
}

int64_t vertical_slash_block_pairs(const std::vector<int64_t>& keys, int64_t first, int64_t rows) {
  int64_t pairs = 0;
  auto visible = keys.begin();
  for (int64_t r = 0; r < rows; ++r) {
    visible = std::upper_bound(visible, keys.end(), first + r);
    pairs += visible - keys.begin();
  }
  return pairs;
}

int64_t vertical_slash_kept_pairs(const VerticalSlashHeadIndex& index, int64_t length) {
  int64_t pairs = 0;
  std::vector<int64_t> keys;
  for (int64_t m = 0; m < vertical_slash_query_blocks(index, length); ++m) {
    vertical_slash_block_keys(index, m, length, keys);
    const int64_t first = m * index.block_size;
    pairs += vertical_slash_block_pairs(keys, first, std::min(index.block_size, length - first));
  }
  return pairs;
}

}  // namespace sb
