// The fused CUDA RMSNorm against the float64 reference, per dtype, over hidden sizes
// that are odd, smaller than a warp, and larger than a block.

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "kernels/bench/rms_norm/rms_norm.h"

namespace sb {
namespace {

struct DtypeTolerance {
  double rtol;
  double atol;
};

// The kernel rounds twice to the dtype (the normalized value, then the product with
// the weight), so each element may be off by about two units of its relative precision.
DtypeTolerance tolerance_for(at::ScalarType dtype) {
  switch (dtype) {
    case at::kFloat:
      return {1e-5, 1e-6};  // float32 statistics and rsqrtf
    case at::kHalf:
      return {2.5e-3, 1e-5};  // 2 * 2^-11
    case at::kBFloat16:
      return {1.6e-2, 1e-5};  // 2 * 2^-8
    default:
      ADD_FAILURE() << "no tolerance for " << dtype;
      return {0.0, 0.0};
  }
}

class RmsNormCudaTest : public ::testing::TestWithParam<std::tuple<at::ScalarType, int64_t>> {};

TEST_P(RmsNormCudaTest, MatchesFloat64Reference) {
  const auto [dtype, hidden] = GetParam();
  const int64_t rows = 37;
  const double eps = 1e-6;
  at::manual_seed(hidden);
  const at::Tensor x_cpu = (at::randn({rows, hidden}) * 3.0).to(dtype);
  const at::Tensor w_cpu = (at::randn({hidden}) * 0.5 + 1.0).to(dtype);

  const at::Tensor y = rms_norm_forward_cuda(x_cpu.cuda(), w_cpu.cuda(), eps);
  ASSERT_EQ(y.scalar_type(), dtype);
  ASSERT_EQ(y.sizes(), x_cpu.sizes());
  ASSERT_TRUE(y.is_cuda());

  const at::Tensor expected = rms_norm_reference(x_cpu, w_cpu, eps);  // [N, H] float64
  const at::Tensor actual = y.cpu().to(at::kDouble);
  const DtypeTolerance tol = tolerance_for(dtype);
  const at::Tensor excess = (actual - expected).abs() - (tol.atol + tol.rtol * expected.abs());
  const double worst = excess.max().item<double>();
  EXPECT_LE(worst, 0.0) << "dtype " << dtype << " hidden " << hidden << ": max |error| "
                        << (actual - expected).abs().max().item<double>();
}

INSTANTIATE_TEST_SUITE_P(DtypesAndHiddenSizes, RmsNormCudaTest,
                         ::testing::Combine(::testing::Values(at::kFloat, at::kHalf, at::kBFloat16),
                                            ::testing::Values<int64_t>(1, 33, 896, 2048, 4097)),
                         [](const auto& info) {
                           return std::string(c10::toString(std::get<0>(info.param))) + "_h" +
                                  std::to_string(std::get<1>(info.param));
                         });

TEST(RmsNormCuda, RoundsLikeQwen2) {
  // Qwen2: weight * (x.float() * rsqrt(mean(x^2) + eps)).to(bf16), computed here with
  // ATen ops; the kernel differs only in summation order and rsqrt, so almost every
  // element must agree bit for bit. Where the normalized value rounds to the
  // neighbouring bf16, the product moves by at most about two bf16 steps (2^-6 relative).
  at::manual_seed(5);
  const at::Tensor x = (at::randn({64, 896}) * 2.0).to(at::kBFloat16).cuda();
  const at::Tensor w = (at::randn({896}) * 0.5 + 1.0).to(at::kBFloat16).cuda();
  const at::Tensor xf = x.to(at::kFloat);
  const at::Tensor expected =
      w * (xf * (xf.square().mean({-1}, true) + 1e-6).rsqrt()).to(at::kBFloat16);
  const at::Tensor actual = rms_norm_forward_cuda(x, w, 1e-6);
  const at::Tensor diff = (actual.to(at::kFloat) - expected.to(at::kFloat)).abs();
  const double mismatched = diff.gt(0).to(at::kDouble).mean().item<double>();
  EXPECT_LT(mismatched, 0.01);
  EXPECT_TRUE(diff.le(expected.to(at::kFloat).abs() * (1.0 / 64.0) + 1e-6).all().item<bool>());
}

TEST(RmsNormCuda, EmptyBatch) {
  const at::Tensor y =
      rms_norm_forward_cuda(at::empty({0, 64}, at::kCUDA), at::ones({64}, at::kCUDA), 1e-6);
  EXPECT_EQ(y.sizes(), (std::vector<int64_t>{0, 64}));
}

TEST(RmsNormCuda, RejectsWrongInputs) {
  const auto cuda_f32 = at::TensorOptions().device(at::kCUDA).dtype(at::kFloat);
  const at::Tensor x = at::randn({4, 32}, cuda_f32);
  const at::Tensor w = at::ones({32}, cuda_f32);
  EXPECT_THROW(rms_norm_forward_cuda(x.cpu(), w.cpu(), 1e-6), c10::Error);  // device
  EXPECT_THROW(rms_norm_forward_cuda(x, w.cpu(), 1e-6), c10::Error);        // mixed devices
  EXPECT_THROW(rms_norm_forward_cuda(x.to(at::kDouble), w.to(at::kDouble), 1e-6),
               c10::Error);                                                   // dtype
  EXPECT_THROW(rms_norm_forward_cuda(x, w.to(at::kHalf), 1e-6), c10::Error);  // mixed dtypes
  EXPECT_THROW(rms_norm_forward_cuda(x, at::ones({31}, cuda_f32), 1e-6), c10::Error);  // width
  EXPECT_THROW(rms_norm_forward_cuda(x.view({2, 2, 32}), w, 1e-6), c10::Error);        // rank
  EXPECT_THROW(
      rms_norm_forward_cuda(at::randn({32, 4}, cuda_f32).t(), at::ones({32}, cuda_f32), 1e-6),
      c10::Error);                                              // layout
  EXPECT_THROW(rms_norm_forward_cuda(x, w, -1.0), c10::Error);  // eps
}

}  // namespace
}  // namespace sb
