#include "kernels/attention/core/sdpa_kernel_choice.h"

#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <ATen/SDPBackend.h>

namespace sb {
namespace {

at::Context& context() { return at::globalContext(); }

// [L, H, D] -> [1, H, L, D], the dense backend's layout for SDPA.
at::Tensor heads_first(const at::Tensor& x) { return x.transpose(0, 1).unsqueeze(0); }

}  // namespace

std::string dense_sdpa_kernel(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double scale) {
  const int64_t choice = at::_fused_sdp_choice(heads_first(q), heads_first(k), heads_first(v), /*attn_mask=*/{},
                                               /*dropout_p=*/0.0, /*is_causal=*/true, scale,
                                               /*enable_gqa=*/q.size(1) != k.size(1));
  switch (static_cast<at::SDPBackend>(choice)) {
    case at::SDPBackend::flash_attention:
      return "flash";
    case at::SDPBackend::cudnn_attention:
      return "cudnn";
    case at::SDPBackend::efficient_attention:
      return "mem-efficient";
    case at::SDPBackend::math:
      return "math";
    default:
      return "backend " + std::to_string(choice);
  }
}

SdpaFlashOnlyScope::SdpaFlashOnlyScope(bool active)
    : active_(active),
      flash_(context().userEnabledFlashSDP()),
      efficient_(context().userEnabledMemEfficientSDP()),
      cudnn_(context().userEnabledCuDNNSDP()),
      math_(context().userEnabledMathSDP()) {
  if (!active_) return;
  context().setSDPUseFlash(true);
  context().setSDPUseMemEfficient(false);
  context().setSDPUseCuDNN(false);
  context().setSDPUseMath(false);
}

SdpaFlashOnlyScope::~SdpaFlashOnlyScope() {
  if (!active_) return;
  context().setSDPUseFlash(flash_);
  context().setSDPUseMemEfficient(efficient_);
  context().setSDPUseCuDNN(cudnn_);
  context().setSDPUseMath(math_);
}

}  // namespace sb
