#include "kernels/attention/core/cuda/flash_varlen_attention.h"

#include <ATen/ATen.h>

namespace sb {
namespace {

class FlashVarlenAttention final : public VarlenAttentionOps {
 public:
  VarlenAttentionForward forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                 const at::Tensor& cu_q, const at::Tensor& cu_k, int64_t max_q,
                                 int64_t max_k, bool causal, double scale) const override {
    auto [out, lse, rng_state, unused, debug_mask] = at::_flash_attention_forward(
        q, k, v, cu_q, cu_k, max_q, max_k, /*dropout_p=*/0.0, causal,
        /*return_debug_mask=*/false, scale);
    // The merge relies on this layout (LibTorch 2.11: mha_varlen_fwd's unpadded lse).
    TORCH_CHECK(lse.dim() == 2 && lse.size(0) == q.size(1) && lse.size(1) == q.size(0),
                "flash varlen attention: expected a log-sum-exp of shape [", q.size(1), ", ",
                q.size(0), "], got ", lse.sizes(),
                "; this LibTorch's flash-attention lays it out differently");
    return {out, lse, rng_state, unused};
  }

  std::tuple<at::Tensor, at::Tensor, at::Tensor> backward(
      const at::Tensor& grad_out, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
      const at::Tensor& out, const at::Tensor& lse, const at::Tensor& cu_q, const at::Tensor& cu_k,
      int64_t max_q, int64_t max_k, bool causal, double scale,
      const VarlenAttentionForward& state) const override {
    return at::_flash_attention_backward(grad_out, q, k, v, out, lse.to(at::kFloat), cu_q, cu_k,
                                         max_q, max_k, /*dropout_p=*/0.0, causal, state.rng_state,
                                         state.unused, scale);
  }
};

}  // namespace

const VarlenAttentionOps& flash_varlen_attention() {
  static const FlashVarlenAttention ops;
  return ops;
}

}  // namespace sb
