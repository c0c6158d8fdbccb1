#include <ATen/ATen.h>

#include <cmath>

#include "kernels/bench/rms_norm/rms_norm.h"

namespace sb {

at::Tensor rms_norm_reference(const at::Tensor& x, const at::Tensor& weight, double eps) {
  TORCH_CHECK(x.dim() == 2, "rms_norm_reference: x must be [N, H], got ", x.sizes());
  TORCH_CHECK(weight.dim() == 1 && weight.size(0) == x.size(1),
              "rms_norm_reference: weight must be [H] with H = ", x.size(1), ", got ",
              weight.sizes());
  TORCH_CHECK(at::isFloatingType(x.scalar_type()) && at::isFloatingType(weight.scalar_type()),
              "rms_norm_reference: x and weight must be floating point, got ", x.scalar_type(),
              " and ", weight.scalar_type());
  TORCH_CHECK(x.device() == weight.device(), "rms_norm_reference: x is on ", x.device(),
              " but weight is on ", weight.device());
  TORCH_CHECK(std::isfinite(eps) && eps >= 0.0, "rms_norm_reference: eps must be >= 0, got ", eps);
  // The exact value without the kernels' intermediate rounding to the input dtype:
  // kernels are judged by how far they land from it.
  const at::Tensor x64 = x.to(at::kDouble);                                          // [N, H]
  const at::Tensor mean_square = x64.square().mean(/*dim=*/{-1}, /*keepdim=*/true);  // [N, 1]
  return x64 * (mean_square + eps).rsqrt() * weight.to(at::kDouble);                 // [N, H]
}

}  // namespace sb
