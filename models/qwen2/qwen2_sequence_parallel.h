#pragma once
// How a decoder layer talks to its tensor-parallel peers when the residual stream is
// sharded along tokens (Megatron's sequence parallelism). The model stays free of any
// communication library: harness/parallel/tensor_parallel implements this over c10d.
//
// With tp ranks and T tokens, rank r holds rows [r L, (r + 1) L) of the stream padded to
// tp L rows, L = ceil(T / tp); the padding rows (at the end, on the last ranks) are zero
// and never reach attention, the MLP or the loss.
//
// In a layer: norm on the rank's rows -> gather -> column-parallel projections and the
// rank's heads on all T tokens -> row-parallel projection (partial sums) -> scatter ->
// residual add on the rank's rows.

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace sb {

class Qwen2SequenceParallel {
 public:
  virtual ~Qwen2SequenceParallel() = default;
  virtual int64_t size() const = 0;  // tp
  virtual int64_t rank() const = 0;  // this rank's position in its TP group
  // Rows this rank holds of a T-token stream: ceil(T / tp).
  int64_t local_rows(int64_t tokens) const { return (tokens + size() - 1) / size(); }
  // x [L, H], this rank's rows -> [T, H], every rank's rows in rank order with the
  // padding dropped (all-gather; its backward reduce-scatters the gradient).
  virtual at::Tensor gather(const at::Tensor& x, int64_t tokens) = 0;
  // x [T, H], this rank's partial sums of every row -> [L, H], the sums of this rank's
  // rows over all TP ranks (reduce-scatter; its backward all-gathers the gradient).
  virtual at::Tensor scatter(const at::Tensor& x) = 0;
};

}  // namespace sb
