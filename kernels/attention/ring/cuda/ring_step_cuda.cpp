#include "kernels/attention/ring/cuda/ring_step_cuda.h"

#include <ATen/ATen.h>
#include <c10/cuda/CUDAGuard.h>

#include <limits>

#include "kernels/attention/core/cuda/block_sparse_attention_cuda.h"
#include "kernels/attention/core/cuda/block_sparse_attention_kernels.h"
#include "kernels/attention/ring/ring_step_tables.h"

namespace sb {
namespace {

// The step's tables on q's device, or none when the step keeps no pair (empty shards,
// or a shard wholly in the queries' future): the kernels are then not launched.
struct DeviceStep {
  BlockSparseTables tables;
  int64_t kept_pairs = 0;
};

DeviceStep device_step(const at::Tensor& q, const RingStepShapes& shapes) {
  const RingStepTables host = ring_step_tables(shapes, q.size(1));
  DeviceStep step;
  step.kept_pairs = host.kept_pairs;
  if (step.kept_pairs == 0) return step;
  step.tables = block_sparse_tables(host.slots, block_sparse_table_to_device(host.selected, q.device()),
                                    block_sparse_table_to_device(host.count, q.device()), shapes.scale);
  return step;
}

// The columns' part: its tables and the gathered rows on q's device (none when it keeps
// no pair).
struct DeviceColumnStep {
  BlockSparseTables tables;
  at::Tensor key_rows;  // int64: rows of k as [Tk x Hkv, D]
  int64_t kept_pairs = 0;
};

DeviceColumnStep device_column_step(const at::Tensor& q, const at::Tensor& k, const RingShardTiles& queries,
                                    const RingShardTiles& keys, const RingColumnLists& columns, double scale) {
  const RingColumnStepTables host = ring_column_step_tables(queries, keys, columns, q.size(1), k.size(1));
  DeviceColumnStep step;
  step.kept_pairs = host.kept_pairs;
  if (step.kept_pairs == 0) return step;
  step.tables = block_sparse_tables(host.blocks, block_sparse_table_to_device(host.selected, q.device()),
                                    block_sparse_table_to_device(host.count, q.device()), scale);
  step.key_rows = block_sparse_table_to_device(host.key_rows, q.device());
  return step;
}

// Rows `rows` of x [T, Hkv, D] taken as [T x Hkv, D], as [n, 1, D] (a copy).
at::Tensor gathered(const at::Tensor& x, const at::Tensor& rows) {
  return x.view({-1, x.size(2)}).index_select(0, rows).unsqueeze(1).contiguous();
}

}  // namespace

int64_t ring_step_forward_cuda(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                               const RingStepShapes& shapes, at::Tensor& out_step, at::Tensor& lse_step) {
  const c10::cuda::CUDAGuard guard(q.device());
  const DeviceStep step = device_step(q, shapes);
  if (step.kept_pairs == 0) {
    out_step.zero_();
    lse_step.fill_(-std::numeric_limits<float>::infinity());
    return 0;
  }
  block_sparse_forward_cuda(q, k, v, step.tables, out_step, lse_step);
  return step.kept_pairs;
}

int64_t ring_step_backward_cuda(const at::Tensor& grad_out, const at::Tensor& q, const at::Tensor& k,
                                const at::Tensor& v, const at::Tensor& out, const at::Tensor& lse,
                                const RingStepShapes& shapes, at::Tensor& dq, at::Tensor& dk, at::Tensor& dv) {
  const c10::cuda::CUDAGuard guard(q.device());
  const DeviceStep step = device_step(q, shapes);
  if (step.kept_pairs == 0) return 0;
  at::Tensor dq_step = at::empty_like(q), dk_step = at::empty_like(k), dv_step = at::empty_like(v);
  block_sparse_backward_cuda(grad_out, q, k, v, out, lse, step.tables, block_sparse_inverse(step.tables.selected),
                             dq_step, dk_step, dv_step);
  dq.add_(dq_step);
  dk.add_(dk_step);
  dv.add_(dv_step);
  return step.kept_pairs;
}

int64_t ring_column_step_forward_cuda(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                      const RingShardTiles& queries, const RingShardTiles& keys,
                                      const RingColumnLists& columns, double scale, at::Tensor& out_step,
                                      at::Tensor& lse_step) {
  const c10::cuda::CUDAGuard guard(q.device());
  const DeviceColumnStep step = device_column_step(q, k, queries, keys, columns, scale);
  if (step.kept_pairs == 0) {
    out_step.zero_();
    lse_step.fill_(-std::numeric_limits<float>::infinity());
    return 0;
  }
  const int64_t heads = q.size(1), tokens = q.size(0);
  const at::Tensor q2 = block_sparse_head_major(q);
  at::Tensor out2 = at::empty_like(q2);
  at::Tensor lse2 = at::empty({q2.size(0), 1}, q.options().dtype(at::kFloat));
  block_sparse_forward_cuda(q2, gathered(k, step.key_rows), gathered(v, step.key_rows), step.tables, out2, lse2);
  out_step.copy_(block_sparse_token_major(out2, heads));
  lse_step.copy_(lse2.view({heads, tokens}).t());
  return step.kept_pairs;
}

int64_t ring_column_step_backward_cuda(const at::Tensor& grad_out, const at::Tensor& q, const at::Tensor& k,
                                       const at::Tensor& v, const at::Tensor& out, const at::Tensor& lse,
                                       const RingShardTiles& queries, const RingShardTiles& keys,
                                       const RingColumnLists& columns, double scale, at::Tensor& dq, at::Tensor& dk,
                                       at::Tensor& dv) {
  const c10::cuda::CUDAGuard guard(q.device());
  const DeviceColumnStep step = device_column_step(q, k, queries, keys, columns, scale);
  if (step.kept_pairs == 0) return 0;
  const int64_t heads = q.size(1), dim = q.size(2);
  const at::Tensor q2 = block_sparse_head_major(q);
  const at::Tensor k2 = gathered(k, step.key_rows), v2 = gathered(v, step.key_rows);
  at::Tensor dq2 = at::empty_like(q2), dk2 = at::empty_like(k2), dv2 = at::empty_like(v2);
  // The merged output and lse of each row, head-major like the queries.
  block_sparse_backward_cuda(block_sparse_head_major(grad_out), q2, k2, v2, block_sparse_head_major(out),
                               lse.t().contiguous().view({-1, 1}),
                             step.tables, block_sparse_inverse(step.tables.selected), dq2, dk2, dv2);
  dq.add_(block_sparse_token_major(dq2, heads));
  dk.view({-1, dim}).index_put_({step.key_rows}, dk2.view({-1, dim}).to(at::kFloat), /*accumulate=*/true);
  dv.view({-1, dim}).index_put_({step.key_rows}, dv2.view({-1, dim}).to(at::kFloat), /*accumulate=*/true);
  return step.kept_pairs;
}

}  // namespace sb
