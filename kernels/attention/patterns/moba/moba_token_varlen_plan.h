#pragma once
// The varlen plan of a token-gate routing (MobaGate::kToken), as MoBA's own public
// implementation organises it: part 1 the diagonal blocks (causal), part 2 one segment
// per (query head h, key block j) holding, in query order, every query of head h that
// chose j besides its own block, against block j's keys of key/value head h / group.
// Work and gathered memory grow with the selected (query, block) pairs, not with a dense
// mask. Segments are ordered by head, then block, and cut into chunks whose gathered
// keys and queries stay within a byte budget (a segment larger than that gets a chunk of
// its own). Built with ATen ops on the routing's device; waits for it twice (the count of
// selected pairs, then of queries per segment).

#include <cstdint>

#include "kernels/attention/core/block_layout.h"
#include "kernels/attention/patterns/moba/moba_attention.h"
#include "kernels/attention/patterns/moba/moba_varlen_attention.h"

namespace sb {

MobaVarlenPlan moba_token_varlen_plan(const BlockLayout& layout, const MobaRouting& routing, int64_t q_heads,
                                      int64_t kv_heads, int64_t head_dim, int64_t element_bytes, double scale,
                                      int64_t gathered_bytes_per_chunk = int64_t{1} << 30);

}  // namespace sb
