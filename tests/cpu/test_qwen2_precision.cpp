// bf16-mixed precision on CPU (LibTorch's CPU autocast): the loss stays within bf16's
// accuracy of the fp32 loss, parameters, gradients and AdamW state stay float32, and
// the autocast settings of the thread are restored after every forward.

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <gtest/gtest.h>
#include <torch/optim/adamw.h>

#include <cmath>
#include <stdexcept>

#include "models/qwen2/qwen2_precision.h"
#include "tests/support/qwen2_test_models.h"

namespace sb {
namespace {

using test::make_test_batch;
using test::make_test_model;

TEST(Qwen2Precision, NamesRoundTripAndUnknownIsAnError) {
  for (const auto& name : qwen2_precision_names()) {
    EXPECT_EQ(qwen2_precision_name(qwen2_precision_from_name(name)), name);
  }
  try {
    qwen2_precision_from_name("bf16");
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("bf16-mixed"), std::string::npos) << e.what();
  }
}

struct PrecisionRun {
  double loss = 0;
  at::Tensor logits;
  std::vector<at::Tensor> grads;
};

PrecisionRun run(Qwen2Precision precision) {
  Qwen2ForCausalLM model = make_test_model("qwen2-tiny", 31);
  model->set_precision(precision);
  const auto batch = make_test_batch({40, 17, 64}, 256, 32);
  PrecisionRun result;
  result.logits = model->forward(batch.tokens, batch.positions, batch.sequences);
  const at::Tensor loss =
      at::cross_entropy_loss(result.logits, batch.targets, {}, at::Reduction::Mean);
  loss.backward();
  result.loss = loss.item<double>();
  for (const auto& p : model->parameters()) {
    EXPECT_EQ(p.scalar_type(), at::kFloat);
    EXPECT_EQ(p.grad().scalar_type(), at::kFloat);
    result.grads.push_back(p.grad().flatten());
  }
  return result;
}

TEST(Qwen2Precision, CpuBf16MixedStaysWithinBf16AccuracyOfFp32) {
  const PrecisionRun fp32 = run(Qwen2Precision::kFloat32);
  const PrecisionRun mixed = run(Qwen2Precision::kBFloat16Mixed);
  EXPECT_FALSE(at::autocast::is_autocast_enabled(c10::DeviceType::CPU));
  EXPECT_EQ(mixed.logits.scalar_type(), at::kFloat);
  // bf16 keeps 8 significant bits (unit roundoff u = 2^-9 ~ 0.2%). Measured on this
  // model and batch: loss off by 8e-6 relative, logits by 0.5% of their largest
  // magnitude (~2.5 u), the gradient vector by 0.75% (relative L2). The bounds allow
  // about ten roundoffs, so they hold across seeds yet catch a path that is not bf16
  // (exactly equal) or is broken (off by far more). The loss at initialisation is
  // near ln 256 and insensitive to small logit errors, hence its tighter bound.
  EXPECT_NE(mixed.loss, fp32.loss);
  EXPECT_NEAR(mixed.loss, fp32.loss, 1e-3 * fp32.loss);
  const double logit_scale = fp32.logits.abs().max().item<double>();
  EXPECT_LT(test::max_abs_diff(mixed.logits, fp32.logits), 2e-2 * logit_scale);
  const at::Tensor g32 = at::cat(fp32.grads), gmix = at::cat(mixed.grads);
  const double relative = ((gmix - g32).norm() / g32.norm()).item<double>();
  EXPECT_LT(relative, 3e-2) << "relative L2 gradient error " << relative;
  EXPECT_GT(relative, 0.0);
}

TEST(Qwen2Precision, AdamWStateStaysFloat32UnderBf16Mixed) {
  Qwen2ForCausalLM model = make_test_model("qwen2-test", 33);
  model->set_precision(Qwen2Precision::kBFloat16Mixed);
  const auto batch = make_test_batch({12}, 128, 34);
  torch::optim::AdamW optimizer(model->parameters(), torch::optim::AdamWOptions(1e-3));
  test::summed_loss(model, batch).backward();
  optimizer.step();
  for (const auto& p : model->parameters()) {
    EXPECT_EQ(p.scalar_type(), at::kFloat);
    const auto& state = static_cast<torch::optim::AdamWParamState&>(
        *optimizer.state().at(p.unsafeGetTensorImpl()));
    EXPECT_EQ(state.exp_avg().scalar_type(), at::kFloat);
    EXPECT_EQ(state.exp_avg_sq().scalar_type(), at::kFloat);
  }
}

TEST(Qwen2Precision, GuardRestoresTheThreadsAutocastSettings) {
  ASSERT_FALSE(at::autocast::is_autocast_enabled(c10::DeviceType::CPU));
  {
    Qwen2AutocastGuard guard(c10::DeviceType::CPU, Qwen2Precision::kBFloat16Mixed);
    EXPECT_TRUE(at::autocast::is_autocast_enabled(c10::DeviceType::CPU));
    EXPECT_EQ(at::autocast::get_autocast_dtype(c10::DeviceType::CPU), at::kBFloat16);
    EXPECT_EQ(at::matmul(at::ones({2, 2}), at::ones({2, 2})).scalar_type(), at::kBFloat16);
  }
  EXPECT_FALSE(at::autocast::is_autocast_enabled(c10::DeviceType::CPU));
  {
    Qwen2AutocastGuard guard(c10::DeviceType::CPU, Qwen2Precision::kFloat32);
    EXPECT_FALSE(at::autocast::is_autocast_enabled(c10::DeviceType::CPU));
  }
}

}  // namespace
}  // namespace sb
