#pragma once
// RMSNorm forward as Qwen2 defines it:
//   y = weight * cast_to_input_dtype(x * rsqrt(mean(x^2 over the last axis) + eps)),
// statistics in float32 (float64 for the reference).

#include <ATen/core/Tensor.h>

namespace sb {

// The float64 reference every RMSNorm kernel is checked against:
// x [N, H], weight [H] (any floating dtype) -> [N, H] float64.
at::Tensor rms_norm_reference(const at::Tensor& x, const at::Tensor& weight, double eps);

#ifdef SB_WITH_CUDA
// Fused CUDA forward: x [N, H] contiguous on a CUDA device (float32, float16 or
// bfloat16), weight [H] of the same dtype and device -> [N, H] in x's dtype.
at::Tensor rms_norm_forward_cuda(const at::Tensor& x, const at::Tensor& weight, double eps);
#endif

}  // namespace sb
