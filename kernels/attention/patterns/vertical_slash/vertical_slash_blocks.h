#pragma once
// The block form of a vertical-slash pattern (vertical_slash_index.h, "mask"): what one
// query block keeps, as the list of key positions a kernel gathers.
//
// Query block m holds positions a = m x B .. b = min(a + B, L) - 1 (B = block_size). A
// kept slash d reaches keys a - d .. b - d (those >= 0), so every key block (same grid)
// that range touches is kept whole; kept verticals outside those key blocks are added one
// by one. Keys past b are never listed (no query of the block may see them); keys inside
// the block above a given query are the caller's causal mask.

#include <cstdint>
#include <vector>

#include "kernels/attention/patterns/vertical_slash/vertical_slash_index.h"

namespace sb {

// Which key blocks 0 .. m the kept slashes reach from query block m: [m + 1] flags.
std::vector<char> vertical_slash_slash_blocks(const VerticalSlashHeadIndex& index, int64_t query_block,
                                              int64_t length);

// Query block m's keys, ascending positions <= its last query: the key blocks its slashes
// reach (whole), merged with the kept verticals outside them. Appends to `keys` after
// clearing it (a caller reuses one vector for every block).
void vertical_slash_block_keys(const VerticalSlashHeadIndex& index, int64_t query_block, int64_t length,
                               std::vector<int64_t>& keys);

// The (query, key) pairs a query block keeps: for each of its `rows` queries (positions
// first ..), its listed keys at or before it (keys ascending, from vertical_slash_block_keys).
int64_t vertical_slash_block_pairs(const std::vector<int64_t>& keys, int64_t first, int64_t rows);

// The pairs one (sequence, query head) keeps: the mask's entries (counted on the block
// grid in O(slashes + verticals x log), without listing any block's keys).
int64_t vertical_slash_kept_pairs(const VerticalSlashHeadIndex& index, int64_t length);

// Query blocks of a sequence of `length` tokens.
inline int64_t vertical_slash_query_blocks(const VerticalSlashHeadIndex& index, int64_t length) {
  return (length + index.block_size - 1) / index.block_size;
}

}  // namespace sb
