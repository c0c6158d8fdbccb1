// bf16-mixed against fp32 on the GPU (CUDA autocast, float32 master weights), and
// activation checkpointing on the GPU (CUDA generator restored for LoRA dropout,
// autocast re-entered in the recomputation). Exits 77 (SKIPPED) without a GPU.

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <gtest/gtest.h>
#include <torch/optim/adamw.h>

#include <map>
#include <string>
#include <vector>

#include "models/qwen2/qwen2_lora.h"
#include "tests/support/qwen2_test_models.h"

namespace sb {
namespace {

using test::make_test_batch;
using test::make_test_model;

test::TestBatch to_cuda(test::TestBatch batch) {
  batch.tokens = batch.tokens.cuda();
  batch.positions = batch.positions.cuda();
  batch.targets = batch.targets.cuda();
  return batch;
}

struct CudaRun {
  double loss = 0;
  at::Tensor logits;                        // [T, V] on the host
  std::map<std::string, at::Tensor> grads;  // on the host
};

struct CudaSetup {
  Qwen2Precision precision = Qwen2Precision::kFloat32;
  bool checkpointing = false;
  double lora_dropout = -1;  // < 0: full fine-tuning
};

CudaRun run_on_gpu(const CudaSetup& setup) {
  Qwen2ForCausalLM model = make_test_model("qwen2-tiny", 41);
  model->to(at::kCUDA);
  if (setup.lora_dropout >= 0) {
    qwen2_apply_lora(model, {8, 16.0, setup.lora_dropout, {"q_proj", "v_proj", "up_proj", "down_proj"}});
    c10::NoGradGuard no_grad;
    for (const auto& item : model->named_parameters()) {
      if (item.key().find(".lora_B.") != std::string::npos) item.value().normal_(0.0, 0.05);
    }
  }
  model->set_precision(setup.precision);
  model->set_activation_checkpointing(setup.checkpointing);
  const auto batch = to_cuda(make_test_batch({96, 33, 160}, 256, 42));
  at::manual_seed(43);  // CPU and CUDA generators: the same dropout masks in every run
  CudaRun result;
  const at::Tensor logits = model->forward(batch.tokens, batch.positions, batch.sequences);
  const at::Tensor loss = at::cross_entropy_loss(logits, batch.targets, {}, at::Reduction::Mean);
  loss.backward();
  result.loss = loss.item<double>();
  result.logits = logits.detach().cpu();
  for (const auto& item : model->named_parameters()) {
    EXPECT_EQ(item.value().scalar_type(), at::kFloat) << item.key();
    if (!item.value().grad().defined()) continue;
    EXPECT_EQ(item.value().grad().scalar_type(), at::kFloat) << item.key();
    result.grads[item.key()] = item.value().grad().cpu();
  }
  return result;
}

// Relative L2 error of all gradients taken as one vector.
double gradient_error(const CudaRun& actual, const CudaRun& expected) {
  std::vector<at::Tensor> a, e;
  for (const auto& [name, grad] : expected.grads) {
    e.push_back(grad.flatten().to(at::kDouble));
    a.push_back(actual.grads.at(name).flatten().to(at::kDouble));
  }
  const at::Tensor ea = at::cat(e);
  return ((at::cat(a) - ea).norm() / ea.norm()).item<double>();
}

TEST(Qwen2PrecisionCuda, Bf16MixedStaysWithinBf16AccuracyOfFp32) {
  const CudaRun fp32 = run_on_gpu({Qwen2Precision::kFloat32, false, -1});
  const CudaRun mixed = run_on_gpu({Qwen2Precision::kBFloat16Mixed, false, -1});
  EXPECT_FALSE(at::autocast::is_autocast_enabled(c10::DeviceType::CUDA));
  // Bounds as in tests/cpu/test_qwen2_precision.cpp: about ten bf16 roundoffs
  // (u = 2^-9) at the scale of each quantity; bf16 really used (not bit-equal).
  EXPECT_NE(mixed.loss, fp32.loss);
  EXPECT_NEAR(mixed.loss, fp32.loss, 1e-3 * fp32.loss);
  const double logit_scale = fp32.logits.abs().max().item<double>();
  EXPECT_LT(test::max_abs_diff(mixed.logits, fp32.logits), 2e-2 * logit_scale);
  const double error = gradient_error(mixed, fp32);
  EXPECT_LT(error, 3e-2) << "relative L2 gradient error " << error;
  EXPECT_GT(error, 0.0);
}

TEST(Qwen2PrecisionCuda, AdamWStateStaysFloat32) {
  Qwen2ForCausalLM model = make_test_model("qwen2-test", 44);
  model->to(at::kCUDA);
  model->set_precision(Qwen2Precision::kBFloat16Mixed);
  const auto batch = to_cuda(make_test_batch({24}, 128, 45));
  torch::optim::AdamW optimizer(model->parameters(), torch::optim::AdamWOptions(1e-3));
  test::summed_loss(model, batch).backward();
  optimizer.step();
  for (const auto& p : model->parameters()) {
    const auto& state = static_cast<torch::optim::AdamWParamState&>(
        *optimizer.state().at(p.unsafeGetTensorImpl()));
    EXPECT_EQ(state.exp_avg().scalar_type(), at::kFloat);
    EXPECT_EQ(state.exp_avg_sq().scalar_type(), at::kFloat);
  }
}

// GPU kernels may sum in a different order from one run to the next (atomics in
// attention and embedding backward), so checkpointed and plain gradients are compared
// as one vector with a relative L2 bound: 1e-5 in fp32 and 2e-3 in bf16-mixed (one
// bf16 rounding flipped here and there). Wrong dropout masks or a float32
// recomputation of a bf16 forward miss by 1e-2 or (much) more.
TEST(Qwen2PrecisionCuda, CheckpointingRestoresCudaGeneratorForLoraDropout) {
  const CudaRun plain = run_on_gpu({Qwen2Precision::kFloat32, false, 0.1});
  const CudaRun checkpointed = run_on_gpu({Qwen2Precision::kFloat32, true, 0.1});
  EXPECT_EQ(plain.grads.size(), 2u * 4u * 4u);  // A and B, 4 modules, 4 layers
  EXPECT_LT(gradient_error(checkpointed, plain), 1e-5);
}

TEST(Qwen2PrecisionCuda, CheckpointingUnderBf16MixedMatchesThePlainModel) {
  const CudaRun plain = run_on_gpu({Qwen2Precision::kBFloat16Mixed, false, 0.1});
  const CudaRun checkpointed = run_on_gpu({Qwen2Precision::kBFloat16Mixed, true, 0.1});
  EXPECT_LT(gradient_error(checkpointed, plain), 2e-3);
  const CudaRun full = run_on_gpu({Qwen2Precision::kBFloat16Mixed, false, -1});
  const CudaRun full_checkpointed = run_on_gpu({Qwen2Precision::kBFloat16Mixed, true, -1});
  EXPECT_LT(gradient_error(full_checkpointed, full), 2e-3);
}

}  // namespace
}  // namespace sb
