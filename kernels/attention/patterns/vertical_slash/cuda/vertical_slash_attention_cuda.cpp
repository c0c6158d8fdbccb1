#include "kernels/attention/patterns/vertical_slash/cuda/vertical_slash_attention_cuda.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/custom_class.h>

#include "kernels/attention/core/block_sparse_plan.h"
#include "kernels/attention/core/cuda/block_sparse_attention_cuda.h"
#include "kernels/attention/core/cuda/block_sparse_attention_kernels.h"
#include "kernels/attention/patterns/vertical_slash/vertical_slash_block_sparse_plan.h"

namespace sb {
namespace {

// What the backward needs besides tensors; travels through autograd as a capsule.
struct VerticalSlashCudaState : torch::CustomClassHolder {
  BlockSparseTables slash, vertical;
  at::Tensor vertical_rows;  // int64 on the device: rows of k as [Hkv x T, D]
  bool has_verticals = false;
};

// The vertical part's key (or value) rows: x [T, Hkv, D] taken as [Hkv x T, D], rows
// `rows`, as [n, 1, D] (one "key/value head" that every flattened query row uses).
at::Tensor gathered_rows(const at::Tensor& x, const at::Tensor& rows) {
  return x.transpose(0, 1).reshape({-1, x.size(2)}).index_select(0, rows).unsqueeze(1).contiguous();
}

// grad [T, Hkv, D] plus the gathered rows' gradients [n, 1, D] added back to their rows,
// in float32. index_put_ with accumulate sorts the indices on CUDA and sums each row's
// contributions in a fixed order (no float atomics).
at::Tensor with_gathered_gradients(const at::Tensor& grad, const at::Tensor& gathered, const at::Tensor& rows) {
  const int64_t tokens = grad.size(0), heads = grad.size(1), dim = grad.size(2);
  at::Tensor flat = grad.transpose(0, 1).reshape({heads * tokens, dim}).to(at::kFloat);
  flat.index_put_({rows}, gathered.view({-1, dim}).to(at::kFloat), /*accumulate=*/true);
  return flat.view({heads, tokens, dim}).transpose(0, 1).to(grad.scalar_type()).contiguous();
}

class VerticalSlashCudaFunction : public torch::autograd::Function<VerticalSlashCudaFunction> {
 public:
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, const at::Tensor& q,
                                                const at::Tensor& k, const at::Tensor& v,
                                                const c10::intrusive_ptr<VerticalSlashCudaState>& state) {
    const int64_t tokens = q.size(0), heads = q.size(1);
    at::Tensor out = at::empty_like(q);
    at::Tensor lse = at::empty({tokens, heads}, q.options().dtype(at::kFloat));
    block_sparse_forward_cuda(q, k, v, state->slash, out, lse);
    if (state->has_verticals) {
      const at::Tensor q2 = block_sparse_head_major(q);
      at::Tensor out2 = at::empty_like(q2);
      at::Tensor lse2 = at::empty({q2.size(0), 1}, lse.options());
      block_sparse_forward_cuda(q2, gathered_rows(k, state->vertical_rows), gathered_rows(v, state->vertical_rows),
                                state->vertical, out2, lse2);
      // Merge by log-sum-exp. The slash part's lse is finite (every query sees itself);
      // a block without verticals has lse2 = -inf and out2 = 0, weight 0.
      const at::Tensor lse_v = lse2.view({heads, tokens}).t();
      const at::Tensor merged = at::logaddexp(lse, lse_v);
      out = (out.to(at::kFloat) * (lse - merged).exp().unsqueeze(-1) +
             block_sparse_token_major(out2, heads).to(at::kFloat) * (lse_v - merged).exp().unsqueeze(-1))
                .to(q.scalar_type())
                .contiguous();
      lse = merged.contiguous();
    }
    ctx->save_for_backward({q, k, v, out, lse});
    ctx->saved_data["state"] = c10::IValue::make_capsule(state);
    ctx->mark_non_differentiable({lse});
    return {out, lse};
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &q = saved[0], &k = saved[1], &v = saved[2], &out = saved[3], &lse = saved[4];
    if (!grads[0].defined()) return {at::zeros_like(q), at::zeros_like(k), at::zeros_like(v), at::Tensor()};
    const auto state =
        c10::static_intrusive_pointer_cast<VerticalSlashCudaState>(ctx->saved_data["state"].toCapsule());
    const at::Tensor grad_out = block_sparse_aligned(grads[0].to(q.scalar_type()));
    // Each part's backward with the merged output and lse gives that part's share of the
    // gradients (docs/vertical_slash.md, "On GPUs").
    at::Tensor dq = at::empty_like(q), dk = at::empty_like(k), dv = at::empty_like(v);
    block_sparse_backward_cuda(grad_out, q, k, v, out, lse, state->slash, block_sparse_inverse(state->slash.selected),
                               dq, dk, dv);
    if (!state->has_verticals) return {dq, dk, dv, at::Tensor()};
    const int64_t heads = q.size(1);
    const at::Tensor q2 = block_sparse_head_major(q), k2 = gathered_rows(k, state->vertical_rows),
                     v2 = gathered_rows(v, state->vertical_rows);
    at::Tensor dq2 = at::empty_like(q2), dk2 = at::empty_like(k2), dv2 = at::empty_like(v2);
    block_sparse_backward_cuda(block_sparse_head_major(grad_out), q2, k2, v2, block_sparse_head_major(out),
                               lse.t().contiguous().view({-1, 1}),
                               state->vertical, block_sparse_inverse(state->vertical.selected), dq2, dk2, dv2);
    dq = (dq.to(at::kFloat) + block_sparse_token_major(dq2, heads).to(at::kFloat)).to(q.scalar_type()).contiguous();
    return {dq, with_gathered_gradients(dk, dk2, state->vertical_rows),
            with_gathered_gradients(dv, dv2, state->vertical_rows), at::Tensor()};
  }
};

}  // namespace

