#include "kernels/attention/core/cuda/block_sparse_attention_cuda.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include <cstdint>

#include "kernels/attention/core/cuda/block_sparse_attention_kernels.h"

namespace sb {
namespace {

struct BlockSparseState : torch::CustomClassHolder {
  BlockSparseTables tables;
};

class BlockSparseFunction : public torch::autograd::Function<BlockSparseFunction> {
 public:
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx,
                                                const at::Tensor& q, const at::Tensor& k,
                                                const at::Tensor& v, const BlockSparseTables* tables) {
    at::Tensor out = at::empty_like(q, at::MemoryFormat::Contiguous);
    at::Tensor lse = at::empty({q.size(0), q.size(1)}, q.options().dtype(at::kFloat));
    block_sparse_forward_cuda(q, k, v, *tables, out, lse);
    auto state = c10::make_intrusive<BlockSparseState>();
    state->tables = *tables;
    ctx->save_for_backward({q, k, v, out, lse});
    ctx->saved_data["state"] = c10::IValue::make_capsule(state);
    ctx->mark_non_differentiable({lse});
    return {out, lse};
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &q = saved[0], &k = saved[1], &v = saved[2], &out = saved[3], &lse = saved[4];
    if (!grads[0].defined()) {
      return {at::zeros_like(q), at::zeros_like(k), at::zeros_like(v), at::Tensor()};
    }
    const auto state =
        c10::static_intrusive_pointer_cast<BlockSparseState>(ctx->saved_data["state"].toCapsule());
    const at::Tensor grad_out = block_sparse_aligned(grads[0].to(q.scalar_type()));
    at::Tensor dq = at::empty_like(q), dk = at::empty_like(k), dv = at::empty_like(v);
    const BlockSparseInverse inverse = block_sparse_inverse(state->tables.selected);
    block_sparse_backward_cuda(grad_out, q, k, v, out, lse, state->tables, inverse, dq, dk, dv);
    return {dq, dk, dv, at::Tensor()};
  }
};

}  // namespace

at::Tensor block_sparse_aligned(const at::Tensor& x) {
  at::Tensor c = x.contiguous();
  return reinterpret_cast<uintptr_t>(c.const_data_ptr()) % 16 == 0 ? c : c.clone();
}

at::Tensor block_sparse_head_major(const at::Tensor& x) {
  return x.transpose(0, 1).reshape({x.size(0) * x.size(1), 1, x.size(2)}).contiguous();
}

at::Tensor block_sparse_token_major(const at::Tensor& x, int64_t heads) {
  return x.view({heads, -1, x.size(2)}).transpose(0, 1);
}

at::Tensor block_sparse_table_to_device(const at::Tensor& host, const at::Device& device) {
  return host.pin_memory().to(device, /*non_blocking=*/true);
}

std::pair<at::Tensor, at::Tensor> block_sparse_attention_cuda(const at::Tensor& q, const at::Tensor& k,
                                                              const at::Tensor& v,
                                                              const BlockSparseTables& tables) {
  auto outputs = BlockSparseFunction::apply(block_sparse_aligned(q), block_sparse_aligned(k),
                                             block_sparse_aligned(v), &tables);
  return {outputs[0], outputs[1]};
}

}  // namespace sb
