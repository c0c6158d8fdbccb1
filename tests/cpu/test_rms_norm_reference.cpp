// rms_norm_reference against hand-computed values and an element-by-element loop.

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>

#include "kernels/bench/rms_norm/rms_norm.h"

namespace sb {
namespace {

TEST(RmsNormReference, HandComputedRow) {
  // x = [3, 4]: mean(x^2) = 12.5, rms = 5 / sqrt(2); with w = [1, 2] and eps = 0:
  // y = [3 * sqrt(2) / 5, 2 * 4 * sqrt(2) / 5] = [0.6 sqrt(2), 1.6 sqrt(2)].
  const at::Tensor x = at::tensor({3.0f, 4.0f}).view({1, 2});
  const at::Tensor w = at::tensor({1.0f, 2.0f});
  const at::Tensor y = rms_norm_reference(x, w, 0.0);
  ASSERT_EQ(y.scalar_type(), at::kDouble);
  ASSERT_EQ(y.sizes(), x.sizes());
  EXPECT_NEAR(y[0][0].item<double>(), 0.6 * std::sqrt(2.0), 1e-15);
  EXPECT_NEAR(y[0][1].item<double>(), 1.6 * std::sqrt(2.0), 1e-15);
}

TEST(RmsNormReference, EpsilonEntersUnderTheRoot) {
  // x = [1, 1], eps = 1: y = x / sqrt(1 + 1).
  const at::Tensor y =
      rms_norm_reference(at::ones({1, 2}, at::kDouble), at::ones({2}, at::kDouble), 1.0);
  EXPECT_NEAR(y[0][0].item<double>(), 1.0 / std::sqrt(2.0), 1e-15);
}

TEST(RmsNormReference, MatchesLoopFormula) {
  at::manual_seed(11);
  const int64_t rows = 5, hidden = 37;
  const double eps = 1e-6;
  const at::Tensor x = at::randn({rows, hidden}, at::kDouble) * 3.0;
  const at::Tensor w = at::randn({hidden}, at::kDouble);
  const at::Tensor y = rms_norm_reference(x.to(at::kBFloat16), w.to(at::kBFloat16), eps);

  // The reference must upcast low-precision inputs before any arithmetic.
  const at::Tensor xb = x.to(at::kBFloat16).to(at::kDouble);
  const at::Tensor wb = w.to(at::kBFloat16).to(at::kDouble);
  auto xa = xb.accessor<double, 2>();
  auto wa = wb.accessor<double, 1>();
  auto ya = y.accessor<double, 2>();
  for (int64_t r = 0; r < rows; ++r) {
    double sum = 0.0;
    for (int64_t j = 0; j < hidden; ++j) sum += xa[r][j] * xa[r][j];
    const double inv_rms = 1.0 / std::sqrt(sum / static_cast<double>(hidden) + eps);
    for (int64_t j = 0; j < hidden; ++j) {
      EXPECT_NEAR(ya[r][j], xa[r][j] * inv_rms * wa[j], 1e-13) << "row " << r << " col " << j;
    }
  }
}

TEST(RmsNormReference, RejectsBadShapes) {
  EXPECT_THROW(rms_norm_reference(at::ones({2, 3}), at::ones({4}), 1e-6), c10::Error);
  EXPECT_THROW(rms_norm_reference(at::ones({2, 3, 4}), at::ones({4}), 1e-6), c10::Error);
  EXPECT_THROW(rms_norm_reference(at::ones({2, 3}), at::ones({3}), -1.0), c10::Error);
  EXPECT_THROW(rms_norm_reference(at::ones({2, 3}, at::kLong), at::ones({3}), 1e-6), c10::Error);
}

}  // namespace
}  // namespace sb