VerticalSlashAttentionResult vertical_slash_attention_cuda(
    const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const PackedSequences& sequences,
    const std::vector<std::vector<VerticalSlashHeadIndex>>& index, double scale) {
  TORCH_CHECK(q.is_cuda() && k.device() == q.device() && v.device() == q.device(),
              "vertical-slash attention (CUDA): q, k, v on one CUDA device expected");
  TORCH_CHECK(q.dim() == 3 && k.dim() == 3 && v.sizes() == k.sizes() && q.size(2) == k.size(2) && k.size(1) > 0 &&
                  q.size(1) % k.size(1) == 0,
              "vertical-slash attention (CUDA): q [T, Hq, D], k and v [T, Hkv, D] with Hq a multiple of Hkv");
  TORCH_CHECK(block_sparse_cuda_supports(q.scalar_type(), q.size(2)),
              "vertical-slash attention (CUDA): bfloat16 or float16 with head_dim 64 or 128, got ", q.scalar_type(),
              " with head_dim ", q.size(2));
  TORCH_CHECK(q.size(0) == sequences.total_tokens() && k.size(0) == sequences.total_tokens(),
              "vertical-slash attention (CUDA): q, k, v must hold the packed sequences' ", sequences.total_tokens(),
              " tokens");
  const VerticalSlashBlockSparsePlan plan = vertical_slash_block_sparse_plan(sequences, index, q.size(1), k.size(1), q.device());
  VerticalSlashAttentionResult result;
  result.kept_pairs = plan.kept_pairs;
  result.kept_pairs_per_sequence = plan.kept_pairs_per_sequence;
  if (q.size(0) == 0) {
    result.out = q * 0;  // keeps the graph to q
    result.lse = at::empty({0, q.size(1)}, q.options().dtype(at::kFloat));
    return result;
  }
  const at::Device device = q.device();
  auto state = c10::make_intrusive<VerticalSlashCudaState>();
  const auto to_device = [&](const at::Tensor& host) { return block_sparse_table_to_device(host, device); };
  state->slash =
      block_sparse_tables(plan.slash_layout, to_device(plan.slash_selected), to_device(plan.slash_count), scale);
  state->has_verticals = plan.vertical_rows.numel() > 0;
  if (state->has_verticals) {
    state->vertical = block_sparse_tables(plan.vertical_layout, to_device(plan.vertical_selected),
                                          to_device(plan.vertical_count), scale);
    state->vertical_rows = plan.vertical_rows;
  }
  auto outputs =
      VerticalSlashCudaFunction::apply(block_sparse_aligned(q), block_sparse_aligned(k), block_sparse_aligned(v), state);
  result.out = outputs[0];
  result.lse = outputs[1];
  return result;
}

}  // namespace sb
