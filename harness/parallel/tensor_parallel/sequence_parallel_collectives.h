#pragma once
// Qwen2SequenceParallel over a TensorParallelGroup: the all-gather into a layer's
// tensor-parallel region and the reduce-scatter out of it, as autograd functions whose
// backward is the other collective (Megatron's sequence parallelism). The padding rule
// is models/qwen2/qwen2_sequence_parallel.h's: T tokens, L = ceil(T / tp) rows per
// rank, zero rows at the end.

#include <memory>

#include "harness/parallel/tensor_parallel/tensor_parallel_group.h"
#include "models/qwen2/qwen2_sequence_parallel.h"

namespace sb {

class C10dSequenceParallel : public Qwen2SequenceParallel {
 public:
  explicit C10dSequenceParallel(std::shared_ptr<TensorParallelGroup> group);

  int64_t size() const override { return group_->size(); }
  int64_t rank() const override { return group_->rank(); }
  at::Tensor gather(const at::Tensor& x, int64_t tokens) override;  // [L, H] -> [T, H]
  at::Tensor scatter(const at::Tensor& x) override;                 // [T, H] -> [L, H]


 private:
  std::shared_ptr<TensorParallelGroup> group_;
};

// x [T, ...] -> [tp * ceil(T / tp), ...] with zero rows appended (x itself when none are needed).
at::Tensor pad_rows_to_multiple(const at::Tensor& x, int64_t tp);

}  // namespace sb
