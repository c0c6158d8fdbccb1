#pragma once
// Vertical-slash's index as the context-parallel ring runs it (docs/context_parallel.md,
// "Vertical-slash under CP"): slash blocks are whole key blocks of the attention-block
// grid, so they form the call's RingBlockPattern; kept vertical columns outside them are
// single keys, the call's RingColumnLists, computed as a second partial per ring step.

#include <vector>

#include "kernels/attention/core/block_layout.h"
#include "kernels/attention/patterns/vertical_slash/vertical_slash_index.h"
#include "kernels/attention/ring/ring_pattern_selector.h"

namespace sb {

// index [sequence][query head] on the layout's grid (its block_size = the layout's).
// Returns blocks (Hs = Hq) and columns; stats are left empty.
RingCallPattern vertical_slash_ring_pattern(const std::vector<std::vector<VerticalSlashHeadIndex>>& index,
                                            const BlockLayout& layout);

}  // namespace sb
