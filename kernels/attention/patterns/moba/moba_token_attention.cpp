#include "kernels/attention/patterns/moba/moba_token_attention.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <tuple>

#include "kernels/attention/patterns/moba/moba_token_attention_cpu.h"
#include "kernels/attention/patterns/moba/moba_token_routing.h"
#include "kernels/attention/patterns/moba/moba_token_varlen_plan.h"
#ifdef SB_WITH_CUDA
#include <c10/cuda/CUDAGuard.h>

#include "kernels/attention/core/cuda/flash_varlen_attention.h"
#endif

namespace sb {

MobaResult moba_token_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                const BlockLayout& layout, const MobaParams& params) {
  MobaResult result;
  {
    const c10::NoGradGuard no_grad;  // the gate is discrete: no gradient flows through it
    result.routing = moba_route_tokens(q.detach(), k.detach(), layout, params);
  }
  if (q.device().is_cpu()) {
    // float16 / bfloat16 run in float32 on the CPU (casts are part of the autograd graph).
    const bool widen = q.scalar_type() != at::kFloat && q.scalar_type() != at::kDouble;
    const auto compute = [&](const at::Tensor& x) { return (widen ? x.to(at::kFloat) : x).contiguous(); };
    auto [out, lse] =
        moba_token_attention_cpu(compute(q), compute(k), compute(v), layout, result.routing, params.scale);
    result.out = widen ? out.to(q.scalar_type()) : out;
    result.lse = lse;
    return result;
  }
#ifdef SB_WITH_CUDA
  if (q.is_cuda()) {
    TORCH_CHECK(q.scalar_type() == at::kHalf || q.scalar_type() == at::kBFloat16,
                "MoBA (token gate) on CUDA takes float16 or bfloat16; got ", q.scalar_type(),
                " (convert q, k, v with .to(at::kBFloat16))");
    TORCH_CHECK(q.size(2) % 8 == 0 && q.size(2) <= 256,
                "MoBA (token gate) on CUDA: head_dim must be a multiple of 8 and at most 256, got ", q.size(2));
    const c10::cuda::CUDAGuard guard(q.device());
    const MobaVarlenPlan plan = moba_token_varlen_plan(layout, result.routing, q.size(1), k.size(1), q.size(2),
                                                       static_cast<int64_t>(q.element_size()), params.scale);
    std::tie(result.out, result.lse) =
        moba_varlen_attention(q.contiguous(), k.contiguous(), v.contiguous(), plan, flash_varlen_attention());
    return result;
  }
#endif
  TORCH_CHECK(false, "MoBA (token gate): no implementation for device ", q.device());
}

}  // namespace sb
