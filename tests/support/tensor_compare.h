#pragma once
// How far a tensor is from its reference, for kernel tests: ||got - expected|| /
// ||expected|| in float64 on the host (||got - expected|| where the reference is zero).

#include <ATen/ATen.h>

namespace sb::test {

inline double relative_norm_error(const at::Tensor& got, const at::Tensor& expected) {
  const at::Tensor a = got.cpu().to(at::kDouble), b = expected.cpu().to(at::kDouble);
  const double norm = b.norm().item<double>();
  const double difference = (a - b).norm().item<double>();
  return norm == 0.0 ? difference : difference / norm;
}

}  // namespace sb::test
