// MoBA on CUDA: routes on the device, then runs the attention over the chosen blocks with
// the fused block-sparse kernels (docs/block_sparse_attention.md) or, for what they do
// not take (or on request), the two-part flash-attention varlen path
// (moba_varlen_attention.h); the token gate always the latter, over its (head, key
// block) segments (moba_token_varlen_plan.h).

#include "kernels/attention/patterns/moba/cuda/moba_attention_cuda.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <c10/cuda/CUDAGuard.h>

#include <tuple>

#include "kernels/attention/core/block_sparse_plan.h"
#include "kernels/attention/core/cuda/block_sparse_attention_cuda.h"
#include "kernels/attention/core/cuda/block_sparse_attention_kernels.h"
#include "kernels/attention/core/cuda/flash_varlen_attention.h"
#include "kernels/attention/patterns/moba/cuda/moba_routing_cuda.h"
#include "kernels/attention/patterns/moba/moba_token_routing.h"
#include "kernels/attention/patterns/moba/moba_token_varlen_plan.h"
#include "kernels/attention/patterns/moba/moba_varlen_attention.h"

namespace sb {
namespace {

bool use_fused(const at::Tensor& q, MobaCudaKernel kernel) {
  const bool supported = block_sparse_cuda_supports(q.scalar_type(), q.size(2));
  if (kernel == MobaCudaKernel::kFused) {
    TORCH_CHECK(supported,
                "MoBA cuda_kernel \"fused\" runs bfloat16 / float16 with head_dim 64 or 128; got ",
                q.scalar_type(), " head_dim ", q.size(2), " (use \"auto\" or \"flash_varlen\")");
  }
  return supported && kernel != MobaCudaKernel::kFlashVarlen;
}

}  // namespace

MobaResult moba_attention_cuda(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                               const BlockLayout& layout, const MobaParams& params) {
  TORCH_CHECK(q.scalar_type() == at::kHalf || q.scalar_type() == at::kBFloat16,
              "MoBA on CUDA takes float16 or bfloat16; got ", q.scalar_type(),
              " (convert q, k, v with .to(at::kBFloat16))");
  TORCH_CHECK(q.size(2) % 8 == 0 && q.size(2) <= 256,
              "MoBA on CUDA: head_dim must be a multiple of 8 and at most 256, got ", q.size(2));
  const c10::cuda::CUDAGuard guard(q.device());
  MobaResult result;
  {
    const c10::NoGradGuard no_grad;  // the gate is discrete: no gradient flows through it
    result.routing = params.gate == MobaGate::kToken ? moba_route_tokens(q.detach(), k.detach(), layout, params)
                                                     : moba_route_cuda(q.detach(), k.detach(), layout, params);
  }
  if (params.gate == MobaGate::kToken) {  // MoBA's own organisation over flash-attention varlen
    const MobaVarlenPlan plan = moba_token_varlen_plan(layout, result.routing, q.size(1), k.size(1), q.size(2),
                                                       static_cast<int64_t>(q.element_size()), params.scale);
    std::tie(result.out, result.lse) =
        moba_varlen_attention(q.contiguous(), k.contiguous(), v.contiguous(), plan, flash_varlen_attention());
    return result;
  }
  if (use_fused(q, params.cuda_kernel)) {
    const BlockSparseTables tables =
        block_sparse_tables(layout, result.routing.selected, result.routing.selected_count, params.scale);
    std::tie(result.out, result.lse) = block_sparse_attention_cuda(q, k, v, tables);
    return result;
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
