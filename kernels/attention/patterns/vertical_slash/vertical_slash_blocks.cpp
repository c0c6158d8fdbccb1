#include "kernels/attention/patterns/vertical_slash/vertical_slash_blocks.h"

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

namespace {

// How many of the sorted, distinct `offsets` lie in [lo, hi].
int64_t count_between(const std::vector<int64_t>& offsets, int64_t lo, int64_t hi) {
  if (hi < lo) return 0;
  return std::upper_bound(offsets.begin(), offsets.end(), hi) - std::lower_bound(offsets.begin(), offsets.end(), lo);
}

bool holds(const std::vector<int64_t>& offsets, int64_t offset) {
  return std::binary_search(offsets.begin(), offsets.end(), offset);
}

}  // namespace

int64_t vertical_slash_kept_pairs(const VerticalSlashHeadIndex& index, int64_t length) {
  // Counted on the grid, without listing keys (the budget search counts every head's pairs
  // at many levels): slash d = e x B + r reaches from query block m the key blocks m - e
  // (when r < the block's rows) and m - e - 1 (when r > 0), those >= 0. Every query block
  // but the last has B rows, so the block offsets m - c a full query block reaches are the
  // same for all of them; the last (R rows) has its own.
  if (length <= 0) return 0;
  const int64_t block = index.block_size;
  const int64_t blocks = (length + block - 1) / block, last_rows = length - (blocks - 1) * block;
  std::vector<int64_t> full_offsets, last_offsets;
  for (const int64_t d : index.slashes) {
    const int64_t e = d / block, r = d % block;
    full_offsets.push_back(e);
    if (r < last_rows) last_offsets.push_back(e);
    if (r > 0) {
      full_offsets.push_back(e + 1);
      last_offsets.push_back(e + 1);
    }
  }
  for (std::vector<int64_t>* offsets : {&full_offsets, &last_offsets}) {
    std::sort(offsets->begin(), offsets->end());
    offsets->erase(std::unique(offsets->begin(), offsets->end()), offsets->end());
  }
  int64_t pairs = 0;
  // Reached key blocks: an earlier one is seen whole by every row, the query block's own
  // causally (row r of the block sees r + 1 of its keys).
  for (int64_t m = 0; m < blocks; ++m) {
    const bool last = m == blocks - 1;
    const std::vector<int64_t>& offsets = last ? last_offsets : full_offsets;
    const int64_t rows = last ? last_rows : block;
    pairs += count_between(offsets, 1, m) * block * rows;
    if (holds(offsets, 0)) pairs += rows * (rows + 1) / 2;
  }
  // Verticals outside the reached key blocks: in their own query block the rows at or
  // after them, in each later one every row.
  for (const int64_t j : index.verticals) {
    if (j < 0 || j >= length) continue;
    const int64_t c = j / block;
    const bool own_is_last = c == blocks - 1;
    if (!holds(own_is_last ? last_offsets : full_offsets, 0)) pairs += std::min((c + 1) * block, length) - j;
    if (own_is_last) continue;
    const int64_t later_full = blocks - 2 - c;  // full query blocks c + 1 .. blocks - 2
    pairs += block * (later_full - count_between(full_offsets, 1, later_full));
    if (!holds(last_offsets, blocks - 1 - c)) pairs += last_rows;
  }
  return pairs;
}

}  // namespace sb
