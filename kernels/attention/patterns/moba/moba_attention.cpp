// The MoBA entry point: checks types and shapes once, builds the block layout, then
// runs the routing and the attention of the inputs' device.

#include "kernels/attention/patterns/moba/moba_attention.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <cmath>

#include "kernels/attention/patterns/moba/moba_attention_cpu.h"
#include "kernels/attention/patterns/moba/moba_token_attention_cpu.h"
#include "kernels/attention/patterns/moba/moba_token_routing.h"
#ifdef SB_WITH_CUDA
#include "kernels/attention/patterns/moba/cuda/moba_attention_cuda.h"
#endif

namespace sb {
namespace {

void moba_check_inputs(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                       const MobaParams& params) {
  TORCH_CHECK(q.dim() == 3 && k.dim() == 3 && v.dim() == 3,
              "MoBA: q, k, v must be [T, H, D]; got q ", q.sizes(), ", k ", k.sizes(), ", v ",
              v.sizes());
  TORCH_CHECK(k.sizes() == v.sizes(), "MoBA: k ", k.sizes(), " and v ", v.sizes(),
              " must have the same shape");
  TORCH_CHECK(q.size(2) == k.size(2) && q.size(2) > 0, "MoBA: q head_dim ", q.size(2),
              " and k head_dim ", k.size(2), " must be equal and positive");
  TORCH_CHECK(k.size(1) > 0 && q.size(1) % k.size(1) == 0, "MoBA: query heads (", q.size(1),
              ") must be a multiple of key/value heads (", k.size(1), ")");
  TORCH_CHECK(at::isFloatingType(q.scalar_type()), "MoBA: q must be floating point, got ",
              q.scalar_type());
  TORCH_CHECK(k.scalar_type() == q.scalar_type() && v.scalar_type() == q.scalar_type(),
              "MoBA: q, k, v must share one dtype; got ", q.scalar_type(), ", ", k.scalar_type(),
              ", ", v.scalar_type());
  TORCH_CHECK(k.device() == q.device() && v.device() == q.device(),
              "MoBA: q, k, v must be on one device; got ", q.device(), ", ", k.device(), ", ",
              v.device());
  TORCH_CHECK(std::isfinite(params.scale) && params.scale > 0.0,
              "MoBA: scale must be positive and finite, got ", params.scale);
}

MobaResult moba_attention_cpu_path(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                   const BlockLayout& layout, const MobaParams& params) {
  MobaResult result;
  {
    const c10::NoGradGuard no_grad;  // the gate is discrete: no gradient flows through it
    result.routing = params.gate == MobaGate::kToken ? moba_route_tokens(q.detach(), k.detach(), layout, params)
                                                     : moba_route_cpu(q.detach(), k.detach(), layout, params);
  }
  // float16 / bfloat16 run in float32 on the CPU (casts are part of the autograd graph).
  const bool widen = q.scalar_type() != at::kFloat && q.scalar_type() != at::kDouble;
  const auto compute = [&](const at::Tensor& x) {
    return (widen ? x.to(at::kFloat) : x).contiguous();
  };
  const auto kernel = params.gate == MobaGate::kToken ? moba_token_attention_cpu : moba_attention_cpu;
  auto [out, lse] = kernel(compute(q), compute(k), compute(v), layout, result.routing, params.scale);
  result.out = widen ? out.to(q.scalar_type()) : out;
  result.lse = lse;
  return result;
}

}  // namespace

const OptionNames<MobaGate>& moba_gate_options() {
  static const OptionNames<MobaGate> names{"MoBA gate", {{"token", MobaGate::kToken}, {"block", MobaGate::kBlock}}};
  return names;
}

const OptionNames<MobaCudaKernel>& moba_cuda_kernel_options() {
  static const OptionNames<MobaCudaKernel> names{"MoBA CUDA kernel",
                                                 {{"auto", MobaCudaKernel::kAuto},
                                                  {"fused", MobaCudaKernel::kFused},
                                                  {"flash_varlen", MobaCudaKernel::kFlashVarlen}}};
  return names;
}

MobaResult moba_attention_packed(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                 const PackedSequences& query_sequences,
                                 const PackedSequences& key_sequences, const MobaParams& params) {
  moba_check_inputs(q, k, v, params);
  query_sequences.check(q.size(0));
  key_sequences.check(k.size(0));
  const BlockLayout layout =
      BlockLayout::build(key_sequences, query_sequences, params.block_size, params.causal);
  moba_budgets_per_sequence(params, layout.num_sequences());  // throws on bad budgets
  if (q.device().is_cpu()) return moba_attention_cpu_path(q, k, v, layout, params);
#ifdef SB_WITH_CUDA
  if (q.is_cuda()) return moba_attention_cuda(q, k, v, layout, params);
#endif
  TORCH_CHECK(false, "MoBA: no implementation for device ", q.device(),
              " in this build (CPU always; CUDA when built with SB_CUDA=ON)");
}

MobaResult moba_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                          const PackedSequences& sequences, const MobaParams& params) {
  TORCH_CHECK(q.dim() >= 1 && k.dim() >= 1 && q.size(0) == k.size(0), "MoBA: q has ",
              q.dim() >= 1 ? q.size(0) : 0, " tokens but k has ", k.dim() >= 1 ? k.size(0) : 0,
              " (training attention needs one query per key)");
  return moba_attention_packed(q, k, v, sequences, sequences, params);
}

}  // namespace sb
