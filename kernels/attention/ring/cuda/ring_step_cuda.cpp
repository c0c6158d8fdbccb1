#include "kernels/attention/ring/cuda/ring_step_cuda.h"

#include <ATen/ATen.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <limits>

#include "kernels/attention/block_sparse/cuda/block_sparse_attention_kernels.h"
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
  // Pinned, asynchronous copies: the host does not wait for the device's queue.
  const at::Tensor selected = host.selected.pin_memory().to(q.device(), /*non_blocking=*/true);
  const at::Tensor count = host.count.pin_memory().to(q.device(), /*non_blocking=*/true);
  step.tables = block_sparse_tables(host.slots, selected, count, shapes.scale);
  return step;
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

void ring_step_cuda_synchronize(const at::Tensor& like) {
  c10::cuda::getCurrentCUDAStream(like.device().index()).synchronize();
}

}  // namespace sb
