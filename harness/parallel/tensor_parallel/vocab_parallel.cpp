#include "harness/parallel/tensor_parallel/vocab_parallel.h"

#include <ATen/ATen.h>

#include <stdexcept>

namespace sb {

ShardRange split_range(int64_t n, int64_t tp, int64_t rank) {
  if (tp < 1 || rank < 0 || rank >= tp || n < tp) {
    throw std::invalid_argument("split_range: " + std::to_string(n) + " rows over " + std::to_string(tp) +
                                " ranks, rank " + std::to_string(rank));
  }
  return {rank * n / tp, (rank + 1) * n / tp};
}

at::Tensor vocab_parallel_embedding(const at::Tensor& ids, const at::Tensor& weight, ShardRange shard) {
  if (weight.size(0) != shard.size()) {
    throw std::logic_error("vocab_parallel_embedding: the weight has " + std::to_string(weight.size(0)) +
                           " rows for a shard of " + std::to_string(shard.size()) + " token ids");
  }
  const at::Tensor mine = ids.ge(shard.start) & ids.lt(shard.end);                        // [T]
  const at::Tensor rows = at::where(mine, ids - shard.start, at::zeros_like(ids));        // [T]
  return at::embedding(weight, rows) * mine.unsqueeze(1).to(weight.scalar_type());        // [T, H]
}

}  // namespace sb
