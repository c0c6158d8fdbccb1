// MoBA on CUDA: checks what flash-attention accepts, routes on the device, builds the
// varlen plan and runs the two-part attention (moba_varlen_attention.h).

#include "kernels/attention/moba/cuda/moba_attention_cuda.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <c10/cuda/CUDAGuard.h>

#include "kernels/attention/cuda/flash_varlen_attention.h"
#include "kernels/attention/moba/cuda/moba_routing_cuda.h"
#include "kernels/attention/moba/moba_varlen_attention.h"

namespace sb {

MobaResult moba_attention_cuda(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                               const MobaLayout& layout, const MobaParams& params) {
  TORCH_CHECK(q.scalar_type() == at::kHalf || q.scalar_type() == at::kBFloat16,
              "MoBA on CUDA runs on flash-attention, which takes float16 or bfloat16; got ",
              q.scalar_type(), " (convert q, k, v with .to(at::kBFloat16))");
  TORCH_CHECK(q.size(2) % 8 == 0 && q.size(2) <= 256,
              "MoBA on CUDA: head_dim must be a multiple of 8 and at most 256 (flash-attention), got ",
              q.size(2));
  const c10::cuda::CUDAGuard guard(q.device());
  MobaResult result;
  {
    const c10::NoGradGuard no_grad;  // the gate is discrete: no gradient flows through it
    result.routing = moba_route_cuda(q.detach(), k.detach(), layout, params);
  }
  const MobaVarlenPlan plan =
      moba_varlen_plan(layout, result.routing, q.size(1), k.size(1), q.size(2),
                       static_cast<int64_t>(q.element_size()), params.scale);
  auto [out, lse] = moba_varlen_attention(q.contiguous(), k.contiguous(), v.contiguous(), plan,
                                          flash_varlen_attention());
  result.out = out;
  result.lse = lse;
  return result;
}

}  // namespace sb
