#pragma once
// Variable-length attention on the CPU (VarlenAttentionOps, flash-attention's
// conventions: causal masks aligned bottom-right, lse [H, Nq], the backward from the
// given out and lse), float32 or float64. Segments x heads run in parallel, each in
// tiles of queries with BLAS on the calling thread; key and value gradients of one
// (segment, key/value head) are summed by one thread in a fixed order, so results repeat
// bit for bit at a given thread count. A query that sees no key gets out 0, lse -inf.
// What MoBA's token gate runs on the CPU (moba_token_attention.h).

#include "kernels/attention/core/varlen_attention_ops.h"

namespace sb {

const VarlenAttentionOps& cpu_varlen_attention();

}  // namespace sb
