#include "harness/parallel/tensor_parallel/vocab_parallel.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include <stdexcept>

#include "harness/data/packed_microbatch.h"

namespace sb {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct VocabParallelCrossEntropy : torch::autograd::Function<VocabParallelCrossEntropy> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& logits, const at::Tensor& labels, int64_t start,
                            TensorParallelGroup* group) {
    const int64_t columns = logits.size(1);
    const at::Tensor z = logits.detach();                       // [T, Vr]
    at::Tensor row_max = std::get<0>(z.max(1)).contiguous();    // [T]
    group->all_reduce(row_max, c10d::ReduceOp::MAX);
    const at::Tensor exps = (z - row_max.unsqueeze(1)).exp();  // [T, Vr]
    const at::Tensor valid = labels.ne(kIgnoreLabel);           // [T]
    const at::Tensor mine = valid & labels.ge(start) & labels.lt(start + columns);
    const at::Tensor column = at::where(mine, labels - start, at::zeros_like(labels));  // [T]
    const at::Tensor label_logit = z.gather(1, column.unsqueeze(1)).squeeze(1) - row_max;
    // [2, T]: this rank's exp-sums and, where it holds the label, the label's shifted logit.
    at::Tensor sums = at::stack({exps.sum(1), at::where(mine, label_logit, at::zeros_like(label_logit))}).contiguous();
    group->all_reduce(sums);
    const at::Tensor losses = (sums[0].log() - sums[1]) * valid.to(z.scalar_type());  // [T]
    ctx->save_for_backward({exps / sums[0].unsqueeze(1), column, mine, valid});
    return losses.sum();
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor& softmax = saved[0];  // [T, Vr]
    const at::Tensor &column = saved[1], &mine = saved[2], &valid = saved[3];
    at::Tensor grad = softmax.clone();
    grad.scatter_add_(1, column.unsqueeze(1), -mine.to(grad.scalar_type()).unsqueeze(1));
    grad.mul_(valid.to(grad.scalar_type()).unsqueeze(1)).mul_(grads[0]);
    return {grad, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

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

at::Tensor vocab_parallel_cross_entropy_sum(const at::Tensor& logits, const at::Tensor& labels, ShardRange shard,
                                            TensorParallelGroup& group) {
  if (logits.dim() != 2 || logits.size(1) != shard.size() || labels.dim() != 1 || labels.size(0) != logits.size(0)) {
    throw std::logic_error("vocab_parallel_cross_entropy_sum: logits [T, " + std::to_string(shard.size()) +
                           "] and labels [T] expected");
  }
  return VocabParallelCrossEntropy::apply(logits, labels, shard.start, &group);
}

}  // namespace sb
