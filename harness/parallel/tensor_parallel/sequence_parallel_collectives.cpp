#include "harness/parallel/tensor_parallel/sequence_parallel_collectives.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include <stdexcept>
#include <utility>

namespace sb {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

TensorParallelGroup& group_of(AutogradContext* ctx) {
  return *reinterpret_cast<TensorParallelGroup*>(ctx->saved_data["group"].toInt());
}

// [L, H] per rank -> [T, H]; backward: pad, reduce-scatter.
struct GatherRows : torch::autograd::Function<GatherRows> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, int64_t tokens, TensorParallelGroup* group) {
    ctx->saved_data["group"] = reinterpret_cast<int64_t>(group);
    return group->all_gather_rows(x).narrow(0, 0, tokens);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    TensorParallelGroup& group = group_of(ctx);
    return {group.reduce_scatter_rows(pad_rows_to_multiple(grads[0], group.size())), at::Tensor(), at::Tensor()};
  }
};

// [T, H] partial sums -> [L, H] summed rows; backward: all-gather, drop the padding.
struct ScatterRows : torch::autograd::Function<ScatterRows> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, TensorParallelGroup* group) {
    ctx->saved_data["group"] = reinterpret_cast<int64_t>(group);
    ctx->saved_data["tokens"] = x.size(0);
    return group->reduce_scatter_rows(pad_rows_to_multiple(x, group->size()));
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const int64_t tokens = ctx->saved_data["tokens"].toInt();
    return {group_of(ctx).all_gather_rows(grads[0]).narrow(0, 0, tokens), at::Tensor()};
  }
};

}  // namespace

at::Tensor pad_rows_to_multiple(const at::Tensor& x, int64_t tp) {
  const int64_t rows = x.size(0), padded = (rows + tp - 1) / tp * tp;
  if (padded == rows) return x;
  std::vector<int64_t> shape = x.sizes().vec();
  shape[0] = padded - rows;
  return at::cat({x, at::zeros(shape, x.options())}, 0);
}

C10dSequenceParallel::C10dSequenceParallel(std::shared_ptr<TensorParallelGroup> group) : group_(std::move(group)) {
  if (!group_) throw std::invalid_argument("C10dSequenceParallel: the group must not be null");
}

at::Tensor C10dSequenceParallel::gather(const at::Tensor& x, int64_t tokens) {
  if (x.size(0) != local_rows(tokens)) {
    throw std::logic_error("sequence parallelism: rank " + std::to_string(rank()) + " holds " +
                           std::to_string(x.size(0)) + " rows of a " + std::to_string(tokens) + "-token stream, expected " +
                           std::to_string(local_rows(tokens)));
  }
  return GatherRows::apply(x, tokens, group_.get());
}

at::Tensor C10dSequenceParallel::scatter(const at::Tensor& x) { return ScatterRows::apply(x, group_.get()); }

}  // namespace sb
