#pragma once
// Ring attention steps on a GPU (docs/context_parallel.md, "On GPUs"): the step's
// pattern as the fused block-sparse kernels' tables (ring_step_tables.h), then their
// forward or backward, reading the rank's queries and the visiting shard in place.
//
// Shapes as ring_step_cpu.h: q [Tq, Hq, D] (the rank's queries), k, v [Tk, Hkv, D] (the
// visiting shard), contiguous, on one CUDA device, bfloat16 or float16, D 64 or 128.

#include <ATen/core/Tensor.h>

#include <cstdint>

#include "kernels/attention/ring/ring_column_step_cpu.h"
#include "kernels/attention/ring/ring_step_cpu.h"

namespace sb {

// out_step [Tq, Hq, D] (q's dtype) and lse_step [Tq, Hq] float32 overwritten: the step's
// partial attention (out 0, lse -inf where a query keeps no key of the shard). Returns
// the kept (query, key) pairs summed over query heads.
int64_t ring_step_forward_cuda(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                               const RingStepShapes& shapes, at::Tensor& out_step, at::Tensor& lse_step);

// The step's gradients given the final (merged) out [Tq, Hq, D] (q's dtype) and lse
// [Tq, Hq] float32: the kernels' results (in q's dtype, accumulated in float32 inside
// them) are added into the float32 accumulators dq [Tq, Hq, D] and the visiting shard's
// dk, dv [Tk, Hkv, D], so only each step's share is rounded to q's dtype.
// Deterministic (the kernels use no float atomics).
// Returns the kept pairs, as the forward.
int64_t ring_step_backward_cuda(const at::Tensor& grad_out, const at::Tensor& q, const at::Tensor& k,
                                const at::Tensor& v, const at::Tensor& out, const at::Tensor& lse,
                                const RingStepShapes& shapes, at::Tensor& dq, at::Tensor& dk, at::Tensor& dv);

// A selection's columns outside its blocks against the visiting shard
// (ring_column_step_cpu.h), as the fused kernels' second call over gathered copies of the
// shard's column rows (ring_step_tables.h): the forward overwrites out_step and lse_step
// as ring_step_forward_cuda does; the backward adds into the float32 accumulators, the
// columns' dK/dV rows put back in a fixed order (index_put_ with accumulate sorts them).
int64_t ring_column_step_forward_cuda(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                      const RingShardTiles& queries, const RingShardTiles& keys,
                                      const RingColumnLists& columns, double scale, at::Tensor& out_step,
                                      at::Tensor& lse_step);
int64_t ring_column_step_backward_cuda(const at::Tensor& grad_out, const at::Tensor& q, const at::Tensor& k,
                                       const at::Tensor& v, const at::Tensor& out, const at::Tensor& lse,
                                       const RingShardTiles& queries, const RingShardTiles& keys,
                                       const RingColumnLists& columns, double scale, at::Tensor& dq, at::Tensor& dk,
                                       at::Tensor& dv);

}  // namespace sb
